import CHiredis
import Foundation
import Subscriptions
import Synchronization
import Testing

@testable import SubscriptionsRedis

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The payload of the typed topics of these tests (and of `RelayPeer`, which declares the same).
struct Message: Codable, Sendable, Equatable {
    var seq: Int
    var text: String
}

extension Topic where Payload == Message {
    static let chat = Topic("chat")
    static let reply = Topic("reply")
}

/// Collects what handlers receive, from any thread.
final class Collector<Element: Sendable>: Sendable {
    private let items = Mutex<[Element]>([])

    func append(_ item: Element) { items.withLock { $0.append(item) } }
    var values: [Element] { items.withLock { $0 } }
    var count: Int { items.withLock { $0.count } }
}

/// Polls `condition` until it holds or `timeout` passes; the caller asserts on the result. Bounds a
/// wait for another thread or process; asserts nothing about time.
func eventually(timeout: Duration = .seconds(20), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        Thread.sleep(forTimeInterval: 0.002)
    }
    return true
}

/// A channel prefix of its own for each test, so that tests sharing a server do not meet.
func uniquePrefix(_ test: String = #function) -> String {
    "test:\(test.prefix { $0 != "(" }):\(UInt32.random(in: 0...UInt32.max)):"
}

/// Options for fast recovery in tests.
var fastOptions: RedisRelay.Options {
    var options = RedisRelay.Options()
    options.reconnectDelay = .milliseconds(10) ... .milliseconds(200)
    return options
}

/// A loopback port nobody listens on (bound then released).
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { _ = close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
            _ = bind(fd, address, length)
            return getsockname(fd, address, &length)
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A `redis-server` child process on a loopback port: no persistence, killed by `stop()` or at exit.
final class RedisServer: @unchecked Sendable {
    // @unchecked: `process` is read and written under `lock` only.
    let port: Int
    /// Extra arguments, such as `["--requirepass", "secret"]`.
    let arguments: [String]
    private let lock = NSLock()
    private var process: Process?

    init(port: Int = freePort(), arguments: [String] = []) throws {
        self.port = port
        self.arguments = arguments
        try start()
    }

    /// The server the relay check script started (`RELAY_REDIS_PORT`), or else one of this
    /// process's, killed at exit; its port is exported so that exit tests' child processes use it.
    static let shared: Int = {
        if let port = ProcessInfo.processInfo.environment["RELAY_REDIS_PORT"].flatMap(Int.init) { return port }
        let server = try! RedisServer()
        sharedServer.withLock { $0 = server }
        sharedPID.store(server.pid, ordering: .relaxed)
        setenv("RELAY_REDIS_PORT", "\(server.port)", 1)
        atexit { kill(RedisServer.sharedPID.load(ordering: .relaxed), SIGKILL) }
        return server.port
    }()
    private static let sharedPID = Atomic<Int32>(0)
    private static let sharedServer = Mutex<RedisServer?>(nil)

    /// The server's process id.
    var pid: Int32 { lock.withLock { process?.processIdentifier ?? 0 } }

    /// Starts the server (again) and waits until it accepts connections.
    func start() throws {
        let process = Process()
        let binary = ProcessInfo.processInfo.environment["REDIS_SERVER"] ?? "redis-server"
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            [
                binary, "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--loglevel", "warning",
            ] + arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        lock.withLock { self.process = process }
        // A TCP connection only: the server may want a password or TLS.
        let up = eventually(timeout: .seconds(10)) {
            guard let fd = try? _openSocket(host: "127.0.0.1", port: port, timeout: .milliseconds(200)) else {
                return false
            }
            _ = _close(fd)
            return true
        }
        if !up { throw ServerError.didNotStart(port) }
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the server: its sockets stay open, it answers nothing.
    /// On Linux, freezing returns once the process is stopped (signals are delivered asynchronously).
    func freeze(_ frozen: Bool) {
        let pid = self.pid
        kill(pid, frozen ? SIGSTOP : SIGCONT)
        #if os(Linux)
            if frozen {
                _ = eventually(timeout: .seconds(10)) {
                    // /proc/<pid>/stat: "pid (name) state ...", the state after the last ')'.
                    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                        let close = stat.lastIndex(of: ")")
                    else { return false }
                    return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
                }
            }
        #endif
    }

    /// Kills the server (SIGKILL: no goodbye to the clients) and waits for it to exit.
    func stop() {
        let taken = lock.withLock { () -> Process? in
            defer { process = nil }
            return process
        }
        guard let process = taken else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }

    enum ServerError: Error { case didNotStart(Int) }
}

/// Publishes raw bytes on a channel with a plain hiredis connection, as a foreign client would.
func publishRaw(port: Int, channel: String, _ messages: [[UInt8]]) throws {
    let connection = try _Connection.open(host: "127.0.0.1", port: port, timeout: .seconds(2))
    for message in messages { connection.appendPublish(Array(channel.utf8), message) }
    #expect(connection.flush())
    var replies = 0
    while replies < messages.count {
        #expect(connection.readAvailable())
        while case (let reply?, true) = connection.nextReply() {
            freeReplyObject(reply)
            replies += 1
        }
    }
}

/// A plain subscriber connection to some channels, as a foreign client would have: sees every
/// message the relays publish there, to check how posts were packed into messages.
final class RawSubscriber {
    private let connection: _Connection
    private let wake = _WakePipe()
    /// The messages received so far, in order.
    private(set) var messages: [[UInt8]] = []

    init(port: Int, channels: [String], password: String? = nil) throws {
        let url = "redis://\(password.map { ":\($0)@" } ?? "")127.0.0.1:\(port)"
        connection = try _Connection.open(_Endpoint(url: url), tls: nil, timeout: .seconds(2))
        connection.append([Array("SUBSCRIBE".utf8)] + channels.map { Array($0.utf8) })
        #expect(connection.flush())
        var confirmed = 0
        #expect(read(until: { confirmed == channels.count }, other: { _ in confirmed += 1 }))
    }

    deinit { wake.close() }

    /// Reads until `enough(messages)` holds (for at most 20 seconds); whether it did.
    func receive(until enough: ([[UInt8]]) -> Bool) -> Bool {
        read(until: { enough(messages) }, other: { _ in })
    }

    /// Reads pushes until `done()` holds (for at most 20 seconds); a message is appended to
    /// `messages`, any other push (a subscription's confirmation) goes to `other`.
    private func read(until done: () -> Bool, other: (UnsafeMutablePointer<redisReply>) -> Void) -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while !done() {
            if ContinuousClock.now >= deadline { return false }
            let ready = _poll(socket: connection.socket, wake: wake, timeoutMilliseconds: 10)
            guard ready.socket else { continue }
            guard connection.readAvailable() else { return false }
            while case (let reply?, true) = connection.nextReply() {
                defer { freeReplyObject(reply) }
                guard reply.pointee.type == REDIS_REPLY_ARRAY, reply.pointee.elements == 3,
                    let elements = reply.pointee.element, let kind = elements[0], let payload = elements[2]
                else { continue }
                let kindText = String(cString: kind.pointee.str)
                if kindText == "message" {
                    messages.append(
                        Array(UnsafeRawBufferPointer(start: payload.pointee.str, count: Int(payload.pointee.len))))
                } else {
                    other(reply)
                }
            }
        }
        return true
    }
}

/// Sends one command to the server of `url` and returns its reply as text (an error reply too).
@discardableResult
func redisCommand(_ url: String, _ arguments: [String]) throws -> String {
    let connection = try _Connection.open(_Endpoint(url: url), tls: nil, timeout: .seconds(2))
    connection.append(arguments)
    #expect(connection.flush())
    while true {
        let (reply, ok) = connection.nextReply()
        try #require(ok)
        if let reply {
            defer { freeReplyObject(reply) }
            if reply.pointee.type == REDIS_REPLY_INTEGER { return "\(reply.pointee.integer)" }
            return reply.pointee.str.map { String(cString: $0) } ?? ""
        }
        try #require(connection.readAvailable())
    }
}

/// Reads a relay's events in the test's own task (a task of its own might never run while other
/// tests block the few threads of the cooperative pool in `eventually`). A read that waits longer
/// than 20 seconds ends the stream, so that a missing event fails the test instead of hanging it.
struct EventReader {
    private var iterator: AsyncStream<RedisRelay.Event>.Iterator
    private weak var relay: RedisRelay?

    init(_ relay: RedisRelay) {
        iterator = relay.events.makeAsyncIterator()
        self.relay = relay
    }

    /// The next event, or `nil` when the stream ended (or 20 seconds passed).
    mutating func next() async -> RedisRelay.Event? {
        let watchdog = DispatchWorkItem { [weak relay] in relay?._endEvents() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 20, execute: watchdog)
        defer { watchdog.cancel() }
        return await iterator.next()
    }

    /// Reads events until one satisfies `last` (included), or the stream ends; returns them.
    mutating func read(until last: (RedisRelay.Event) -> Bool) async -> [RedisRelay.Event] {
        var events: [RedisRelay.Event] = []
        while let event = await next() {
            events.append(event)
            if last(event) { break }
        }
        return events
    }
}
