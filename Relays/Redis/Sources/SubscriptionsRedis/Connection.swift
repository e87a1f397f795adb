// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import CHiredis
    import COpenSSL

    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Darwin)
        import Darwin
    #endif

    /// One connection to Redis: a socket (plain or TLS, see `Socket.swift`), an output buffer that
    /// commands are formatted into, and hiredis's reply reader.
    ///
    /// Owned and used by exactly one thread (the publisher's or the subscriber's), which is why it is
    /// neither `Sendable` nor locked. The socket stays blocking: the thread reads only after `poll`
    /// reported input, and writes at most `pipelineDepth` commands ahead of the replies, so a write
    /// never waits for long. Send and receive time-outs bound the rest.
    final class _Connection {
        private let fd: Int32
        /// The OpenSSL session (`SSL *`) of a TLS connection.
        private let ssl: OpaquePointer?
        private let reader: UnsafeMutablePointer<redisReader>
        private var output: [UInt8] = []
        private var input = [UInt8](repeating: 0, count: 64 * 1024)

        private init(fd: Int32, ssl: OpaquePointer?) {
            self.fd = fd
            self.ssl = ssl
            self.reader = redisReaderCreate()
        }

        /// Connects to `endpoint` within `timeout` (for each step: TCP, TLS, each reply), starts TLS
        /// when the endpoint asks for it, authenticates when it has a password, and checks that the
        /// server answers a `PING` (a server that wants a password says so here).
        /// - Throws: ``RedisRelayError/unreachable(host:port:reason:)``,
        ///   ``RedisRelayError/tlsFailed(_:)`` or ``RedisRelayError/authenticationFailed(_:)`` with
        ///   the server's text; never the password.
        static func open(_ endpoint: _Endpoint, tls: _TLSContext?, timeout: Duration) throws(RedisRelayError)
            -> _Connection
        {
            let fd = try _openSocket(host: endpoint.host, port: endpoint.port, timeout: timeout)
            var ssl: OpaquePointer?
            if endpoint.tls {
                guard let tls else { fatalError("SubscriptionsRedis: a TLS endpoint without a TLS context") }
                do {
                    ssl = try tls.start(fd, host: endpoint.host)
                } catch {
                    _ = _close(fd)
                    throw error
                }
            }
            let connection = _Connection(fd: fd, ssl: ssl)
            try connection.handshake(endpoint)
            return connection
        }

        /// A plain connection to `host:port` without `AUTH`: for tests.
        static func open(host: String, port: Int, timeout: Duration) throws(RedisRelayError) -> _Connection {
            try open(_Endpoint(host: host, port: port), tls: nil, timeout: timeout)
        }

        deinit {
            if let ssl {
                SSL_shutdown(ssl)
                SSL_free(ssl)
            }
            _ = _close(fd)
            redisReaderFree(reader)
        }

        /// The socket, for `poll`.
        var socket: Int32 { fd }

        private func handshake(_ endpoint: _Endpoint) throws(RedisRelayError) {
            var commands = 1
            if let password = endpoint.password {
                append(["AUTH"] + (endpoint.user.map { [$0] } ?? []) + [password])
                commands += 1
            }
            append(["PING"])
            guard flush() else {
                // A TLS server that refused the client's certificate may have said why before closing.
                if ssl != nil && tlsFailure == nil { _ = receive { _ in } }
                if let tlsFailure { throw .tlsFailed("TLS handshake with \(endpoint.host) failed: \(tlsFailure)") }
                throw .unreachable(host: endpoint.host, port: endpoint.port, reason: "the connection closed at once")
            }
            while commands > 0 {
                commands -= 1
                // The server's own words (WRONGPASS, NOAUTH, …): they never contain the password.
                if let text = try readReply(endpoint, waitingFor: "AUTH or PING") { throw .authenticationFailed(text) }
            }
        }

        /// Reads the next reply, waiting for it (each read bounded by the receive time-out). Returns the
        /// text of an error reply, `nil` for any other.
        private func readReply(
            _ endpoint: _Endpoint, waitingFor command: String,
            _ inspect: (UnsafeMutablePointer<redisReply>) -> Void = { _ in }
        ) throws(RedisRelayError) -> String? {
            while true {
                let (reply, ok) = nextReply()
                guard ok else {
                    throw .unreachable(
                        host: endpoint.host, port: endpoint.port, reason: "the server's reply is malformed")
                }
                guard let reply else {
                    // A blocking read, bounded by the receive time-out: nothing read is a silent server.
                    var read = 0
                    let open = receive { bytes in
                        read += bytes.count
                        _ = bytes.withMemoryRebound(to: CChar.self) {
                            redisReaderFeed(reader, $0.baseAddress, $0.count)
                        }
                    }
                    if let tlsFailure {
                        throw .tlsFailed("TLS handshake with \(endpoint.host) failed: \(tlsFailure)")
                    }
                    guard open, read > 0 else {
                        throw .unreachable(
                            host: endpoint.host, port: endpoint.port,
                            reason: "no answer to \(command) (is it a Redis server, and TLS if rediss://?)")
                    }
                    continue
                }
                defer { freeReplyObject(reply) }
                inspect(reply)
                guard reply.pointee.type == REDIS_REPLY_ERROR else { return nil }
                return reply.pointee.str.map { String(cString: $0) } ?? "error"
            }
        }

        /// Sends `command` and waits for its reply (each read bounded by the receive time-out), as a
        /// plain value; an error reply is `.error(text)`, not thrown.
        /// - Throws: ``RedisRelayError/unreachable(host:port:reason:)`` when the connection fails.
        func call(_ command: [String], _ endpoint: _Endpoint) throws(RedisRelayError) -> _Reply {
            append(command)
            guard flush() else {
                throw .unreachable(host: endpoint.host, port: endpoint.port, reason: "the connection closed")
            }
            var result = _Reply.null
            _ = try readReply(endpoint, waitingFor: command.first ?? "") { result = _Reply($0) }
            return result
        }

        /// `call` with byte-string arguments.
        func call(bytes command: [[UInt8]], _ endpoint: _Endpoint) throws(RedisRelayError) -> _Reply {
            append(command)
            guard flush() else {
                throw .unreachable(host: endpoint.host, port: endpoint.port, reason: "the connection closed")
            }
            var result = _Reply.null
            _ = try readReply(endpoint, waitingFor: String(decoding: command.first ?? [], as: UTF8.self)) {
                result = _Reply($0)
            }
            return result
        }

        /// Which cluster node, sentinel or primary this connection is to, and the topology epoch it was
        /// made in (see `_TopologyState`); set by whoever opened it.
        var node = _Address(host: "", port: 0)
        var epoch = 0

        /// Sends `command` and waits for its reply; an error reply (such as `NOPERM …`) throws
        /// ``RedisRelayError/permissionDenied(_:)`` with the server's text.
        func require(_ command: [[UInt8]], _ endpoint: _Endpoint) throws(RedisRelayError) {
            append(command)
            guard flush() else {
                throw .unreachable(host: endpoint.host, port: endpoint.port, reason: "the connection closed")
            }
            let name = String(decoding: command.first ?? [], as: UTF8.self)
            if let text = try readReply(endpoint, waitingFor: name) { throw .permissionDenied(text) }
        }

        /// Appends one command (such as `SUBSCRIBE channel`), formatted by hiredis, to the output
        /// buffer; nothing is sent until `flush()`.
        func append(_ arguments: [String]) {
            append(arguments.map { Array($0.utf8) })
        }

        /// Appends one command of byte-string arguments; see the other `append`.
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
                var command: UnsafeMutablePointer<CChar>?
                let length = redisFormatCommandArgv(&command, Int32(arguments.count), &pointers, &lengths)
                guard length > 0, let command else {
                    fatalError("SubscriptionsRedis: hiredis could not format a command")
                }
                output.append(contentsOf: UnsafeRawBufferPointer(start: command, count: Int(length)))
                redisFreeCommand(command)
            }
        }

        /// Appends one `PUBLISH` for each message of `batch` to the output buffer: `counts` gives the
        /// messages in order, as the number of consecutive posts of `batch` each carries (one: the
        /// post's own message; more: a batch message of that many posts of one channel, see `_Wire`).
        /// `sequence(channel, posts)` numbers each message (the first post's number), and `signer`,
        /// when given, signs it. The commands are formatted (RESP) straight into the output buffer,
        /// no per-command formatting or allocation. `sharded`: `SPUBLISH` (a cluster) instead. With
        /// `historyLength > 0` each is an `XADD channel MAXLEN ~ historyLength * m message` instead
        /// (history mode; with `sharded`, sent to the key's primary as well).
        ///
        /// With `retainedKeys` (the byte count of the channel prefix; `nil` in a cluster), a retained
        /// post (kind `T` or `P`, always alone) is first stored: `SET <prefix>retained:<name>` with the
        /// same message signed for the key; a clear (kind `c`) is preceded by the `DEL` of that key.
        /// `command` is told the post count of every command appended, in order (zero for `SET`,
        /// `DEL` and a clear's own message); `sent` is told, right after the last command of each
        /// message (its `SET` or `DEL` included), which posts of `batch` it carried and the number it
        /// was given, so that the same commands can be appended again (see `_Resend`).
        func appendPublishes(
            _ batch: [_Outgoing], counts: [Int], signer: _Signer?, sharded: Bool = false, historyLength: Int = 0,
            retainedKeys: Int? = nil, command: (_ posts: Int) -> Void = { _ in },
            sent: (_ posts: Range<Int>, _ first: UInt64) -> Void = { _, _ in },
            sequence: (_ channel: [UInt8], _ posts: Int) -> UInt64
        ) {
            let cap = Array("\(historyLength)".utf8)
            let signature = signer == nil ? 0 : _Wire.signatureLength
            var start = batch.startIndex
            for count in counts {
                let channel = batch[start].channel
                let kind = batch[start].message[_Wire.headerLength - 1]
                if count == 1, let prefixLength = retainedKeys, _Wire.travelsAlone(kind) {
                    let key = _RetainedOnServer.key(channel: channel, prefixLength: prefixLength)
                    if kind == _Wire.clearRetained {
                        output.append(contentsOf: Self.delPrefix)
                        _appendLength(key.count, to: &output)
                        output.append(contentsOf: key)
                        output.append(contentsOf: [13, 10])
                        command(0)
                        let first = sequence(channel, 1)
                        appendMessage(
                            batch, start: start, count: 1, first: first, signer: signer,
                            sharded: sharded, historyLength: historyLength, cap: cap)
                        command(0)
                        sent(start..<(start + 1), first)
                        start += 1
                        continue
                    }
                    let first = sequence(channel, 1)
                    output.append(contentsOf: Self.setPrefix)
                    _appendLength(key.count, to: &output)
                    output.append(contentsOf: key)
                    output.append(contentsOf: [13, 10])
                    _appendLength(batch[start].message.count + signature, to: &output)
                    let frame = output.count
                    output.append(contentsOf: batch[start].message)
                    _Wire.setSequence(first, in: &output, at: frame)
                    if let signer { signer.sign(channel: key, frameAt: frame, in: &output) }
                    output.append(contentsOf: [13, 10])
                    command(0)
                    appendMessage(
                        batch, start: start, count: 1, first: first, signer: signer, sharded: sharded,
                        historyLength: historyLength, cap: cap)
                    command(1)
                    sent(start..<(start + 1), first)
                    start += 1
                    continue
                }
                let first = sequence(channel, count)
                appendMessage(
                    batch, start: start, count: count, first: first, signer: signer,
                    sharded: sharded, historyLength: historyLength, cap: cap)
                command(count)
                sent(start..<(start + count), first)
                start += count
            }
        }

        /// Appends the `PUBLISH` (or `SPUBLISH`, or `XADD`) of the message of the `count` posts of
        /// `batch` from `start`, numbered `first`; see `appendPublishes`.
        private func appendMessage(
            _ batch: [_Outgoing], start: Int, count: Int, first: UInt64, signer: _Signer?, sharded: Bool,
            historyLength: Int, cap: [UInt8]
        ) {
            let signature = signer == nil ? 0 : _Wire.signatureLength
            let channel = batch[start].channel
            output.append(
                contentsOf: historyLength > 0
                    ? Self.xaddPrefix : sharded ? Self.shardedPublishPrefix : Self.publishPrefix)
            _appendLength(channel.count, to: &output)
            output.append(contentsOf: channel)
            output.append(contentsOf: [13, 10])
            if historyLength > 0 {
                output.append(contentsOf: Self.xaddMaxLength)
                _appendLength(cap.count, to: &output)
                output.append(contentsOf: cap)
                output.append(contentsOf: Self.xaddField)
            }
            let posts = batch[start..<(start + count)]
            let length = count == 1 ? batch[start].message.count : _Wire.batchLength(posts)
            _appendLength(length + signature, to: &output)
            let frame = output.count
            if count == 1 {
                output.append(contentsOf: batch[start].message)
            } else {
                _Wire.appendBatch(posts, to: &output)
            }
            _Wire.setSequence(first, in: &output, at: frame)
            if let signer { signer.sign(channel: channel, frameAt: frame, in: &output) }
            output.append(contentsOf: [13, 10])
        }

        private static let setPrefix = Array("*3\r\n$3\r\nSET\r\n".utf8)
        private static let delPrefix = Array("*2\r\n$3\r\nDEL\r\n".utf8)

        private static let publishPrefix = Array("*3\r\n$7\r\nPUBLISH\r\n".utf8)
        private static let shardedPublishPrefix = Array("*3\r\n$8\r\nSPUBLISH\r\n".utf8)
        /// `XADD key MAXLEN ~ n * m message`, around the key and `n`.
        private static let xaddPrefix = Array("*8\r\n$4\r\nXADD\r\n".utf8)
        private static let xaddMaxLength = Array("$6\r\nMAXLEN\r\n$1\r\n~\r\n".utf8)
        private static let xaddField = Array("\r\n$1\r\n*\r\n$1\r\nm\r\n".utf8)

        /// Appends `PUBLISH channel message` to the output buffer (the message as it is).
        func appendPublish(_ channel: [UInt8], _ message: [UInt8]) {
            append([Array("PUBLISH".utf8), channel, message])
        }

        /// How many bytes wait in the output buffer: a mark for `pendingOutput(from:)`.
        var pendingOutputCount: Int { output.count }

        /// The bytes appended since `mark` and not sent yet: a command's, kept to be sent again
        /// elsewhere (a cluster's redirected `XADD`).
        func pendingOutput(from mark: Int) -> [UInt8] { Array(output[mark...]) }

        /// Appends bytes that are already formatted commands (see `pendingOutput(from:)`).
        func appendFormatted(_ bytes: [UInt8]) { output.append(contentsOf: bytes) }

        /// Writes the whole output buffer. Returns `false` when the connection failed (or a write
        /// waited longer than the time-out).
        func flush() -> Bool {
            defer { output.removeAll(keepingCapacity: output.capacity <= 1 << 20) }
            var written = 0
            return output.withUnsafeBytes { bytes in
                while written < bytes.count {
                    let rest = UnsafeRawBufferPointer(rebasing: bytes[written...])
                    let count: Int
                    if let ssl {
                        count = Int(SSL_write(ssl, rest.baseAddress, Int32(clamping: rest.count)))
                    } else {
                        count = send(fd, rest.baseAddress, rest.count, _sendFlags)
                        if count < 0 && errno == EINTR { continue }
                    }
                    if count <= 0 {
                        if let ssl, SSL_get_error(ssl, Int32(count)) == SSL_ERROR_SSL { tlsFailure = _sslErrorText() }
                        return false
                    }
                    written += count
                }
                return true
            }
        }

        /// Reads what the socket holds (and what TLS decrypted ahead) and hands each chunk to `chunk`.
        /// `false` at end of stream or on error. Call it only after `poll` reported input, or it
        /// blocks up to the time-out.
        private func receive(_ chunk: (UnsafeRawBufferPointer) -> Void) -> Bool {
            repeat {
                let count = input.withUnsafeMutableBytes { buffer -> Int in
                    if let ssl { return Int(SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))) }
                    return recv(fd, buffer.baseAddress, buffer.count, 0)
                }
                if count < 0 && ssl == nil && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
                    return true
                }
                if count <= 0 {
                    // A TLS alert from the server (TLS 1.3 refuses a missing client certificate only
                    // after the client finished its handshake, on the first read): OpenSSL's reason.
                    if let ssl, SSL_get_error(ssl, Int32(count)) == SSL_ERROR_SSL { tlsFailure = _sslErrorText() }
                    return false
                }
                input.withUnsafeBytes { chunk(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            } while ssl.map { SSL_pending($0) > 0 } ?? false
            return true
        }

        /// Why the last read failed, when TLS said why (an alert from the server, such as
        /// `tlsv13 alert certificate required`).
        private(set) var tlsFailure: String?

        /// Reads what the socket holds into hiredis's reader; see `receive`. With a `gate`, the bytes
        /// pass through it first (a bulk string over its limit never reaches hiredis), and a protocol
        /// error it finds returns `false` like a closed connection.
        func readAvailable() -> Bool {
            guard gate != nil else {
                return receive { bytes in
                    _ = bytes.withMemoryRebound(to: CChar.self) { redisReaderFeed(reader, $0.baseAddress, $0.count) }
                }
            }
            var framed = true
            let open = receive { bytes in
                guard framed else { return }
                framed = gate!.feed(bytes, into: &gated)
                _ = gated.withUnsafeBufferPointer { gated in
                    gated.withMemoryRebound(to: CChar.self) { redisReaderFeed(reader, $0.baseAddress, $0.count) }
                }
                gated.removeAll(keepingCapacity: gated.capacity <= 1 << 20)
            }
            return open && framed
        }

        /// Measures every bulk string before hiredis buffers it, when set (the subscriber connection
        /// sets it to `maximumMessageBytes`); see `_LengthGate`.
        var gate: _LengthGate?
        private var gated: [UInt8] = []

        /// For a connection that only ever sends `PUBLISH`, `XADD` and `PING` (whose replies are one line
        /// each, `:n`, `+PONG` or `-error`, or a bulk string holding no line feed, the id `XADD` gives):
        /// reads what the socket holds and calls `reply` for each reply it completes, in order, with
        /// `nil` for a number, status or id and the text of an error, without
        /// hiredis's reader (no reply object per command). `false` at end of stream or on error. Call
        /// it only after `poll` reported input; do not mix it with `readAvailable()` on one connection.
        func readPublishReplies(_ reply: (_ refusal: String?) -> Void) -> Bool {
            receive { bytes in
                for byte in bytes {
                    if atLineStart {
                        lineIsError = !bulkFollows && byte == UInt8(ascii: "-")
                        // A bulk string's length line; its bytes (the next line) complete the reply.
                        lineIsBulkLength = !bulkFollows && byte == UInt8(ascii: "$")
                        atLineStart = false
                        errorLine.removeAll(keepingCapacity: true)
                    } else if lineIsBulkLength && byte == UInt8(ascii: "-") {
                        lineIsBulkLength = false  // `$-1`: a null, complete in itself
                    }
                    if byte == 10 {
                        atLineStart = true
                        if lineIsBulkLength {
                            bulkFollows = true
                            continue
                        }
                        bulkFollows = false
                        reply(lineIsError ? String(decoding: errorLine.prefix { $0 != 13 }, as: UTF8.self) : nil)
                    } else if lineIsError && errorLine.count < 512 && !(errorLine.isEmpty && byte == UInt8(ascii: "-"))
                    {
                        errorLine.append(byte)
                    }
                }
            }
        }

        private var atLineStart = true
        private var lineIsError = false
        private var lineIsBulkLength = false
        /// Whether the line being read is a bulk string's bytes.
        private var bulkFollows = false
        /// The error line being read (its first 512 bytes, without the `-`).
        private var errorLine: [UInt8] = []

        /// The next complete reply already read, or `nil`; `false` in `ok` on a protocol error.
        /// The caller frees the reply with `freeReplyObject`.
        func nextReply() -> (reply: UnsafeMutablePointer<redisReply>?, ok: Bool) {
            var raw: UnsafeMutableRawPointer?
            if redisReaderGetReply(reader, &raw) != REDIS_OK { return (nil, false) }
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
#endif
