import CHiredis

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One hiredis connection and the only platform code of the relay (sockets, `poll`, pipes).
///
/// Owned and used by exactly one thread (the publisher's or the subscriber's), which is why it is
/// neither `Sendable` nor locked. The socket stays blocking: the thread calls `readAvailable()`
/// only after `poll` reported input, and writes at most `pipelineDepth` commands ahead of the
/// replies, so a write never waits for long. Send and receive time-outs bound the rest.
final class _Connection {
    private let context: UnsafeMutablePointer<redisContext>

    /// Connects to `host:port`, waiting at most `timeout`.
    init(host: String, port: Int, timeout: Duration) throws(RedisRelayError) {
        let tv = _timeval(timeout)
        guard let context = redisConnectWithTimeout(host, Int32(clamping: port), tv) else {
            throw .unreachable(host: host, port: port, reason: "hiredis could not allocate a context")
        }
        if context.pointee.err != 0 {
            let reason = _errorText(context)
            redisFree(context)
            throw .unreachable(host: host, port: port, reason: reason)
        }
        self.context = context
        _ = redisSetTimeout(context, tv)
        _ignoreBrokenPipe(context.pointee.fd)
    }

    deinit { redisFree(context) }

    /// The socket, for `poll`.
    var fd: Int32 { context.pointee.fd }

    /// hiredis's text for the connection's error.
    var errorText: String { _errorText(context) }

    /// Appends one command (such as `SUBSCRIBE channel`) to the output buffer; nothing is sent
    /// until `flush()`.
    func append(_ arguments: [[UInt8]]) {
        let joined = Array(arguments.joined()) + [0]
        joined.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            var pointers: [UnsafePointer<CChar>?] = []
            var lengths: [Int] = []
            var offset = 0
            for argument in arguments {
                pointers.append(base + offset)
                lengths.append(argument.count)
                offset += argument.count
            }
            _ = redisAppendCommandArgv(context, Int32(arguments.count), &pointers, &lengths)
        }
    }

    /// Appends one `PUBLISH` for each message of `batch` to the output buffer: `counts` gives the
    /// messages in order, as the number of consecutive posts of `batch` each carries (one: the
    /// post's own message; more: a batch message of that many posts of one channel, see `_Wire`).
    /// The commands are formatted (RESP) into one reused buffer and handed to hiredis in one call,
    /// no per-command formatting or allocation.
    func appendPublishes(_ batch: [_Outgoing], counts: [Int]) {
        scratch.removeAll(keepingCapacity: true)
        var start = batch.startIndex
        for count in counts {
            let channel = batch[start].channel
            scratch.append(contentsOf: Self.publishPrefix)
            _appendLength(channel.count, to: &scratch)
            scratch.append(contentsOf: channel)
            scratch.append(contentsOf: [13, 10])
            if count == 1 {
                let message = batch[start].message
                _appendLength(message.count, to: &scratch)
                scratch.append(contentsOf: message)
            } else {
                let posts = batch[start..<(start + count)]
                _appendLength(_Wire.batchLength(posts), to: &scratch)
                _Wire.appendBatch(posts, to: &scratch)
            }
            scratch.append(contentsOf: [13, 10])
            start += count
        }
        scratch.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { bytes in
                _ = redisAppendFormattedCommand(context, bytes.baseAddress, bytes.count)
            }
        }
    }

    private var scratch: [UInt8] = []
    private static let publishPrefix = Array("*3\r\n$7\r\nPUBLISH\r\n".utf8)

    /// Appends `PUBLISH channel message` to the output buffer.
    func appendPublish(_ channel: [UInt8], _ message: [UInt8]) {
        Self.publish.withUnsafeBufferPointer { command in
            channel.withUnsafeBufferPointer { channel in
                message.withUnsafeBufferPointer { message in
                    var pointers: (UnsafeRawPointer?, UnsafeRawPointer?, UnsafeRawPointer?) = (
                        UnsafeRawPointer(command.baseAddress),
                        UnsafeRawPointer(channel.baseAddress ?? command.baseAddress),
                        UnsafeRawPointer(message.baseAddress ?? command.baseAddress)
                    )
                    var lengths: (Int, Int, Int) = (command.count, channel.count, message.count)
                    withUnsafeMutablePointer(to: &pointers) { pointers in
                        withUnsafeMutablePointer(to: &lengths) { lengths in
                            let argv = UnsafeMutableRawPointer(pointers).assumingMemoryBound(
                                to: UnsafePointer<CChar>?.self)
                            let argl = UnsafeMutableRawPointer(lengths).assumingMemoryBound(to: Int.self)
                            _ = redisAppendCommandArgv(context, 3, argv, argl)
                        }
                    }
                }
            }
        }
    }

    private static let publish = Array("PUBLISH".utf8)

    /// Writes the whole output buffer. Returns `false` when the connection failed.
    func flush() -> Bool {
        var done: Int32 = 0
        while done == 0 {
            if redisBufferWrite(context, &done) != REDIS_OK { return false }
        }
        return true
    }

    /// Reads what the socket holds into hiredis's reader. Returns `false` at end of stream or on
    /// error. Call it only after `poll` reported input, or it blocks up to the time-out.
    func readAvailable() -> Bool {
        redisBufferRead(context) == REDIS_OK
    }

    /// For a connection that only ever sends `PUBLISH` (whose replies are one line each: `:n` or
    /// `-error`): reads what the socket holds and calls `reply` for each reply it completes, in
    /// order, with `true` for a number and `false` for an error, without hiredis's reader (no reply
    /// object per command). `false` at end of stream or on error. Call it only after `poll`
    /// reported input; do not mix it with `readAvailable()` on one connection.
    func readPublishReplies(_ reply: (_ acknowledged: Bool) -> Void) -> Bool {
        let received = lineBuffer.withUnsafeMutableBytes { buffer in
            recv(fd, buffer.baseAddress, buffer.count, 0)
        }
        if received < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) { return true }
        if received <= 0 { return false }
        lineBuffer.withUnsafeBytes { buffer in
            for index in 0..<received {
                let byte = buffer[index]
                if atLineStart {
                    lineIsError = byte == UInt8(ascii: "-")
                    atLineStart = false
                }
                if byte == 10 {
                    reply(!lineIsError)
                    atLineStart = true
                }
            }
        }
        return true
    }

    private var lineBuffer = [UInt8](repeating: 0, count: 16 * 1024)
    private var atLineStart = true
    private var lineIsError = false

    /// The next complete reply already read, or `nil`; `false` in `ok` on a protocol error.
    /// The caller frees the reply with `freeReplyObject`.
    func nextReply() -> (reply: UnsafeMutablePointer<redisReply>?, ok: Bool) {
        var raw: UnsafeMutableRawPointer?
        if redisGetReplyFromReader(context, &raw) != REDIS_OK { return (nil, false) }
        return (raw?.assumingMemoryBound(to: redisReply.self), true)
    }
}

