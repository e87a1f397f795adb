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
        /// The commands appended and not sent yet (formatted here and in Connection+Publishes.swift).
        var output: [UInt8] = []
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
#endif
