// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    /// When the publisher announces, on each channel it sent posts on, the sequence number of its next
    /// post there (see `_Wire`, kind `n`): once the channel was quiet for a `pingInterval` (no post
    /// and no announcement on this connection), and again each interval while it stays quiet. A
    /// receiver then counts a loss at the end of a burst within two intervals, even when the sender
    /// posts nothing more; a busy channel is never announced (its posts carry the numbers).
    ///
    /// A pure value, one per publisher connection, used by the publisher thread alone: a new
    /// connection announces every channel known so far after its first quiet interval.
    struct _TailAnnouncements {
        let interval: Duration
        /// When each channel last carried a post or an announcement on this connection.
        private(set) var lastSent: [[UInt8]: ContinuousClock.Instant] = [:]
        /// No channel is due before this instant (it may be earlier than needed, never later).
        private(set) var nextDue: ContinuousClock.Instant

        /// The channels known when the connection began (`now`) are first due one interval later.
        init(interval: Duration, now: ContinuousClock.Instant, channels: some Sequence<[UInt8]>) {
            self.interval = interval
            self.nextDue = now + interval
            for channel in channels { lastSent[channel] = now }
        }

        /// A post went out on `channel` at `now`.
        mutating func sent(on channel: [UInt8], now: ContinuousClock.Instant) {
            if lastSent.updateValue(now, forKey: channel) == nil { nextDue = min(nextDue, now + interval) }
        }

        /// The channels due at `now` (quiet for an interval), in name order, counted as announced now.
        /// - Complexity: O(channels).
        mutating func due(now: ContinuousClock.Instant) -> [[UInt8]] {
            var due: [[UInt8]] = []
            var next = now + interval
            for (channel, last) in lastSent {
                if now - last >= interval {
                    due.append(channel)
                    lastSent[channel] = now
                } else {
                    next = min(next, last + interval)
                }
            }
            nextDue = next
            return due.sorted { $0.lexicographicallyPrecedes($1) }
        }
    }
#endif