/// Appends `$<count>\r\n` (a RESP bulk string's length line).
private func _appendLength(_ count: Int, to bytes: inout [UInt8]) {
    bytes.append(UInt8(ascii: "$"))
    var digits:
        (
            UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
            UInt8, UInt8, UInt8, UInt8, UInt8
        ) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    var value = count
    var used = 0
    withUnsafeMutableBytes(of: &digits) { digits in
        repeat {
            digits[19 - used] = UInt8(ascii: "0") + UInt8(value % 10)
            value /= 10
            used += 1
        } while value > 0
        bytes.append(contentsOf: digits[(20 - used)...])
    }
    bytes.append(13)
    bytes.append(10)
}

private func _errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
    withUnsafeBytes(of: context.pointee.errstr) { bytes in
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }
}

private func _timeval(_ duration: Duration) -> timeval {
    let (seconds, attoseconds) = duration.components
    var tv = timeval()
    tv.tv_sec = .init(seconds)
    tv.tv_usec = .init(attoseconds / 1_000_000_000_000)
    return tv
}

/// A write to a socket the server closed must fail with `EPIPE`, not kill the process. Darwin has
/// a per-socket option; Linux only the process-wide signal disposition, which is changed only when
/// nobody set it (still `SIG_DFL`).
private func _ignoreBrokenPipe(_ fd: Int32) {
    #if canImport(Darwin)
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size))
    #else
        var current = sigaction()
        if sigaction(SIGPIPE, nil, &current) == 0, current.__sigaction_handler.sa_handler == nil {
            signal(SIGPIPE, SIG_IGN)
        }
    #endif
}

/// A self-pipe that wakes a thread blocked in `poll`. Both ends are non-blocking: a full pipe
/// means a wake-up is already pending.
struct _WakePipe: Sendable {
    let readEnd: Int32
    let writeEnd: Int32

    init() {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { fatalError("SubscriptionsRedis: pipe() failed (errno \(errno))") }
        readEnd = fds[0]
        writeEnd = fds[1]
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
    }

    func wake() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    func drain() {
        var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &buffer, { read(readEnd, $0.baseAddress, $0.count) }) > 0 {}
    }

    func close() {
        _ = closeFD(readEnd)
        _ = closeFD(writeEnd)
    }
}

private func closeFD(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
        Glibc.close(fd)
    #else
        Darwin.close(fd)
    #endif
}

/// What `_poll` saw.
struct _Readiness {
    var socket = false
    var wake = false
}

/// Waits until `socket` (when given) has input or has closed, or `wake` was written, at most
/// `timeoutMilliseconds` (-1: no limit).
func _poll(socket: Int32?, wake: _WakePipe, timeoutMilliseconds: Int32) -> _Readiness {
    var fds = [pollfd(fd: wake.readEnd, events: Int16(POLLIN), revents: 0)]
    if let socket { fds.append(pollfd(fd: socket, events: Int16(POLLIN), revents: 0)) }
    let count = poll(&fds, nfds_t(fds.count), timeoutMilliseconds)
    var readiness = _Readiness()
    guard count > 0 else { return readiness }
    readiness.wake = fds[0].revents != 0
    if fds.count > 1 { readiness.socket = fds[1].revents != 0 }
    return readiness
}

/// A per-thread marker: the inbound binding whose message this thread is posting right now, so that
/// the relay's own handler for that name does not publish it back (see `_Inbound`).
enum _ThreadMarker {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        guard pthread_key_create(&key, nil) == 0 else {
            fatalError("SubscriptionsRedis: pthread_key_create failed")
        }
        return key
    }()

    static var current: UnsafeMutableRawPointer? { pthread_getspecific(key) }

    static func with<R>(_ marker: UnsafeMutableRawPointer?, _ body: () -> R) -> R {
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, marker)
        defer { pthread_setspecific(key, previous) }
        return body()
    }
}
