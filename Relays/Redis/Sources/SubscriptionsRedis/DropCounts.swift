// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Synchronization

    extension RedisRelay {
        /// Why local posts were not delivered to Redis: one count per reason, read together by
        /// ``RedisRelay/dropCounts``. The fields sum to ``RedisRelay/droppedPosts`` (``total``).
        /// A value type, `Sendable`.
        public struct DropCounts: Sendable, Equatable {
            /// Made while the publisher connection was down (reconnecting), or after ``RedisRelay/close()``,
            /// or still queued when the connection was lost or the close time-out passed. In history
            /// mode (``Options/historyLength`` > 0), posts made while it is down (in a cluster: while
            /// their primary is) wait in the queue instead: only those still queued when the relay
            /// closes count here.
            public var disconnected = 0
            /// Beyond ``Options/maxQueuedPosts`` or ``Options/maxQueuedBytes``: the queue was full.
            public var queueFull = 0
            /// Larger than ``Options/maximumMessageBytes`` (signature included).
            public var tooLarge = 0
            /// Sent, but no reply came before the connection failed or the close time-out passed (a
            /// few of these may still have reached the server). In history mode, a failed connection's
            /// unanswered messages are sent again instead: only those unanswered when the relay closes
            /// count here.
            public var unacknowledged = 0
            /// Refused by the server: an error reply to their `PUBLISH`, such as `NOPERM` for an ACL
            /// user without `+publish` or without the channel (also an ``Event/permissionDenied(_:)``).
            public var refused = 0
            /// Whose payload failed to encode (its `encode(to:)` threw).
            public var encodingFailed = 0

            /// The sum of the fields: ``RedisRelay/droppedPosts``.
            public var total: Int { disconnected + queueFull + tooLarge + unacknowledged + refused + encodingFailed }

            /// All zero.
            public init() {}
        }
    }

    /// The relay's drop counters, one atomic per reason (see `RedisRelay.DropCounts`).
    final class _DropCounters: Sendable {
        let disconnected = Atomic<Int>(0)
        let queueFull = Atomic<Int>(0)
        let tooLarge = Atomic<Int>(0)
        let unacknowledged = Atomic<Int>(0)
        let refused = Atomic<Int>(0)
        let encodingFailed = Atomic<Int>(0)

        /// A snapshot of every count.
        var counts: RedisRelay.DropCounts {
            var counts = RedisRelay.DropCounts()
            counts.disconnected = disconnected.load(ordering: .relaxed)
            counts.queueFull = queueFull.load(ordering: .relaxed)
            counts.tooLarge = tooLarge.load(ordering: .relaxed)
            counts.unacknowledged = unacknowledged.load(ordering: .relaxed)
            counts.refused = refused.load(ordering: .relaxed)
            counts.encodingFailed = encodingFailed.load(ordering: .relaxed)
            return counts
        }
    }
#endif
