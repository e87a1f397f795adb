// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import CHiredis

    /// The publisher thread: drains the outbox into `PUBLISH` commands on its own connection.
    ///
    /// Pipelined: it appends up to `pipelineDepth` commands ahead of their replies, writes them in one
    /// flush, and reads replies as `poll` reports them, so a post never waits for Redis. Posters wake
    /// the thread (a pipe write) only when it is idle, with nothing in flight. Consecutive queued posts
    /// of one channel ride one command (a batch message, see `_Wire`); a lone post goes out at once, on
    /// its own. A FIFO of the post count of every command in flight attributes each reply to its posts:
    /// a reply counts them in `published` (or `dropped` for an error reply); no reply at all for
    /// `connectTimeout` while some are owed counts as a failed connection. When the connection fails,
    /// every post not yet acknowledged, and every queued one, is counted in `dropped`; posts made
    /// while it reconnects (with exponential backoff) are counted at once.
    ///
    /// History mode on one server (or Sentinel; the outbox's `keepsWhileDisconnected`): nothing is
    /// dropped for a lost connection. The messages sent and not answered are sent again, identically
    /// (same commands, same sequence numbers), first thing on the next connection, and posts made
    /// meanwhile wait in the outbox (up to `maxQueuedPosts` and `maxQueuedBytes`, beyond which they
    /// are dropped as `queueFull`). A message that did reach the server before the connection failed
    /// is then in the stream twice; receivers skip the second copy, whose numbers are stale. Only
    /// when the relay stops are unanswered messages counted `unacknowledged` and queued posts
    /// `disconnected`.
    func _runPublisher(_ core: _RelayCore, first: _Connection?) {
        // The next sequence number of each channel (see `_Wire`), kept across reconnections.
        var sequences: [[UInt8]: UInt64] = [:]
        // History mode: the messages to send again on the next connection.
        var resend: [_Resend] = []
        let keeps = core.outbox.withLock { $0.keepsWhileDisconnected }
        _reconnecting(core, first: first, side: .publisher, wake: core.publisherWake) { live in
            core.outbox.withLock { $0.connected = true }
            core.publisherConnected.store(true, ordering: .releasing)
            let (unacknowledged, reason) = _pump(core, live, &sequences, &resend, keeps: keeps)
            core.publisherConnected.store(false, ordering: .releasing)
            let queued = core.outbox.withLock { outbox in
                outbox.connected = false
                return keeps ? 0 : outbox.clear()
            }
            if !keeps || core.stopping.load(ordering: .acquiring) {
                core.drops.unacknowledged.add(unacknowledged, ordering: .relaxed)
                resend = []
            }
            core.drops.disconnected.add(queued, ordering: .relaxed)
            return reason
        }
        // Stopped: what was kept to send again is unacknowledged; whatever was posted since the last
        // connection failed is dropped, and so is anything posted from now on.
        core.drops.unacknowledged.add(resend.reduce(0) { $0 + $1.postCount }, ordering: .relaxed)
        let queued = core.outbox.withLock { outbox in
            outbox.connected = false
            outbox.keepsWhileDisconnected = false
            return outbox.clear()
        }
        core.drops.disconnected.add(queued, ordering: .relaxed)
    }

    /// A message sent in history mode and not answered yet: its posts (as the outbox gave them) and
    /// the number it was given, so that the same commands can be sent again on the next connection.
    struct _Resend {
        let posts: [_Outgoing]
        let first: UInt64

        /// The posts it counts for: none for a clear of a retained post.
        var postCount: Int {
            posts.count == 1 && posts[0].message[_Wire.headerLength - 1] == _Wire.clearRetained ? 0 : posts.count
        }
    }

    /// Sends and acknowledges posts until the connection fails, or until the relay stops and the
    /// outbox is drained (for at most `closeTimeout`). Pings the server when it sent nothing for a
    /// `pingInterval`; gives the connection up when a reply is owed and none came for
    /// `connectTimeout` or two ping intervals, whichever is shorter. Returns how many posts were
    /// sent and not acknowledged, and why it returned.
    ///
    /// With `keeps` (history mode, see `_runPublisher`), the messages of `resend` are sent first, and
    /// when it returns `resend` holds the messages not answered, to send on the next connection.
    private func _pump(
        _ core: _RelayCore, _ connection: _Connection, _ sequences: inout [[UInt8]: UInt64],
        _ resend: inout [_Resend], keeps: Bool
    ) -> (unacknowledged: Int, reason: String) {
        let depth = core.options.pipelineDepth
        let maxBytes = core.options.maximumMessageBytes - (core.signer == nil ? 0 : _Wire.signatureLength)
        var inFlight = _InFlight()
        var batch: [_Outgoing] = []
        var counts: [Int] = []
        batch.reserveCapacity(depth)
        counts.reserveCapacity(depth)
        var deadline: ContinuousClock.Instant?
        let interval = core.options.pingInterval
        let patience = min(core.options.connectTimeout, interval * 2)
        var lastSent = ContinuousClock.now
        // When a reply last came, or the first owed one was sent.
        var progress = lastSent
        var refusalReported = false
        var tails = _TailAnnouncements(interval: interval, now: lastSent, channels: sequences.keys)
        let announces = core.options.historyLength == 0
        let retainedKeys = core.retainedKeys
        defer { if keeps { resend = inFlight.unanswered } }
        if !resend.isEmpty {
            for message in resend {
                connection.appendPublishes(
                    message.posts, counts: [message.posts.count], signer: core.signer,
                    historyLength: core.options.historyLength, retainedKeys: retainedKeys,
                    command: { inFlight.push($0) }, sent: { _, _ in inFlight.attach(message) },
                    sequence: { _, _ in message.first })
            }
            resend = []
            if !connection.flush() { return (inFlight.posts, "the connection failed while sending") }
        }
        while true {
            // Sentinel: a new primary was announced; this connection is to the old one.
            if connection.epoch != core.topology.current { return (inFlight.posts, "the primary moved") }
            core.outbox.withLock { outbox in
                outbox.take(messages: depth - inFlight.commands, maxBytes: maxBytes, into: &batch, counts: &counts)
                // Ask posters for a wake-up only when nothing is in flight: otherwise the replies wake
                // this thread anyway, and posts made meanwhile go out with the next batch. Under load
                // this saves a pipe write per batch on the posting threads.
                if outbox.count == 0 && inFlight.commands == 0 && batch.isEmpty { outbox.writerWaiting = true }
            }
            var now = ContinuousClock.now
            if !batch.isEmpty {
                if inFlight.commands == 0 { progress = now }
                connection.appendPublishes(
                    batch, counts: counts, signer: core.signer, historyLength: core.options.historyLength,
                    retainedKeys: retainedKeys, command: { inFlight.push($0) },
                    sent: { posts, first in
                        if keeps { inFlight.attach(_Resend(posts: Array(batch[posts]), first: first)) }
                    },
                    sequence: { channel, posts in
                        let first = sequences[channel, default: 0]
                        sequences[channel] = first &+ UInt64(posts)
                        if announces { tails.sent(on: channel, now: now) }
                        return first
                    })
                batch.removeAll(keepingCapacity: true)
                counts.removeAll(keepingCapacity: true)
                lastSent = now
                if !connection.flush() { return (inFlight.posts, "the connection failed while sending") }
            } else if inFlight.commands == 0 && now - lastSent >= interval {
                connection.append(["PING"])
                progress = now
                inFlight.push(0)
                lastSent = now
                if !connection.flush() { return (inFlight.posts, "the connection failed while sending") }
            }
            let stopping = core.stopping.load(ordering: .acquiring)
            if announces && !stopping && now >= tails.nextDue {
                let due = tails.due(now: now)
                let relayed = core.channels.withLock { channels in
                    due.filter { channels.bindings[String(decoding: $0, as: UTF8.self)] != nil }
                }
                if !relayed.isEmpty {
                    let message = _Wire.announcementMessage(header: core.header)
                    connection.appendPublishes(
                        relayed.map { _Outgoing(channel: $0, message: message) },
                        counts: Array(repeating: 1, count: relayed.count), signer: core.signer
                    ) { channel, _ in sequences[channel, default: 0] }
                    if inFlight.commands == 0 { progress = now }
                    for _ in relayed { inFlight.push(0) }
                    lastSent = now
                    if !connection.flush() { return (inFlight.posts, "the connection failed while sending") }
                }
            }
            if stopping {
                let empty = core.outbox.withLock { $0.count == 0 }
                if empty && inFlight.commands == 0 { return (0, "closed") }
                if deadline == nil { deadline = now + core.options.closeTimeout }
                if let deadline, now >= deadline { return (inFlight.posts, "closed") }
            }
            var wait: Duration =
                stopping
                ? .milliseconds(10) : inFlight.commands > 0 ? progress + patience - now : lastSent + interval - now
            if announces && !stopping { wait = min(wait, tails.nextDue - now) }
            let ready = _poll(
                socket: connection.socket, wake: core.publisherWake, timeoutMilliseconds: _milliseconds(wait))
            now = ContinuousClock.now
            if ready.wake { core.publisherWake.drain() }
            if ready.socket {
                var published = 0
                var dropped = 0
                var unexpected = false
                var replies = 0
                var refusal: String?
                let open = connection.readPublishReplies { error in
                    // A reply for no command in flight is a protocol error: the connection is given
                    // up below.
                    guard let posts = inFlight.pop() else {
                        unexpected = true
                        return
                    }
                    replies += 1
                    if let error {
                        dropped += posts
                        refusal = refusal ?? error
                    } else {
                        published += posts
                    }
                }
                // The first refusal of each connection is an event; each refused post is counted.
                if let refusal, !refusalReported {
                    refusalReported = true
                    core.events.emit(.permissionDenied(refusal))
                }
                if replies > 0 { progress = now }
                core.published.add(published, ordering: .relaxed)
                core.drops.refused.add(dropped, ordering: .relaxed)
                guard open else { return (inFlight.posts, "the server closed the connection") }
                guard !unexpected else { return (inFlight.posts, "the server sent a reply nobody asked for") }
            }
            // Replies owed but none for too long: the server is stuck, or the network silently
            // dropped us; reconnect rather than wait forever.
            if inFlight.commands > 0 && !stopping && now - progress >= patience {
                return (inFlight.posts, "no reply from the server for \(patience)")
            }
        }
    }

    /// The commands sent and not yet answered, oldest first: how many posts each carries, and in
    /// history mode the messages to send again should the connection fail before their answer.
    struct _InFlight {
        private var counts: [Int] = []
        private var head = 0
        /// The posts the commands in flight carry.
        private(set) var posts = 0
        /// How many commands were pushed and popped, ever: positions for `resends`.
        private var pushed = 0
        private var answered = 0
        /// Each attached message, with the position of its last command, oldest first.
        private var resends: [(last: Int, message: _Resend)] = []
        private var resendHead = 0

        var commands: Int { counts.count - head }

        mutating func push(_ count: Int) {
            counts.append(count)
            posts += count
            pushed += 1
        }

        /// Attaches `message` to the command pushed last (its message's last command): it stays
        /// `unanswered` until that command's answer is popped.
        mutating func attach(_ message: _Resend) { resends.append((pushed - 1, message)) }

        /// The attached messages whose last command is not answered yet, oldest first.
        var unanswered: [_Resend] { resends[resendHead...].map(\.message) }

        /// The post count of the oldest command in flight, removed; `nil` when none is.
        mutating func pop() -> Int? {
            guard head < counts.count else { return nil }
            let count = counts[head]
            head += 1
            posts -= count
            answered += 1
            _dropConsumed(&counts, head: &head, threshold: 1024)
            if resendHead < resends.count {
                while resendHead < resends.count && resends[resendHead].last < answered { resendHead += 1 }
                _dropConsumed(&resends, head: &resendHead, threshold: 1024)
            }
            return count
        }
    }

    /// Runs `serve` on a connection to the relay's server, again and again until the relay stops:
    /// `first` (when given), then new connections. A connection that cannot be made is retried after
    /// a random wait between half of `delay` and `delay` (jitter, so that many relays do not retry in
    /// step), where `delay` doubles up to `reconnectDelay.upperBound` (the wait ends early when `wake`
    /// is written, as it is when the relay stops); a connection that was made resets the delay.
    /// `first` is served even when the relay already stops, so that the publisher sends what was
    /// posted before. `serve` returns why its connection ended, for the `.disconnected` event.
    func _reconnecting(
        _ core: _RelayCore, first: _Connection?, side: _Events.Side, wake: _WakePipe,
        serve: (_Connection) -> String
    ) {
        var connection = first
        var delay = core.options.reconnectDelay.lowerBound
        while connection != nil || !core.stopping.load(ordering: .acquiring) {
            guard let live = connection ?? core.connect() else {
                _sleep(wake, _jittered(delay))
                delay = min(delay * 2, core.options.reconnectDelay.upperBound)
                continue
            }
            connection = nil
            delay = core.options.reconnectDelay.lowerBound
            core.events.set(side, up: true)
            let reason = serve(live)
            // With Sentinel the reason names the primary the connection was to.
            let named = live.node.port == 0 ? reason : "\(live.node): \(reason)"
            // A connection ended by `close()` or the release of the relay is no event.
            core.events.set(side, up: false, reason: named, announce: !core.stopping.load(ordering: .acquiring))
        }
    }

    /// A random wait between half of `delay` and all of it, so that many relays that lost their
    /// server at once do not all retry in step.
    func _jittered(_ delay: Duration) -> Duration { delay * Double.random(in: 0.5...1) }

    /// Waits `delay`, or less when `wake` is written (the relay stops).
    func _sleep(_ wake: _WakePipe, _ delay: Duration) {
        let ready = _poll(socket: nil, wake: wake, timeoutMilliseconds: _milliseconds(delay))
        if ready.wake { wake.drain() }
    }
#endif
