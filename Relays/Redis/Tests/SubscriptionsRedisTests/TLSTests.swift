import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// A throwaway certificate authority and a server certificate it signed (for `localhost` and
/// `127.0.0.1`), made by the `openssl` command in a temporary directory.
struct Certificates {
    let directory: URL
    var caFile: String { directory.appendingPathComponent("ca.crt").path }
    var certificateFile: String { directory.appendingPathComponent("server.crt").path }
    var keyFile: String { directory.appendingPathComponent("server.key").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try openssl(
            ["req", "-x509"] + Self.newKey + [
                "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=Relay Test CA",
            ])
        _ = try issue("server", subjectAltName: "DNS:localhost,IP:127.0.0.1")
    }

    private static let newKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    /// Another server certificate signed by this CA, naming `subjectAltName` (`DNS:cache.test`,
    /// `IP:127.0.0.1`, …): the paths of `<name>.crt` and `<name>.key`.
    func issue(_ name: String, subjectAltName: String) throws -> (certificate: String, key: String) {
        try openssl(["req"] + Self.newKey + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(name)"])
        try Data("subjectAltName=\(subjectAltName)\n".utf8).write(to: directory.appendingPathComponent("\(name).cnf"))
        try openssl([
            "x509", "-req", "-in", "\(name).csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "\(name).crt", "-days", "2", "-extfile", "\(name).cnf",
        ])
        return (
            directory.appendingPathComponent("\(name).crt").path, directory.appendingPathComponent("\(name).key").path
        )
    }

    private func openssl(_ arguments: [String]) throws {
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

    /// `redis-server` arguments: TLS only, on `port`, with this certificate; clients need none.
    func serverArguments(port: Int) -> [String] {
        [
            "--port", "0", "--tls-port", "\(port)", "--tls-cert-file", certificateFile, "--tls-key-file", keyFile,
            "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no",
        ]
    }
}

@Suite("TLS (rediss://)")
struct TLSTests {
    @Test func rediss_withTheServersCA_relaysPostsAndAuthenticates() throws {
        let certificates = try Certificates()
        let port = freePort()
        let server = try RedisServer(
            port: port, arguments: certificates.serverArguments(port: port) + ["--requirepass", "hunter2"])
        var options = fastOptions
        options.tlsCAFile = certificates.caFile
        let prefix = uniquePrefix()
        let a = PostCenter()
        let b = PostCenter()
        // By IP (checked against the certificate's IP entry) and by name.
        let relayA = try RedisRelay(
            center: a, url: "rediss://:hunter2@127.0.0.1:\(port)", channelPrefix: prefix, options: options)
        let relayB = try RedisRelay(
            center: b, url: "rediss://:hunter2@localhost:\(port)", channelPrefix: prefix, options: options)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        let text = String(repeating: "t", count: 300)
        for seq in 0..<5000 { a.post(.chat, Message(seq: seq, text: text)) }
        #expect(eventually { received.count >= 5000 })
        #expect(received.values == Array(0..<5000))
        #expect(relayA.publishedPosts == 5000 && relayA.droppedPosts == 0)
        withExtendedLifetime((tokens, server)) {}
    }

    @Test func aServerTheCADoesNotVouchForOrAnotherNameIsRefused() throws {
        let certificates = try Certificates()
        let other = try Certificates()
        let port = freePort()
        let server = try RedisServer(port: port, arguments: certificates.serverArguments(port: port))

        var wrongCA = fastOptions
        wrongCA.tlsCAFile = other.caFile
        var wrongName = fastOptions
        wrongName.tlsCAFile = certificates.caFile
        wrongName.tlsServerName = "cache.example.org"
        var missingCA = fastOptions
        missingCA.tlsCAFile = certificates.directory.appendingPathComponent("nothing.pem").path
        for (options, expected) in [
            (wrongCA, "certificate verification failed"), (wrongName, "certificate verification failed"),
            (missingCA, "cannot load the CA file"),
        ] {
            do {
                _ = try RedisRelay(center: PostCenter(), url: "rediss://:hunter2@127.0.0.1:\(port)", options: options)
                Issue.record("connected with \(expected)")
            } catch {
                guard case .tlsFailed(let text) = error else {
                    Issue.record("\(error)")
                    continue
                }
                #expect(text.contains(expected), "\(text)")
                #expect(!"\(error)".contains("hunter2"))
            }
        }
        // Plain redis:// to a TLS port: no answer that makes sense, not a hang.
        var plain = fastOptions
        plain.connectTimeout = .milliseconds(500)
        #expect(throws: RedisRelayError.self) {
            _ = try RedisRelay(center: PostCenter(), url: "redis://127.0.0.1:\(port)", options: plain)
        }
        withExtendedLifetime(server) {}
    }
}
