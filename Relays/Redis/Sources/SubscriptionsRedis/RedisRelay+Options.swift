// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Foundation
    import Subscriptions

    extension RedisRelay {
        /// Tuning for a ``RedisRelay``. A value type; the relay copies it at initialisation.
        public struct Options: Sendable {
            /// How long connecting may take (each of: TCP, TLS, the answer to `AUTH` and `PING`), the
            /// time-out of a blocked read or write on a connection, and how long the publisher waits
            /// for a reply it is owed before it gives the connection up (a frozen server; at most two
            /// ``pingInterval``s). Two seconds by default.
            public var connectTimeout: Duration = .seconds(2)
            /// The first and the longest wait between reconnection attempts; the wait doubles after
            /// each failure, and each wait is a random time between half of it and all of it. 20 ms to
            /// 1 s by default.
            public var reconnectDelay: ClosedRange<Duration> = .milliseconds(20) ... .seconds(1)
            /// How many `PUBLISH` commands the publisher sends ahead of their replies (a command carries
            /// one post, or up to 64 consecutive queued posts of one name). 128 by default. In a
            /// cluster it is per primary: `pipelineDepth` times the primaries of the map in all.
            public var pipelineDepth = 128
            /// How many posts may wait for the publisher; more are dropped and counted in
            /// ``RedisRelay/droppedPosts``. 100,000 by default.
            public var maxQueuedPosts = 100_000
            /// How many bytes of messages may wait for the publisher; more are dropped and counted in
            /// ``RedisRelay/droppedPosts``. 64 MiB by default.
            public var maxQueuedBytes = 64 << 20
            /// The CA certificates (PEM) that a `rediss://` server's certificate must chain to; `nil`
            /// for the system's. Ignored for `redis://`.
            public var tlsCAFile: String?
            /// The name the server's certificate must carry (and the SNI name sent); `nil` for the
            /// host of the URL. An IP address is checked against the certificate's IP entries.
            public var tlsServerName: String?
            /// The client certificate (PEM; intermediate certificates after it) that a `rediss://`
            /// connection presents when the server asks for one (Redis's `tls-auth-clients yes`, its
            /// default); `nil` for none. Set it together with ``tlsKeyFile``. Both are read once, by the
            /// initializer; an unreadable or mismatched pair throws ``RedisRelayError/tlsFailed(_:)``.
            public var tlsCertificateFile: String?
            /// The private key (PEM, not encrypted) of ``tlsCertificateFile``; `nil` for none.
            public var tlsKeyFile: String?
            /// A secret shared by the relays that may talk to each other. When set, every message this
            /// relay publishes carries an HMAC-SHA256 of its channel and bytes, and messages that do not
            /// carry a valid one are rejected (counted in ``RedisRelay/rejectedMessages``). `nil` (the
            /// default): messages are neither signed nor checked. Use at least 32 random bytes.
            public var signingKey: [UInt8]?
            /// The largest message sent or accepted, in bytes (signature included). A larger post is
            /// not sent (counted in ``RedisRelay/droppedPosts``); a larger received message is
            /// rejected. 1 MiB by default.
            public var maximumMessageBytes = 1 << 20
            /// How long a connection may stay without traffic before it sends a `PING`; one that
            /// gets no answer within two intervals is closed and re-opened. 5 seconds by default.
            public var pingInterval: Duration = .seconds(5)
            /// How long ``RedisRelay/close()`` (and the release of the relay) waits for queued posts to
            /// be sent and answered; the rest are counted dropped. Two seconds by default.
            public var closeTimeout: Duration = .seconds(2)
            /// When `true`, an initializer that cannot reach the server does not throw: the relay
            /// starts disconnected and keeps retrying with backoff (posts made meanwhile are dropped).
            /// A refused password or TLS handshake still throws. `false` by default.
            public var waitsForServer = false
            /// How many received posts may wait for their handlers (the delivery thread). When a slow
            /// handler lets more pile up, the oldest messages are dropped whole, counted in
            /// ``RedisRelay/missedPosts``, and ``RedisRelay/Event/slowConsumer(pending:)`` is sent at
            /// most once a second; reading the socket never waits for handlers. A batch message larger
            /// than the limit is still queued alone. 100,000 by default; must be positive.
            public var maxPendingPosts = 100_000
            /// How the URL's servers are arranged: one server (``Topology/standalone``, the default), a
            /// Redis Cluster (``Topology/cluster``), or a primary found through Sentinel
            /// (``Topology/sentinel(masterName:)``). A URL with several hosts needs one of the last two.
            public var topology: Topology = .standalone

            /// How many messages of each relayed name the server keeps, so that a relay that was away
            /// (disconnected, partitioned, thrown out, or its server restarted with `appendonly yes`)
            /// receives what it missed when it is back. `0` (the default): pub/sub, at most once, every
            /// loss counted in ``RedisRelay/missedPosts``. With `N > 0` the relay appends each message
            /// to the stream `<channelPrefix><name>` (`XADD … MAXLEN ~ N`: at least about `N` messages
            /// kept, each of 1 to 64 posts) instead of publishing it, and reads the streams of the names
            /// it relays from where it stopped; posts older than the history are still counted missed.
            /// The sending side loses nothing to a lost connection either: posts made while it
            /// reconnects wait in its queue (up to ``maxQueuedPosts`` and ``maxQueuedBytes``; beyond,
            /// they are dropped as ``RedisRelay/DropCounts/queueFull``), and the messages it sent without
            /// an answer are sent again, with the same sequence numbers, on the next connection (in a
            /// cluster: to the slot's owner in a map read anew, for at most 30 s); a receiver skips a
            /// copy that had reached the server already. Only ``RedisRelay/close()`` (or the release of
            /// the relay) drops what is still unsent or unanswered then.
            /// Order per sender holds within each name (across names it is not guaranteed: each name is
            /// a stream of its own). Relays of one prefix must agree on whether it is zero. Must not be
            /// negative. With ``Topology/cluster`` each stream is a key in its name's slot, appended to
            /// and read on the primary that owns it, and followed across reshards and failovers (see
            /// ``Topology/cluster``).
            public var historyLength = 0

            /// The defaults.
            public init() {}

            /// The defaults, with a signing key.
            public init(signingKey: [UInt8]?) { self.signingKey = signingKey }
        }
    }
#endif
