import Foundation
import Synchronization
import Testing

@testable import SubscriptionsRedis

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A loopback TCP proxy to a Redis server (127.0.0.1 on both sides) that can make the network
/// misbehave without closing anything, for the fault tests. Each accepted connection gets a
/// connection to the server and two threads, one per direction, that copy bytes across with
/// blocking `recv` and `send`. Two faults:
///
/// - ``partition()``: every connection open then, and every one accepted until ``heal()``, is dead
///   for good: what arrives is read and discarded, nothing is closed (a partition whose sockets time
///   out on the far side). Connections accepted after `heal()` forward again.
/// - ``blackHole()``: nothing is forwarded in either direction, on any connection (open or accepted
///   meanwhile), and nothing is closed: each direction's thread holds what it read last and reads no
///   more, so the rest waits in the kernel's buffers, as TCP holds unacknowledged data while packets
///   are dropped. After ``resume()`` everything held is delivered, in order, and a close (FIN) that
///   arrived meanwhile is passed on after the bytes before it, as a network that comes back does.
///
/// A real close on one side (outside the faults) is passed on to the other. ``close()`` stops the
/// proxy and closes its sockets (the threads keep the proxy alive until then). Sendable: the flags
/// are atomics, the socket lists are behind a mutex, and each thread owns its buffer.
final class LoopbackProxy: Sendable {
    let port: Int
    private let target: Int
    private let listener: Int32
    private let partitioned = Atomic<Bool>(false)
    private let holding = Atomic<Bool>(false)
    /// Open sockets, the ones that a partition made dead, and whether the proxy was closed.
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
        try #require(bound && listen(fd, 64) == 0)
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

    /// From now on nothing is forwarded either way, on any connection, and nothing is closed.
    func blackHole() { holding.store(true, ordering: .sequentiallyConsistent) }

    /// Forwards again: what was held is delivered in order, closes that arrived meanwhile after it.
    func resume() { holding.store(false, ordering: .sequentiallyConsistent) }

    /// Stops accepting and closes every socket (the threads end as their reads fail).
    func close() {
        resume()
        let fds = state.withLock { state in
            state.stopped = true
            return state.fds
        }
        _ = shutdown(listener, Int32(SHUT_RDWR))
        for fd in fds { _ = shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        defer { _ = _close(listener) }
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            guard let server = try? _openSocket(host: "127.0.0.1", port: target, timeout: .seconds(2)) else {
                _ = _close(client)
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

    /// Waits (polling, 5 ms) while the proxy is a black hole; the data just read stays held.
    private func holdWhileBlackHoled() {
        while holding.load(ordering: .sequentiallyConsistent) { usleep(5_000) }
    }

    private func forward(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            holdWhileBlackHoled()
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { continue }  // SO_RCVTIMEO of _openSocket
            holdWhileBlackHoled()  // what was read during a black hole, or a close, waits for resume()
            guard count > 0 else { break }
            if state.withLock({ $0.dead.contains(source) }) { continue }  // partitioned: silently dropped
            var written = 0
            while written < count {
                let sent = buffer.withUnsafeBytes {
                    send(destination, $0.baseAddress! + written, count - written, Int32(MSG_NOSIGNAL))
                }
                if sent < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) { continue }
                if sent <= 0 { break }
                written += sent
            }
        }
        // A real close on one side (not a partition): pass it on.
        _ = shutdown(destination, Int32(SHUT_RDWR))
    }
}
