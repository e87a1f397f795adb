import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// A Redis Cluster of 3 primaries that speaks TLS only to its clients and on its bus
/// (`tls-cluster yes`), started by the test itself (no topology script): the README's "Credentials
/// and TLS apply to every node" and "each node's certificate must name the address the cluster
/// reports for it (or `Options.tlsServerName`)".
@Suite("Cluster over TLS (rediss://)", .serialized)
struct ClusterTLSTests {
    /// Three nodes, slots split in thirds. Each listens for TLS on `tlsPorts[i]` (the port
    /// `CLUSTER SLOTS` reports to a TLS client) and, for this test's own setup calls only, in
    /// plain text on its `RedisServer` port.
    struct TLSCluster {
        let servers: [RedisServer]
        let tlsPorts: [Int]

        /// `certificates[i]` is node i's certificate and key, signed by `authority`.
        init(authority: Certificates, certificates: [(certificate: String, key: String)]) throws {
            let directory = authority.directory
            var servers: [RedisServer] = []
            var tlsPorts: [Int] = []
            var busPorts: [Int] = []
            for (index, files) in certificates.enumerated() {
                let tlsPort = freePort()
                let busPort = freePort()
                let arguments = [
                    "--tls-port", "\(tlsPort)", "--tls-cert-file", files.certificate, "--tls-key-file", files.key,
                    "--tls-ca-cert-file", authority.caFile, "--tls-auth-clients", "no", "--tls-cluster", "yes",
                    "--tls-replication", "yes", "--cluster-enabled", "yes", "--cluster-port", "\(busPort)",
                    "--cluster-config-file", directory.appendingPathComponent("nodes-\(index)-\(tlsPort).conf").path,
                    "--cluster-node-timeout", "2000", "--dir", directory.path,
                ]
                servers.append(try RedisServer(arguments: arguments))
                tlsPorts.append(tlsPort)
                busPorts.append(busPort)
            }
            self.servers = servers
            self.tlsPorts = tlsPorts
            let thirds = [(0, 5460), (5461, 10922), (10923, 16383)]
            for (server, range) in zip(servers, thirds) {
                let reply = redisCall(server.port, ["CLUSTER", "ADDSLOTSRANGE", "\(range.0)", "\(range.1)"])
                try #require(reply?.text == "OK", "\(String(describing: reply))")
            }
            for index in 1..<servers.count {
                let reply = redisCall(
                    servers[0].port, ["CLUSTER", "MEET", "127.0.0.1", "\(tlsPorts[index])", "\(busPorts[index])"])
                try #require(reply?.text == "OK", "\(String(describing: reply))")
            }
        }

        /// Every node says `cluster_state:ok` and knows the others.
        var isOK: Bool {
            servers.allSatisfy { server in
                guard let text = redisCall(server.port, ["CLUSTER", "INFO"])?.text else { return false }
                return text.contains("cluster_state:ok") && text.contains("cluster_known_nodes:3")
            }
        }

        /// The primary (its index) that owns `channel`'s slot.
        func owner(of channel: String) -> Int {
            let slot = _ClusterSlot.of(channel)
            return slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2
        }

        var seedURL: String { "rediss://127.0.0.1:\(tlsPorts[0])" }
    }

    private func relay(
        _ center: PostCenter, _ cluster: TLSCluster, ca: String, prefix: String, history: Int = 0,
        serverName: String? = nil
    ) throws -> RedisRelay {
        var options = fastOptions
        options.topology = .cluster
        options.tlsCAFile = ca
        options.tlsServerName = serverName
        options.historyLength = history
        options.connectTimeout = .seconds(1)
        return try RedisRelay(center: center, url: cluster.seedURL, channelPrefix: prefix, options: options)
    }

    /// Two relays of `names` (A, and B whose center collects the flags of what arrives), both
    /// ready; A posts each name once, its flag the name; returns once all arrived (or the wait ran
    /// out: the caller checks what did).
    private func postThroughTwoRelays(
        _ names: [String], _ cluster: TLSCluster, ca: String, prefix: String, history: Int = 0,
        serverName: String? = nil
    ) async throws -> (relayA: RedisRelay, relayB: RedisRelay, received: Collector<String>, tokens: [Subscription]) {
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try relay(a, cluster, ca: ca, prefix: prefix, history: history, serverName: serverName)
        let relayB = try relay(b, cluster, ca: ca, prefix: prefix, history: history, serverName: serverName)
        let received = Collector<String>()
        var tokens: [Subscription] = []
        for name in names {
            tokens += [relayA.relay(name), relayB.relay(name), b.subscribe(name) { received.append($0.flag) }]
        }
        #expect(await settles { relayA.waitUntilReady(timeout: .zero) && relayB.waitUntilReady(timeout: .zero) })
        for name in names { a.post(name, flag: name) }
        #expect(await settles { received.count == names.count })
        return (relayA, relayB, received, tokens)
    }

