// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import COpenSSL

    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Darwin)
        import Darwin
    #endif

    /// The relay's platform code: TCP sockets, OpenSSL's TLS on them, `poll`, wake-up pipes and a
    /// per-thread marker. Everything else is portable Swift over these.

    /// A connected TCP socket, blocking, with send and receive time-outs of `timeout` and Nagle off.
    /// - Throws: ``RedisRelayError/unreachable(host:port:reason:)`` naming the last failure.
    func _openSocket(host: String, port: Int, timeout: Duration) throws(RedisRelayError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw .unreachable(host: host, port: port, reason: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var reason = "no address"
        var next: UnsafeMutablePointer<addrinfo>? = list
        while let address = next {
            next = address.pointee.ai_next
            let fd = socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
            guard fd >= 0 else {
                reason = _errnoText()
                continue
            }
            if let failure = _connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen, timeout) {
                reason = failure
                _ = _close(fd)
                continue
            }
            var tv = _timeval(timeout)
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            var on: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            _ignoreBrokenPipe(fd)
            return fd
        }
        throw .unreachable(host: host, port: port, reason: reason)
    }

    /// Connects `fd` within `timeout`; the failure's text, or `nil`. Leaves the socket blocking.
    private func _connect(
        _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: socklen_t, _ timeout: Duration
    ) -> String? {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        defer { _ = fcntl(fd, F_SETFL, flags) }
        if connect(fd, address, length) == 0 { return nil }
        guard errno == EINPROGRESS else { return _errnoText() }
        var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let ready = poll(&entry, 1, _milliseconds(timeout))
        guard ready > 0 else { return ready == 0 ? "connection timed out" : _errnoText() }
        var error: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
        return error == 0 ? nil : String(cString: strerror(error))
    }

    /// An OpenSSL client context: peers are verified against `caFile` (or the system's roots), and
    /// their certificate must name the server (`serverName`, or the host of the URL).
    ///
    /// `@unchecked Sendable`: OpenSSL's `SSL_CTX` may be shared by threads once set up; it is only
    /// read after `init` (each connection makes its own `SSL` from it).
    final class _TLSContext: @unchecked Sendable {
        let context: OpaquePointer
        let serverName: String?

        /// - Parameters:
        ///   - caFile: The CA certificates (PEM) the server's certificate must chain to; `nil`: the
        ///     system's.
        ///   - serverName: The name the server's certificate must carry; `nil`: the URL's host.
        ///   - certificateFile: The client certificate (PEM, its chain after it), sent to a server that
        ///     asks for one; set with `keyFile` or not at all.
        ///   - keyFile: The client certificate's private key (PEM, not encrypted).
        /// - Throws: ``RedisRelayError/tlsFailed(_:)`` when a file cannot be loaded, the key does not
        ///   match the certificate, or only one of the two is given.
        init(
            caFile: String?, serverName: String?, certificateFile: String? = nil, keyFile: String? = nil
        ) throws(RedisRelayError) {
            guard (certificateFile == nil) == (keyFile == nil) else {
                throw .tlsFailed("Options.tlsCertificateFile and Options.tlsKeyFile must be set together")
            }
            guard let context = SSL_CTX_new(TLS_client_method()) else {
                throw .tlsFailed("cannot create an OpenSSL context: \(_sslErrorText())")
            }
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            _relay_SSL_CTX_set_auto_retry(context)
            _relay_SSL_CTX_set_min_tls12(context)
            let loaded =
                if let caFile {
                    SSL_CTX_load_verify_locations(context, caFile, nil)
                } else {
                    SSL_CTX_set_default_verify_paths(context)
                }
            guard loaded == 1 else {
                let reason = _sslErrorText()
                SSL_CTX_free(context)
                throw .tlsFailed("cannot load the CA file \(caFile ?? "(system)"): \(reason)")
            }
            if let certificateFile, let keyFile {
                ERR_clear_error()
                guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1,
                    SSL_CTX_use_PrivateKey_file(context, keyFile, SSL_FILETYPE_PEM) == 1,
                    SSL_CTX_check_private_key(context) == 1
                else {
                    let reason = _sslErrorText()
                    SSL_CTX_free(context)
                    throw .tlsFailed(
                        "cannot load the client certificate \(certificateFile) or key \(keyFile): \(reason)")
                }
            }
            self.context = context
            self.serverName = serverName
        }

        deinit { SSL_CTX_free(context) }

        /// Runs the TLS handshake on `fd` (blocking, bounded by its time-outs) and checks the
        /// server's certificate against `host` (or `serverName`).
        func start(_ fd: Int32, host: String) throws(RedisRelayError) -> OpaquePointer {
            guard let ssl = SSL_new(context) else { throw .tlsFailed("SSL_new failed: \(_sslErrorText())") }
            let name = serverName ?? host
            if _isIPAddress(name) {
                _ = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name)
            } else {
                _ = _relay_SSL_set_tlsext_host_name(ssl, name)
                _ = SSL_set1_host(ssl, name)
            }
            _ = SSL_set_fd(ssl, fd)
            ERR_clear_error()
            guard SSL_connect(ssl) == 1 else {
                let verify = SSL_get_verify_result(ssl)
                let reason =
                    verify != X509_V_OK
                    ? "certificate verification failed: " + String(cString: X509_verify_cert_error_string(verify))
                    : _sslErrorText()
                SSL_free(ssl)
                throw .tlsFailed("TLS handshake with \(name) failed: \(reason)")
            }
            return ssl
        }
    }

    private func _isIPAddress(_ text: String) -> Bool {
        var buffer = (UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &buffer) { bytes in
            inet_pton(AF_INET, text, bytes.baseAddress) == 1 || inet_pton(AF_INET6, text, bytes.baseAddress) == 1
        }
    }

    /// OpenSSL's queued errors as text (or a generic phrase when there are none).
    func _sslErrorText() -> String {
        var texts: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            texts.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        if texts.isEmpty { return errno != 0 ? _errnoText() : "the peer closed the connection" }
        return texts.joined(separator: "; ")
    }

    func _errnoText() -> String { String(cString: strerror(errno)) }

    func _close(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
            Glibc.close(fd)
        #else
            Darwin.close(fd)
        #endif
    }

    func _timeval(_ duration: Duration) -> timeval {
        let (seconds, attoseconds) = duration.components
        var tv = timeval()
        tv.tv_sec = .init(seconds)
        tv.tv_usec = .init(attoseconds / 1_000_000_000_000)
        return tv
    }

    /// `duration` in whole milliseconds for `poll`, at least 1, at most `Int32.max`.
    func _milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        return Int32(clamping: max(seconds * 1000 + attoseconds / 1_000_000_000_000_000, 1))
    }

    /// A write to a socket the server closed must fail with `EPIPE`, not kill the process. Darwin has
    /// a per-socket option; Linux only the process-wide signal disposition, which is changed only when
    /// nobody set it (still `SIG_DFL`). Plain writes also pass `MSG_NOSIGNAL` on Linux; TLS writes
    /// cannot.
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

    /// The flags of a plain `send`.
    let _sendFlags: Int32 = {
        #if canImport(Glibc)
            Int32(MSG_NOSIGNAL)
        #else
            0
        #endif
    }()

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
            _ = _close(readEnd)
            _ = _close(writeEnd)
        }
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
#endif
