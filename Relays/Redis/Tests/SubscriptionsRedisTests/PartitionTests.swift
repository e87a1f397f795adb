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

/// A loopback TCP proxy to a Redis server that can drop traffic without closing anything, as a
/// network partition does: while partitioned, every connection open then, and every connection
/// accepted meanwhile, is dead for good (what arrives is read and discarded, nothing is closed);
/// connections accepted after `heal()` forward again.
final class SilentProxy: Sendable {
    let port: Int
    private let target: Int
    private let listener: Int32
    private let partitioned = Atomic<Bool>(false)
    /// Open sockets, and the generation each pair was accepted in; dead pairs are in `dead`.
    private let state = Mutex<(fds: [Int32], dead: Set<Int32>, stopped: Bool)>(([], [], false))

    init(to target: Int) throws {
        self.target = target
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(fd, address, length) == 0 && getsockname(fd, address, &length) == 0
            }
        }
        try #require(bound && listen(fd, 16) == 0)
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in acceptLoop() }.start()
    }

    /// From now on, nothing gets through, on the connections open now and on any made meanwhile.
    func partition() {
        partitioned.store(true, ordering: .sequentiallyConsistent)
        state.withLock { $0.dead.formUnion($0.fds) }
    }

    /// New connections get through again; the ones that were open stay dead.
    func heal() { partitioned.store(false, ordering: .sequentiallyConsistent) }

    deinit {
        let fds = state.withLock { state in
            state.stopped = true
            return state.fds
        }
        _ = shutdown(listener, Int32(SHUT_RDWR))
        _ = close(listener)
        for fd in fds { _ = shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            guard let server = try? _openSocket(host: "127.0.0.1", port: target, timeout: .seconds(2)) else {
                _ = close(client)
                continue
            }
            let deadNow = partitioned.load(ordering: .sequentiallyConsistent)
            let stopped = state.withLock { state -> Bool in
                state.fds += [client, server]
                if deadNow { state.dead.formUnion([client, server]) }
                return state.stopped
            }
            if stopped { return }
            Thread { [self] in forward(from: client, to: server) }.start()
            Thread { [self] in forward(from: server, to: client) }.start()
        }
    }

    private func forward(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { continue }  // SO_RCVTIMEO of _openSocket
            guard count > 0 else { break }
            if state.withLock({ $0.dead.contains(source) }) { continue }  // silently dropped
            var written = 0
            while written < count {
                let sent = buffer.withUnsafeBytes {
                    send(destination, $0.baseAddress! + written, count - written, Int32(MSG_NOSIGNAL))
                }
                if sent <= 0 { break }
                written += sent
            }
        }
        // A real close on one side (not a partition): pass it on.
        _ = shutdown(destination, Int32(SHUT_RDWR))
    }
}

@Suite("Liveness: a silent partition")
struct PartitionTests {
    @Test func aHealedSilentPartitionDeliversAgainAndCountsWhatWasLost() async throws {
        let proxy = try SilentProxy(to: RedisServer.shared)
        let prefix = uniquePrefix()
        let interval = Duration.milliseconds(200)
        var options = fastOptions
        options.pingInterval = interval
        options.connectTimeout = .milliseconds(400)
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, host: "127.0.0.1", port: RedisServer.shared, channelPrefix: prefix, options: options)
        let relayB = try RedisRelay(
            center: b, host: "127.0.0.1", port: proxy.port, channelPrefix: prefix, options: options)
        var events = EventReader(relayB)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        #expect(await events.next() == .connected)
        for seq in 0..<10 { a.post(.chat, Message(seq: seq, text: "")) }
        #expect(eventually { received.count == 10 })

        proxy.partition()
        for seq in 10..<20 { a.post(.chat, Message(seq: seq, text: "lost")) }
        // B notices the silence by itself (PING unanswered for two intervals).
        guard case .disconnected(let reason) = await events.next() else {
            Issue.record("no disconnection")
            return
        }
        #expect(reason.contains("PING") || reason.contains("no reply"), "\(reason)")
        proxy.heal()
        let healed = ContinuousClock.now

        // A keeps posting; B hears again.
        var seq = 20
        let back = eventually(timeout: .seconds(15)) {
            a.post(.chat, Message(seq: seq, text: ""))
            seq += 1
            Thread.sleep(forTimeInterval: 0.005)
            return (received.values.last ?? 0) >= 20
        }
        #expect(back)
        print("PartitionTests: B received again \(ContinuousClock.now - healed) after the heal (interval \(interval))")
        let values = received.values
        let last = values.last ?? 0
        #expect(values == values.sorted() && Set(values).count == values.count)
        #expect(Array(values.prefix(10)) == Array(0..<10))
        // Every post up to the last received one either arrived or was counted missed.
        #expect(values.count + relayB.missedPosts == last + 1, "\(values.count) + \(relayB.missedPosts) vs \(last)")
        #expect(relayB.missedPosts >= 10)
        withExtendedLifetime((tokens, proxy)) {}
    }
}
