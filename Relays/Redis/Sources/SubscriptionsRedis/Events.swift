// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Synchronization

    extension RedisRelay {
        /// Something that happened to a relay's connection or to the messages it received; see
        /// ``RedisRelay/events``.
        public enum Event: Sendable, Equatable {
            /// Both connections (publishing and subscribing) are up and authenticated: at start, and
            /// again after each ``disconnected(reason:)``. In a cluster: those to every node needed.
            case connected
            /// A connection was lost (closed, failed, or silent for two ``Options/pingInterval``s) or
            /// its TLS handshake was refused; the relay reconnects with backoff. With Sentinel or a
            /// cluster, `reason` starts with the node (`host:port: …`). Posts made until it is
            /// back are counted in ``RedisRelay/droppedPosts``; in history mode they wait in the
            /// queue and are sent once it is back (see ``Options/historyLength``).
            case disconnected(reason: String)
            /// The server refused the credentials: its own text (such as `WRONGPASS …` or `NOAUTH …`),
            /// never the password. The relay keeps retrying with backoff.
            case authenticationFailed(String)
            /// Another relay's posts on a relayed channel were lost on the way (a gap in its sequence
            /// numbers): `count` posts, also added to ``RedisRelay/missedPosts``.
            case missed(count: Int)
            /// A message on a relayed channel was refused (oversized, unsigned or wrongly signed when a
            /// key is set, malformed, or of the other kind); also counted in
            /// ``RedisRelay/rejectedMessages``. In a cluster, also sent (and counted) once per name
            /// whose braces leave no key for its retained post in its hash slot: such a name's
            /// retained posts are relayed but not kept on the server (see the README's "Retained
            /// posts"); and once per retained post's `SET` or clear's `DEL` that the cluster declined
            /// for good (after 5 redirections or 30 s of `CLUSTERDOWN`), naming the key whose value
            /// stayed as it was.
            case rejected(reason: String)
            /// Handlers are slower than the posts arriving: more than ``Options/maxPendingPosts``
            /// received posts waited for them, so the oldest were dropped (counted in
            /// ``RedisRelay/missedPosts``). `pending` is how many posts waited just after. Sent at most
            /// once a second while it lasts; the connection stays up.
            case slowConsumer(pending: Int)
            /// The server refused a command with an error reply, in its own words (such as `NOPERM …`):
            /// a `SUBSCRIBE` (that name's posts do not arrive, and ``RedisRelay/waitUntilReady(timeout:)``
            /// stays `false`) or a `PUBLISH` (its posts are counted in ``RedisRelay/DropCounts/refused``).
            /// Sent for each refused `SUBSCRIBE`, and for the first refused `PUBLISH` of each connection.
            case permissionDenied(String)
            /// Cluster: the relay moved at least one relayed name to another node (its slot moved, or its
            /// primary failed and a replica took over); its subscription was made on the new node before
            /// the old one was given up. Sent once per change of the slot map that moved names.
            case topologyChanged
            /// In history mode (``Options/historyLength`` > 0): after a reconnection, `count` posts that
            /// were made while this relay was away were read from the server's history and delivered
            /// (also added to ``RedisRelay/recoveredPosts``). Sent once a catch-up is complete, when it
            /// delivered any post.
            case recovered(count: Int)
        }
    }

    /// The relay's event stream and the connection state that decides when `.connected` and
    /// `.disconnected` are due. `Sendable`: the state sits in a `Mutex`, and an `AsyncStream`'s
    /// continuation may be called from any thread.
    final class _Events: Sendable {
        let stream: AsyncStream<RedisRelay.Event>
        private let continuation: AsyncStream<RedisRelay.Event>.Continuation
        private let link = Mutex(_Link())

        /// Which connection changed.
        enum Side { case publisher, subscriber }

        private struct _Link {
            var publisher = false
            var subscriber = false
            /// Whether `.connected` was the last connection event sent.
            var announced = false
        }

        init() {
            (stream, continuation) = AsyncStream.makeStream(
                of: RedisRelay.Event.self, bufferingPolicy: .bufferingNewest(1024))
        }

        func emit(_ event: RedisRelay.Event) { continuation.yield(event) }

        /// Records that `side` came up or went down; sends `.connected` when both are up (and it was not
        /// sent already), `.disconnected(reason)` when one goes down after it was (unless `announce`
        /// is `false`).
        func set(_ side: Side, up: Bool, reason: String = "", announce: Bool = true) {
            let event = link.withLock { link -> RedisRelay.Event? in
                switch side {
                case .publisher: link.publisher = up
                case .subscriber: link.subscriber = up
                }
                if link.publisher && link.subscriber && !link.announced {
                    link.announced = true
                    return .connected
                }
                if !up && link.announced {
                    link.announced = false
                    return announce ? .disconnected(reason: reason) : nil
                }
                return nil
            }
            if let event { emit(event) }
        }

        /// Ends the stream: a `for await` loop over it finishes.
        func finish() { continuation.finish() }
    }
#endif
