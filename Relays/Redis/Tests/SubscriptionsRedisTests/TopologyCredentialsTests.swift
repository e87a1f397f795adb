import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// An ACL user made, for the test only, on the servers of `ports` (a port that does not answer,
/// such as a killed node's, is skipped); `remove()` deletes it from them again.
private struct TemporaryACLUser {
    let name = "relay\(UInt32.random(in: 0...UInt32.max))"
    let password = "pw-\(UUID().uuidString)"
    let ports: [Int]

    /// Makes the user, with every key, channel and command, on each server of `ports`; the ports
    /// that answered.
    init(on ports: [Int]) {
        var made: [Int] = []
        for port in ports {
            let command = ["ACL", "SETUSER", name, "on", ">" + password, "~*", "&*", "+@all"]
            if redisCall(port, command)?.text == "OK" { made.append(port) }
        }
        self.ports = made
    }

    func remove() { for port in ports { _ = redisCall(port, ["ACL", "DELUSER", name]) } }

    /// The URL of `hosts` with this user's credentials, or with a wrong password.
    func url(_ hosts: [Int], wrongPassword: Bool = false) -> String {
        "redis://\(name):\(wrongPassword ? "not-" + password : password)@"
            + hosts.map { "127.0.0.1:\($0)" }.joined(separator: ",")
    }

    /// How many of the server's clients on `port` are logged in as this user.
    func clients(on port: Int) -> Int {
        guard let list = redisCall(port, ["CLIENT", "LIST"])?.text else { return 0 }
        return list.split(whereSeparator: \.isNewline).filter { $0.contains(" user=\(name) ") }.count
    }
}

/// "Credentials and TLS apply to every node the relay talks to (sentinels included)" (the README),
/// on the cluster and the Sentinel set of `Scripts/relay-topology-tests.sh`: a relay whose URL names
/// an ACL user that exists only for the test reaches every node with it, and a wrong password is
/// refused by the initializer with the server's text.
extension ClusterTests {
    @Test func anACLUserOfTheURLIsUsedOnEveryPrimaryAndAWrongPasswordIsRefused() async throws {
        #expect(await settles(timeout: .seconds(30)) { clusterIsOK() && clusterMap() != nil })
        let ports = try #require(TopologyEnvironment.clusterPorts)
        let user = TemporaryACLUser(on: ports)
        defer { user.remove() }
        let map = try #require(clusterMap())
        let primaries = map.primaries  // computed from the 16,384 slots: once
        let seeds = primaries.map(\.port).sorted().prefix(2)
        #expect(Set(primaries.map(\.port)).isSubset(of: user.ports))
        // Names on every primary, so that the relays need a connection to each.
        let prefix = uniquePrefix()
        var names: [String] = []
        var owners: Set<_Address> = []
        for index in 0..<1000 where owners.count < primaries.count || names.count < 6 {
            let name = "n\(index)"
            if let owner = map.owner(ofChannel: prefix + name), !owners.contains(owner) || names.count < 6 {
                owners.insert(owner)
                names.append(name)
            }
        }
        #expect(owners == primaries)
        let traffic = try Traffic(url: user.url(Array(seeds)), topology: .cluster, prefix: prefix, names: names)
        #expect(await traffic.ready())
        for primary in primaries {
            #expect(user.clients(on: primary.port) >= 2, "\(primary): \(user.clients(on: primary.port)) clients")
        }
        traffic.post(rounds: 10)
        #expect(await settles { traffic.receivedCount == 10 * names.count })
        #expect(traffic.relayB.missedPosts == 0 && traffic.relayA.droppedPosts == 0)
        await traffic.close()

        var options = fastOptions
        options.topology = .cluster
        #expect {
            _ = try RedisRelay(
                center: PostCenter(), url: user.url(Array(seeds), wrongPassword: true), channelPrefix: prefix,
                options: options)
        } throws: { error in
            guard case RedisRelayError.authenticationFailed(let text) = error else { return false }
            return text.hasPrefix("WRONGPASS") && !text.contains(user.password)
        }
    }
}

extension SentinelTests {
    @Test func anACLUserOfTheURLIsUsedOnTheSentinelsAndThePrimaryAndAWrongPasswordIsRefused() async throws {
        let sentinels = try #require(TopologyEnvironment.sentinelPorts)
        let named = redisCall(sentinels[0], ["SENTINEL", "get-master-addr-by-name", TopologyEnvironment.masterName])
        let primary = try #require(named.flatMap(_Sentinel.primary(from:)))
        let user = TemporaryACLUser(on: sentinels + [primary.port])
        defer { user.remove() }
        #expect(user.ports.count == sentinels.count + 1)
        let prefix = uniquePrefix()
        let traffic = try Traffic(
            url: user.url(sentinels), topology: .sentinel(masterName: TopologyEnvironment.masterName), prefix: prefix,
            names: ["a", "b"])
        #expect(await traffic.ready())
        // Both relays' connections to the primary are the user's, and so are the ones their watchers
        // keep to a sentinel (for `+switch-master`).
        #expect(user.clients(on: primary.port) >= 4, "\(user.clients(on: primary.port)) clients")
        #expect(await settles { sentinels.map(user.clients(on:)).reduce(0, +) >= 2 })
        traffic.post(rounds: 10)
        #expect(await settles { traffic.receivedCount == 20 })
        #expect(traffic.relayB.missedPosts == 0 && traffic.relayA.droppedPosts == 0)
        await traffic.close()

        var options = fastOptions
        options.topology = .sentinel(masterName: TopologyEnvironment.masterName)
        #expect {
            _ = try RedisRelay(
                center: PostCenter(), url: user.url(sentinels, wrongPassword: true), channelPrefix: prefix,
                options: options)
        } throws: { error in
            guard case RedisRelayError.authenticationFailed(let text) = error else { return false }
            return text.hasPrefix("WRONGPASS") && !text.contains(user.password)
        }
    }
}
