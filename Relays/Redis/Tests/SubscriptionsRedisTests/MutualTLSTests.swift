import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

extension Certificates {
    /// Makes a client certificate named `name` signed by this CA (or, with `selfSigned`, by
    /// nobody); returns its certificate and key files.
    func clientCertificate(_ name: String, selfSigned: Bool = false) throws -> (certificate: String, key: String) {
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        if selfSigned {
            try run(
                ["req", "-x509"] + key + ["-keyout", "\(name).key", "-out", "\(name).crt", "-days", "2"]
                    + ["-subj", "/CN=\(name)"])
        } else {
            try run(["req"] + key + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(name)"])
            try run([
                "x509", "-req", "-in", "\(name).csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "\(name).crt", "-days", "2",
            ])
        }
        return (
            directory.appendingPathComponent("\(name).crt").path, directory.appendingPathComponent("\(name).key").path
        )
    }

    private func run(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.currentDirectoryURL = directory
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl \(arguments.joined(separator: " "))")
    }

    /// `redis-server` arguments: TLS only, and every client must show a certificate of this CA.
    func mutualServerArguments(port: Int) -> [String] {
        serverArguments(port: port).dropLast(2) + ["--tls-auth-clients", "yes"]
    }
}

@Suite("Mutual TLS: a client certificate for servers that require one")
struct MutualTLSTests {
    @Test func aClientCertificateOfTheServersCALetsTheRelayIn() throws {
        let certificates = try Certificates()
        let port = freePort()
        let server = try RedisServer(port: port, arguments: certificates.mutualServerArguments(port: port))
        let client = try certificates.clientCertificate("relay")
        var options = fastOptions
        options.tlsCAFile = certificates.caFile
        options.tlsCertificateFile = client.certificate
        options.tlsKeyFile = client.key
        let prefix = uniquePrefix()
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, url: "rediss://127.0.0.1:\(port)", channelPrefix: prefix, options: options)
        let relayB = try RedisRelay(
            center: b, url: "rediss://localhost:\(port)", channelPrefix: prefix, options: options)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        for seq in 0..<500 { a.post(.chat, Message(seq: seq, text: "mutual")) }
        #expect(eventually { received.count >= 500 })
        #expect(received.values == Array(0..<500))
        withExtendedLifetime((tokens, server)) {}
    }

    @Test func noCertificateOrOneTheServerDoesNotTrustIsTLSFailedWithOpenSSLsReason() throws {
        let certificates = try Certificates()
        let port = freePort()
        let server = try RedisServer(port: port, arguments: certificates.mutualServerArguments(port: port))
        var none = fastOptions
        none.tlsCAFile = certificates.caFile
        var stranger = none
        let selfSigned = try certificates.clientCertificate("stranger", selfSigned: true)
        stranger.tlsCertificateFile = selfSigned.certificate
        stranger.tlsKeyFile = selfSigned.key
        // waitsForServer does not hide it: the server answered, with a refusal.
        none.waitsForServer = true
        for options in [none, stranger] {
            do {
                _ = try RedisRelay(center: PostCenter(), url: "rediss://127.0.0.1:\(port)", options: options)
                Issue.record("connected without a trusted certificate")
            } catch {
                guard case .tlsFailed(let text) = error else {
                    Issue.record("\(error)")
                    continue
                }
                // OpenSSL's reason: "… alert certificate required" (none), "… unknown ca" (stranger).
                #expect(text.contains("alert"), "\(text)")
            }
        }
        withExtendedLifetime(server) {}
    }

    @Test func aCertificateWithoutItsKeyOrAMismatchedPairIsRefusedBeforeConnecting() throws {
        let certificates = try Certificates()
        let one = try certificates.clientCertificate("one")
        let two = try certificates.clientCertificate("two")
        var half = fastOptions
        half.tlsCertificateFile = one.certificate
        var mismatched = fastOptions
        mismatched.tlsCertificateFile = one.certificate
        mismatched.tlsKeyFile = two.key
        // Nobody listens there: the files are checked first.
        let port = freePort()
        for (options, expected) in [(half, "set together"), (mismatched, "cannot load the client certificate")] {
            #expect {
                _ = try RedisRelay(center: PostCenter(), url: "rediss://127.0.0.1:\(port)", options: options)
            } throws: { error in
                guard case RedisRelayError.tlsFailed(let text) = error else { return false }
                return text.contains(expected)
            }
        }
    }
}
