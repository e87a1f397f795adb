// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    /// Where and how a relay connects: parsed from a `redis://` or `rediss://` URL, or made from a host
    /// and a port. Immutable; shared by both connection threads.
    ///
    /// Its `description` never shows the password, so that it can go into any error or log.
    struct _Endpoint: Sendable, CustomStringConvertible {
        var host: String
        var port: Int
        /// The ACL user for `AUTH`, or `nil` for the `default` user.
        var user: String?
        /// The password for `AUTH`, or `nil` to send no `AUTH`.
        var password: String?
        /// Whether the connection is TLS (`rediss://`).
        var tls: Bool
        /// Every host of the URL, in its order (`host` and `port` are the first): a cluster's seed
        /// nodes or the sentinels, see `RedisRelay.Topology`.
        var seeds: [_Address]

        init(host: String, port: Int) {
            self.host = host
            self.port = port
            self.tls = false
            self.seeds = [_Address(host: host, port: port)]
        }

        /// Parses `redis://[user[:password]@]host[:port][/db]` or the same with `rediss://` (TLS).
        /// User and password may be percent-encoded; an IPv6 host is written in brackets. The port
        /// defaults to 6379; a database number is accepted and ignored (pub/sub spans databases).
        /// Several hosts may follow the credentials, comma-separated (`host1:7001,host2:7002`): the
        /// seeds of a cluster or the sentinels; each without a port gets 6379.
        /// - Throws: ``RedisRelayError/invalidURL(_:)``, whose text never contains the password.
        init(url: String) throws(RedisRelayError) {
            let rest: Substring
            if url.hasPrefix("redis://") {
                tls = false
                rest = url.dropFirst("redis://".count)
            } else if url.hasPrefix("rediss://") {
                tls = true
                rest = url.dropFirst("rediss://".count)
            } else {
                throw .invalidURL("the scheme must be redis:// or rediss://")
            }
            var authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            let tail = rest.dropFirst(authority.count)
            if !tail.isEmpty {
                let database = tail.dropFirst()
                guard tail.first == "/", database.allSatisfy(\.isASCIIDigitCharacter) else {
                    throw .invalidURL("only a database number may follow the address (no query, no fragment)")
                }
            }
            if let at = authority.lastIndex(of: "@") {
                let credentials = authority[..<at]
                authority = authority[authority.index(after: at)...]
                if let colon = credentials.firstIndex(of: ":") {
                    let user = try _percentDecoded(credentials[..<colon], what: "user")
                    self.user = user.isEmpty ? nil : user
                    password = try _percentDecoded(credentials[credentials.index(after: colon)...], what: "password")
                } else {
                    // `redis://secret@host` is how several clients spell a password alone: follow them.
                    password = try _percentDecoded(credentials, what: "password")
                }
            }
            seeds = []
            for part in authority.split(separator: ",", omittingEmptySubsequences: false) {
                seeds.append(try Self.address(part))
            }
            host = seeds[0].host
            port = seeds[0].port
        }

        /// One `host[:port]` of the URL's authority.
        private static func address(_ authority: Substring) throws(RedisRelayError) -> _Address {
            let host: String
            var portText: Substring = ""
            if authority.first == "[" {
                guard let close = authority.firstIndex(of: "]") else { throw .invalidURL("an IPv6 host lacks its ']'") }
                host = String(authority[authority.index(after: authority.startIndex)..<close])
                let after = authority[authority.index(after: close)...]
                if !after.isEmpty {
                    guard after.first == ":" else { throw .invalidURL("unexpected text after the IPv6 host") }
                    portText = after.dropFirst()
                }
            } else if let colon = authority.lastIndex(of: ":") {
                host = String(authority[..<colon])
                portText = authority[authority.index(after: colon)...]
            } else {
                host = String(authority)
            }
            guard !host.isEmpty else { throw .invalidURL("the host is missing") }
            if portText.isEmpty {
                return _Address(host: host, port: 6379)
            } else {
                guard let port = Int(portText), (1...65535).contains(port) else {
                    throw .invalidURL("the port must be a number from 1 to 65535")
                }
                return _Address(host: host, port: port)
            }
        }

        /// `redis://user@host:port` (or `rediss://`), with the password left out.
        var description: String {
            let scheme = tls ? "rediss" : "redis"
            let who = user.map { "\($0)@" } ?? (password != nil ? "(password)@" : "")
            let address = host.contains(":") ? "[\(host)]" : host
            return "\(scheme)://\(who)\(address):\(port)"
        }
    }

    extension Character {
        fileprivate var isASCIIDigitCharacter: Bool { isASCII && isNumber }
    }

    /// `text` with `%XX` escapes decoded; the error names `what`, never the text.
    private func _percentDecoded(_ text: Substring, what: String) throws(RedisRelayError) -> String {
        var bytes: [UInt8] = []
        var utf8 = text.utf8[...]
        while let byte = utf8.first {
            utf8 = utf8.dropFirst()
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard utf8.count >= 2, let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16) else {
                throw .invalidURL("the \(what) has a malformed %-escape")
            }
            bytes.append(value)
            utf8 = utf8.dropFirst(2)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw .invalidURL("the \(what) is not UTF-8 once %-decoded")
        }
        return decoded
    }
#endif