    /// Names (with `prefix`) owned by each of the 3 primaries, `perNode` each.
    private func names(_ cluster: TLSCluster, prefix: String, perNode: Int) -> [String] {
        var chosen: [[String]] = [[], [], []]
        var index = 0
        while chosen.contains(where: { $0.count < perNode }) {
            let name = "n\(index)"
            let node = cluster.owner(of: prefix + name)
            if chosen[node].count < perNode { chosen[node].append(name) }
            index += 1
        }
        return chosen.flatMap { $0 }
    }

    /// Both modes: from one `rediss://` seed, the relay reads the map over TLS (which reports the
    /// nodes' TLS ports), reaches every primary over TLS with the URL's CA, and relays each name on
    /// its owner: every post arrives, and each primary ran the commands of its own names.
    @Test(arguments: [0, 10_000])
    func aClusterThatSpeaksOnlyTLSIsReachedOnEveryPrimary(history: Int) async throws {
        let authority = try Certificates()
        let certificates = try (0..<3).map { try authority.issue("node\($0)", subjectAltName: "IP:127.0.0.1") }
        let cluster = try TLSCluster(authority: authority, certificates: certificates)
        #expect(await settles(timeout: .seconds(30)) { cluster.isOK })
        let prefix = uniquePrefix()
        let names = names(cluster, prefix: prefix, perNode: 2)
        let (relayA, relayB, received, tokens) = try await postThroughTwoRelays(
            names, cluster, ca: authority.caFile, prefix: prefix, history: history)
        #expect(Set(received.values) == Set(names))
        #expect(await settles { relayA.publishedPosts == names.count })
        #expect(relayA.droppedPosts == 0)
        // Each primary ran its own names' commands (2 posts; a tail announcement may add one).
        let command = history > 0 ? "xadd" : "spublish"
        for server in cluster.servers {
            #expect(redisCalls(server.port, command) >= 2, "\(server.port): \(redisCalls(server.port, command))")
        }
        withExtendedLifetime((tokens, relayB, cluster)) {}
    }

    /// The seed's certificate names its address, the other nodes' do not: the relay checks every
    /// node it reaches. Started on the seed (its first connections go to the owner of its prefix's
    /// slot), it never gets ready and says which nodes it cannot reach; started on another node, it
    /// throws the verification failure; with `tlsServerName` set to the name every certificate
    /// carries, it relays on all three.
    @Test func everyNodesCertificateIsCheckedNotOnlyTheSeeds() async throws {
        let authority = try Certificates()
        let certificates = [
            try authority.issue("seed", subjectAltName: "IP:127.0.0.1,DNS:cache.test"),
            try authority.issue("other1", subjectAltName: "DNS:cache.test"),
            try authority.issue("other2", subjectAltName: "DNS:cache.test"),
        ]
        let cluster = try TLSCluster(authority: authority, certificates: certificates)
        #expect(await settles(timeout: .seconds(30)) { cluster.isOK })
        let base = uniquePrefix()
        let prefixes = (0..<1000).lazy.map { "\(base)\($0):" }
        let onSeed = try #require(prefixes.first { cluster.owner(of: $0) == 0 })
        let onOther = try #require(prefixes.first { cluster.owner(of: $0) == 1 })
        let names = names(cluster, prefix: onSeed, perNode: 1)

        let refused = try relay(PostCenter(), cluster, ca: authority.caFile, prefix: onSeed)
        let log = EventLog(refused)
        let refusedTokens = names.map { refused.relay($0) }
        let others = cluster.tlsPorts.dropFirst().map { "127.0.0.1:\($0)" }
        #expect(
            await settles {
                log.values.contains {
                    if case .disconnected(let reason) = $0 { others.contains { reason.contains($0) } } else { false }
                }
            }, "\(log.values)")
        #expect(!refused.waitUntilReady(timeout: .zero))
        #expect(!log.values.contains(.connected))
        do {
            _ = try relay(PostCenter(), cluster, ca: authority.caFile, prefix: onOther)
            Issue.record("a relay started on a node whose certificate does not name its address")
        } catch {
            #expect("\(error)".contains("certificate verification failed"), "\(error)")
        }

        var (relayA, relayB, received, tokens) = try await postThroughTwoRelays(
            names, cluster, ca: authority.caFile, prefix: onSeed, serverName: "cache.test")
        #expect(Set(received.values) == Set(names))
        // Started on another node, with the name: it starts too.
        let started = try relay(PostCenter(), cluster, ca: authority.caFile, prefix: onOther, serverName: "cache.test")
        tokens.append(started.relay("any"))
        #expect(await settles { started.waitUntilReady(timeout: .zero) })
        await refused.close()
        withExtendedLifetime((tokens, refusedTokens, relayA, relayB, cluster)) {}
    }
}
