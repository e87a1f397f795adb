// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Foundation
    import Subscriptions

    /// The error a ``RedisRelay`` initializer throws. No case's text contains a password.
    public enum RedisRelayError: Error, CustomStringConvertible, Sendable {
        /// No Redis server could be reached at `host:port`; `reason` explains, such as
        /// "Connection refused".
        case unreachable(host: String, port: Int, reason: String)
        /// The server refused the credentials, or wants some and got none: its own text, such as
        /// `WRONGPASS invalid username-password pair or user is disabled.`
        case authenticationFailed(String)
        /// The TLS handshake failed or the server's certificate was refused (or the CA file could not
        /// be loaded): OpenSSL's reason.
        case tlsFailed(String)
        /// The URL is not `redis://[user[:password]@]host[:port]` or `rediss://…`: what is wrong, not
        /// the URL itself.
        case invalidURL(String)
        /// The server refused a command the relay needs, with its own text (such as `NOPERM …` for an
        /// ACL user without `+subscribe`, `+unsubscribe` or `+publish`, or without the relay's
        /// channels). The initializer checks each on its first connections: it subscribes to and
        /// unsubscribes from the channel named `channelPrefix` alone, and publishes an empty message
        /// there.
        case permissionDenied(String)

        /// A sentence naming the problem.
        public var description: String {
            switch self {
            case .unreachable(let host, let port, let reason):
                return "RedisRelay: cannot reach Redis at \(host):\(port): \(reason)"
            case .authenticationFailed(let text):
                return "RedisRelay: the server refused the credentials: \(text)"
            case .tlsFailed(let text):
                return "RedisRelay: TLS failed: \(text)"
            case .invalidURL(let text):
                return "RedisRelay: invalid Redis URL: \(text)"
            case .permissionDenied(let text):
                return "RedisRelay: the server refused a command the relay needs: \(text)"
            }
        }
    }
#endif
