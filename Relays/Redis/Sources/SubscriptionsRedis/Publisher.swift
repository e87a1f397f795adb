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
func _runPublisher(_ core: _RelayCore, first: _Connection?) {
    _reconnecting(core, first: first, wake: core.publisherWake) { live in
        core.outbox.withLock { $0.connected = true }
        core.publisherConnected.store(true, ordering: .releasing)
        let unacknowledged = _pump(core, live)
        core.publisherConnected.store(false, ordering: .releasing)
        let queued = core.outbox.withLock { outbox in
            outbox.connected = false
            return outbox.clear()
        }
        core.dropped.add(unacknowledged + queued, ordering: .relaxed)
    }
}

/// Sends and acknowledges posts until the connection fails, or until the relay stops and the
/// outbox is drained (for at most `connectTimeout`). Returns how many posts were sent and not
/// acknowledged.
private func _pump(_ core: _RelayCore, _ connection: _Connection) -> Int {
    let depth = core.options.pipelineDepth
    var inFlight = _InFlight()
    var batch: [_Outgoing] = []
    var counts: [Int] = []
    batch.reserveCapacity(depth)
    counts.reserveCapacity(depth)
    var deadline: ContinuousClock.Instant?
    let (seconds, attoseconds) = core.options.connectTimeout.components
    let replyTimeout = Int32(clamping: max(seconds * 1000 + attoseconds / 1_000_000_000_000_000, 1))
    while true {
        core.outbox.withLock { outbox in
            outbox.take(messages: depth - inFlight.commands, into: &batch, counts: &counts)
            // Ask posters for a wake-up only when nothing is in flight: otherwise the replies wake
            // this thread anyway, and posts made meanwhile go out with the next batch. Under load
            // this saves a pipe write per batch on the posting threads.
            if outbox.count == 0 && inFlight.commands == 0 && batch.isEmpty { outbox.writerWaiting = true }
        }
        if !batch.isEmpty {
            connection.appendPublishes(batch, counts: counts)
            for count in counts { inFlight.push(count) }
            batch.removeAll(keepingCapacity: true)
            counts.removeAll(keepingCapacity: true)
            if !connection.flush() { return inFlight.posts }
        }
        if core.stopping.load(ordering: .acquiring) {
            let empty = core.outbox.withLock { $0.count == 0 }
            if empty && inFlight.commands == 0 { return 0 }
            let now = ContinuousClock.now
            if deadline == nil { deadline = now + core.options.connectTimeout }
            if let deadline, now >= deadline { return inFlight.posts }
        }
        let stopping = core.stopping.load(ordering: .acquiring)
        let ready = _poll(
            socket: connection.fd, wake: core.publisherWake,
            timeoutMilliseconds: stopping ? 10 : inFlight.commands > 0 ? replyTimeout : -1)
        // Replies owed but none for a whole time-out: the server is stuck (or the network is);
        // reconnect rather than wait forever.
        if !ready.socket && !ready.wake && inFlight.commands > 0 && !stopping { return inFlight.posts }
        if ready.wake { core.publisherWake.drain() }
        if ready.socket {
            var published = 0
            var dropped = 0
            var unexpected = false
            let open = connection.readPublishReplies { acknowledged in
                // A reply for no command in flight is a protocol error: the connection is given
                // up below.
                guard let posts = inFlight.pop() else {
                    unexpected = true
                    return
                }
                if acknowledged { published += posts } else { dropped += posts }
            }
            core.published.add(published, ordering: .relaxed)
            core.dropped.add(dropped, ordering: .relaxed)
            guard open, !unexpected else { return inFlight.posts }
        }
    }
}

/// The commands sent and not yet answered, oldest first: how many posts each carries.
struct _InFlight {
    private var counts: [Int] = []
    private var head = 0
    /// The posts the commands in flight carry.
    private(set) var posts = 0

    var commands: Int { counts.count - head }

    mutating func push(_ count: Int) {
        counts.append(count)
        posts += count
    }

    /// The post count of the oldest command in flight, removed; `nil` when none is.
    mutating func pop() -> Int? {
        guard head < counts.count else { return nil }
        let count = counts[head]
        head += 1
        posts -= count
        if head == counts.count {
            counts.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > counts.count {
            counts.removeFirst(head)
            head = 0
        }
        return count
    }
}

/// Runs `serve` on a connection to the relay's server, again and again until the relay stops:
/// `first` (when given), then new connections. A connection that cannot be made is retried after
/// `delay`, which doubles up to `reconnectDelay.upperBound` (the wait ends early when `wake` is
/// written, as it is when the relay stops); a connection that was made resets the delay.
func _reconnecting(
    _ core: _RelayCore, first: _Connection?, wake: _WakePipe, serve: (_Connection) -> Void
) {
    var connection = first
    var delay = core.options.reconnectDelay.lowerBound
    while !core.stopping.load(ordering: .acquiring) {
        guard let live = connection ?? _connect(core) else {
            _sleep(wake, delay)
            delay = min(delay * 2, core.options.reconnectDelay.upperBound)
            continue
        }
        connection = nil
        delay = core.options.reconnectDelay.lowerBound
        serve(live)
    }
}

/// A new connection to the relay's server, or `nil`.
func _connect(_ core: _RelayCore) -> _Connection? {
    try? _Connection(host: core.host, port: core.port, timeout: core.options.connectTimeout)
}

/// Waits `delay`, or less when `wake` is written (the relay stops).
func _sleep(_ wake: _WakePipe, _ delay: Duration) {
    let (seconds, attoseconds) = delay.components
    let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
    let ready = _poll(socket: nil, wake: wake, timeoutMilliseconds: Int32(clamping: max(milliseconds, 1)))
    if ready.wake { wake.drain() }
}
