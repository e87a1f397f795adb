// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Dispatch

    /// The received posts that were checked and decoded, waiting for the delivery thread to post
    /// them on the center: the bounded queue between the subscriber thread (which reads the socket
    /// and never waits for handlers) and the handlers.
    ///
    /// A pure value, kept in a `Mutex` of `_RelayCore`. It holds at most `limit` posts (or one
    /// message's, when a single batch is larger): a message that does not fit drops the oldest
    /// messages, whole, and `push` returns how many posts they carried (counted in `missedPosts`).
    /// A warning (`Event.slowConsumer`) is due at most once a second.
    struct _Deliveries {
        /// One received message: its posts, made by `post` on the delivery thread.
        struct Entry {
            let inbound: _Inbound
            let posts: Int
            let post: @Sendable () -> Void
        }

        /// `Options.maxPendingPosts`.
        let limit: Int
        private var entries: [Entry] = []
        private var head = 0
        /// The posts waiting.
        private(set) var pending = 0
        /// Set by the delivery thread before it sleeps with nothing to do; the next push clears it and
        /// wakes the thread.
        var waiting = false
        /// When the last slow-consumer warning was due.
        private var lastWarning: ContinuousClock.Instant?

        init(limit: Int) { self.limit = limit }

        /// Queues `entry`, first dropping the oldest messages while it would not fit. Returns the
        /// posts dropped, and whether a slow-consumer warning is due (posts were dropped, and the last
        /// warning was at least a second before `now`).
        mutating func push(_ entry: Entry, now: ContinuousClock.Instant) -> (dropped: Int, warn: Bool) {
            var dropped = 0
            while head < entries.count && pending + entry.posts > limit {
                dropped += entries[head].posts
                pending -= entries[head].posts
                head += 1
            }
            _dropConsumed(&entries, head: &head, threshold: 1024)
            entries.append(entry)
            pending += entry.posts
            guard dropped > 0 else { return (0, false) }
            if let lastWarning, now - lastWarning < .seconds(1) { return (dropped, false) }
            lastWarning = now
            return (dropped, true)
        }

        /// The oldest message, removed; `nil` when none waits.
        mutating func pop() -> Entry? {
            guard head < entries.count else { return nil }
            let entry = entries[head]
            head += 1
            pending -= entry.posts
            _dropConsumed(&entries, head: &head, threshold: 1024)
            return entry
        }

        /// Empties the queue; returns the posts it held.
        mutating func clear() -> Int {
            let posts = pending
            entries.removeAll()
            head = 0
            pending = 0
            return posts
        }
    }

    /// The delivery thread: posts the received messages on the center, oldest first, one at a time,
    /// with the thread marker naming each message's binding (so the relay does not publish it back).
    /// A message whose binding was unbound meanwhile (its token cancelled) is not posted. When the
    /// relay stops, the posts still waiting are counted in `missed`.
    func _runDeliverer(_ core: _RelayCore) {
        while !core.stopping.load(ordering: .acquiring) {
            let next = core.deliveries.withLock { deliveries -> _Deliveries.Entry? in
                if let entry = deliveries.pop() { return entry }
                deliveries.waiting = true
                return nil
            }
            guard let entry = next else {
                core.deliveryWake.wait()
                continue
            }
            guard entry.inbound.isBound.load(ordering: .acquiring) else { continue }
            _ThreadMarker.with(entry.inbound.marker) { entry.post() }
        }
        core.missed.addSaturating(core.deliveries.withLock { $0.clear() })
    }

    extension _RelayCore {
        /// Queues a received message for the delivery thread (never waits for it); see `_Deliveries`.
        func deliver(_ inbound: _Inbound, posts: Int, _ post: @escaping @Sendable () -> Void) {
            let entry = _Deliveries.Entry(inbound: inbound, posts: posts, post: post)
            let now = ContinuousClock.now
            let (dropped, warn, wake, pending) = deliveries.withLock { deliveries in
                let (dropped, warn) = deliveries.push(entry, now: now)
                let wake = deliveries.waiting
                deliveries.waiting = false
                return (dropped, warn, wake, deliveries.pending)
            }
            if wake { deliveryWake.signal() }
            if dropped > 0 { missed.addSaturating(dropped) }
            if warn { events.emit(.slowConsumer(pending: pending)) }
        }
    }
#endif
