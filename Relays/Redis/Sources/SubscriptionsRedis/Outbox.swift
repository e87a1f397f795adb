// The publisher's queue: `_Outgoing` (a post on its way to Redis), `_Outbox` (the FIFO that
// groups consecutive posts into batch messages) and `_dropConsumed`, the compaction the relay's
// head-indexed queues share.
// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    /// A post on its way to Redis: `message` is a whole single-post message (header, kind, body; see
    /// `_Wire`), which the publisher may coalesce with its neighbours into a batch message.
    struct _Outgoing: Sendable {
        let channel: [UInt8]
        let message: [UInt8]
    }

    /// Forgets the consumed prefix (`..<head`) of a FIFO array read from `head`: all of it once
    /// `head` reached the end (keeping the capacity), or, once `head` is past `threshold`, when it is
    /// more than half the array (so each element is moved at most once: amortised O(1)). The queues
    /// of the relay (outbox, commands in flight, pending deliveries) share it.
    @inline(__always)
    func _dropConsumed<Element>(_ array: inout [Element], head: inout Int, threshold: Int) {
        if head == array.count {
            array.removeAll(keepingCapacity: true)
            head = 0
        } else if head > threshold && head * 2 > array.count {
            array.removeFirst(head)
            head = 0
        }
    }

    /// The publisher's queue: a FIFO array with a head index, compacted when drained.
    struct _Outbox: Sendable {
        var items: [_Outgoing] = []
        var head = 0
        /// The bytes of the messages queued.
        var bytes = 0
        /// Whether the publisher is connected. Posts are accepted while it is, and also while it is
        /// not when `keepsWhileDisconnected`.
        var connected: Bool
        /// History mode: posts made while the publisher reconnects (in a cluster: while no node
        /// answers, or while their primary cannot be reached) wait here (up to the queue's limits)
        /// instead of being dropped, and are sent once it is back, after the unacknowledged messages
        /// it sends again (see `_runPublisher` and `_runClusterPublisher`).
        var keepsWhileDisconnected = false
        /// Whether a post may be queued now.
        var accepts: Bool { connected || keepsWhileDisconnected }
        /// Set by the publisher thread before it sleeps in `poll` with nothing to send; the next
        /// poster clears it and wakes the thread.
        var writerWaiting = false

        init(connected: Bool) { self.connected = connected }

        var count: Int { items.count - head }

        /// Moves posts, oldest first, into `batch`, grouped into at most `limit` messages: each run of
        /// consecutive posts of one channel and kind (at most `_Wire.batchMaxPosts` posts, and no more
        /// once their bodies reach `_Wire.batchMaxBytes` bytes, or the whole message `maxBytes`) is one
        /// message, whose post count is appended to `messages`. Only what is queued now is taken: a
        /// post never waits for company.
        mutating func take(
            messages limit: Int, maxBytes: Int = .max, into batch: inout [_Outgoing], counts messages: inout [Int]
        ) {
            var index = head
            var taken = 0
            while taken < limit && index < items.count {
                let first = items[index]
                let kind = first.message[_Wire.headerLength - 1]
                let alone = _Wire.travelsAlone(kind)
                var bytes = first.message.count - _Wire.headerLength
                // The batch message: header, kind, inner kind, count (one byte: at most 64), entries.
                var length = _Wire.headerLength + 2 + _varintLength(UInt64(bytes)) + bytes
                var end = index + 1
                while !alone && end < items.count && end - index < _Wire.batchMaxPosts {
                    let next = items[end]
                    let body = next.message.count - _Wire.headerLength
                    bytes += body
                    length += _varintLength(UInt64(body)) + body
                    guard bytes <= _Wire.batchMaxBytes, length <= maxBytes, next.channel == first.channel,
                        next.message[_Wire.headerLength - 1] == kind
                    else { break }
                    end += 1
                }
                messages.append(end - index)
                taken += 1
                index = end
            }
            for item in items[head..<index] { self.bytes -= item.message.count }
            batch.append(contentsOf: items[head..<index])
            head = index
            _dropConsumed(&items, head: &head, threshold: 4096)
        }

        /// Puts `taken` back at the head of the queue, in their order, before what is queued: posts
        /// taken that cannot be sent yet (history mode in a cluster, their primary unreachable).
        mutating func putBack(_ taken: [_Outgoing]) {
            guard !taken.isEmpty else { return }
            for item in taken { bytes += item.message.count }
            if head >= taken.count {
                head -= taken.count
                items.replaceSubrange(head..<(head + taken.count), with: taken)
            } else {
                items.replaceSubrange(0..<head, with: taken)
                head = 0
            }
        }

        /// Empties the queue, returning how many posts it held (a request to clear a retained post
        /// is none).
        mutating func clear() -> Int {
            let dropped = items[head...].count { $0.message[_Wire.headerLength - 1] != _Wire.clearRetained }
            items.removeAll()
            head = 0
            bytes = 0
            return dropped
        }
    }
#endif
