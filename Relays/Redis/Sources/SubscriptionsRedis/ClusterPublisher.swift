// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    /// The publisher thread of a cluster relay: drains the outbox as `_runPublisher` does, and sends
    /// each message as `SPUBLISH` to the primary that owns its channel's slot, on one connection per
    /// primary of the slot map (pipelined: at most `pipelineDepth` commands in flight per primary
    /// of the map on average, `pipelineDepth` times the primaries in all, so that each server reads
    /// batches as deep as one server does).
    ///
    /// Counting is the standalone publisher's: each reply counts its posts published, or refused for
    /// an error reply; the posts in flight on a connection that fails are unacknowledged; posts for
    /// a primary that cannot be reached are dropped as disconnected. Sequence numbers are per channel
    /// and survive every change of node, so receivers see each loss as a gap.
    ///
    /// A command the cluster declined without running it is sent again, in both modes (it ran
    /// nowhere, so sending it again duplicates nothing): one answered `-MOVED` or `-ASK` (sent in
    /// the moment its slot moved: an `SPUBLISH`, an `XADD`, a retained post's `SET` or `DEL`) goes
    /// again, the same bytes, to the slot's new owner (after the map was read again) or, with
    /// `ASKING`, to the node the `-ASK` names; at most 5 times, then it is refused. Until the
    /// redirecting node answered every command it was sent, no new message is taken, so that the
    /// commands sent again precede every later one of their names: order per sender holds across a
    /// reshard, and what the old owner refused is not lost. One answered `CLUSTERDOWN` or `TRYAGAIN`
    /// (a failed primary not replaced yet, which makes every node refuse writes) is sent again the
    /// same way, to the slot's owner in a map read anew, every 100 ms for at most 30 s.
    ///
    /// History mode loses nothing to a primary that cannot be reached either: the commands in
    /// flight on a connection that fails are sent again the same way (to the slot's owner in a map
    /// read anew, every 100 ms for at most 30 s, while it has no connection), and posts for a
    /// primary without a connection go back to the head of the outbox, which is not drained for
    /// 100 ms (the map is read again meanwhile). Only when the relay stops are such commands
    /// counted (`unacknowledged`) and the queue dropped (`disconnected`). Pub/sub mode sends no
    /// command of a failed connection again (it may have run: at most once).
    func _runClusterPublisher(_ core: _RelayCore) {
        var state = _ClusterPublisher(core: core)
        state.run()
        // Commands never sent again (the relay stopped first): refused after a redirection,
        // unacknowledged after a lost connection.
        for (kept, _) in state.retries {
            if kept.lostConnection {
                core.drops.unacknowledged.add(kept.posts, ordering: .relaxed)
            } else {
                core.drops.refused.add(kept.posts, ordering: .relaxed)
            }
        }
        let queued = core.outbox.withLock { outbox in
            outbox.connected = false
            outbox.keepsWhileDisconnected = false
            return outbox.clear()
        }
        core.drops.disconnected.add(queued, ordering: .relaxed)
        core.publisherConnected.store(false, ordering: .releasing)
    }

    /// One primary's publishing connection and what it owes.
    struct _PublisherNode {
        let connection: _Connection
        var inFlight = _InFlight()
        var lastSent = ContinuousClock.now
        /// When a reply last came, or the first owed one was sent.
        var progress = ContinuousClock.now
        var refusalReported = false
        /// The commands in flight, oldest first, beside `inFlight`, to send one again when the node
        /// declines it.
        var sent = _SentCommands()

        /// Commands just formatted into the connection's output, one after another: each is owed a
        /// reply (counted for its posts) and kept until it is answered (see `_SentCommands`).
        mutating func record(_ formatted: ArraySlice<UInt8>, commands: [(end: Int, posts: Int)]) {
            for command in commands { inFlight.push(command.posts) }
            sent.append(formatted, commands: commands)
        }
    }

    /// The commands in flight on one connection, oldest first, kept to be sent again if the node
    /// declines one: their bytes in one buffer, copied once per batch (no allocation or copy per
    /// command: a reply that accepts its command only moves the head), each command a range of it;
    /// a `PING` or an `ASKING` is a mark without bytes. Owned by the publisher thread.
    struct _SentCommands {
        private struct Entry {
            var start: Int
            var end: Int
            var kept: _Kept
        }
        private var bytes: [UInt8] = []
        private var entries: [Entry?] = []
        private var head = 0

        var isEmpty: Bool { head == entries.count }

        /// A `PING` or an `ASKING`: owed a reply, never sent again.
        mutating func appendMark() { entries.append(nil) }

        /// Commands formatted one after another in `formatted`: each one's end (an offset in
        /// `formatted`) and the posts it carries.
        mutating func append(_ formatted: ArraySlice<UInt8>, commands: [(end: Int, posts: Int)]) {
            let origin = bytes.count
            var start = origin
            bytes.append(contentsOf: formatted)
            for command in commands {
                let end = origin + command.end
                entries.append(Entry(start: start, end: end, kept: _Kept(bytes: [], posts: command.posts)))
                start = end
            }
        }

        /// A command sent again: its bytes and counts are `kept`'s.
        mutating func append(_ kept: _Kept) {
            let start = bytes.count
            bytes.append(contentsOf: kept.bytes)
            var entry = Entry(start: start, end: bytes.count, kept: kept)
            entry.kept.bytes = []
            entries.append(entry)
        }

        /// The oldest command, removed: `nil` for a mark, or when none is left. Its bytes are copied
        /// out only when `declined` (the reply refused it): an accepted one costs no copy.
        mutating func removeFirst(declined: Bool) -> _Kept? {
            guard head < entries.count else { return nil }
            let entry = entries[head]
            head += 1
            var kept = entry?.kept
            if declined, let entry { kept?.bytes = Array(bytes[entry.start..<entry.end]) }
            // The entries compact as every head-indexed queue of the relay does; the bytes follow.
            _dropConsumed(&entries, head: &head, threshold: 1024)
            if entries.isEmpty {
                bytes.removeAll(keepingCapacity: bytes.capacity <= 1 << 20)
            } else if head == 0 {
                // Compacted: the bytes before the first live command (all of them behind marks).
                let drop = entries.lazy.compactMap { $0?.start }.first ?? bytes.count
                bytes.removeFirst(drop)
                for index in entries.indices where entries[index] != nil {
                    entries[index]!.start -= drop
                    entries[index]!.end -= drop
                }
            }
            return kept
        }

        /// Every command still in flight, oldest first, with its bytes; the marks left out.
        var remaining: [_Kept] {
            entries[head...].compactMap { entry in
                guard let entry else { return nil }
                var kept = entry.kept
                kept.bytes = Array(bytes[entry.start..<entry.end])
                return kept
            }
        }
    }

    /// A command kept to be sent again when a redirection answers it.
    struct _Kept {
        /// The command, formatted (RESP): an `SPUBLISH`, `XADD`, `SET` or `DEL` the relay wrote.
        var bytes: [UInt8]
        var posts: Int
        /// Redirections met.
        var attempts = 0
        /// `CLUSTERDOWN` or `TRYAGAIN` answers met, and waits for a connection to the slot's owner.
        var waits = 0
        /// Sent again because its connection failed before the answer (not for a redirection).
        var lostConnection = false

        /// The command's name and first argument (its channel or key), read from its bytes; `nil`
        /// for bytes that are no such command. Read only for a command declined by a node.
        var nameAndKey: (name: ArraySlice<UInt8>, key: ArraySlice<UInt8>)? {
            // `*<n>\r\n`, then bulk strings: `$<length>\r\n<bytes>\r\n`.
            guard let first = bytes.firstIndex(of: 13) else { return nil }
            var index = first + 2
            func bulk() -> ArraySlice<UInt8>? {
                guard index < bytes.count, bytes[index] == UInt8(ascii: "$"),
                    let end = bytes[index...].firstIndex(of: 13),
                    let length = Int(String(decoding: bytes[(index + 1)..<end], as: UTF8.self)), length >= 0,
                    end + 2 + length <= bytes.count
                else { return nil }
                defer { index = end + 2 + length + 2 }
                return bytes[(end + 2)..<(end + 2 + length)]
            }
            guard let name = bulk(), let key = bulk() else { return nil }
            return (name, key)
        }

        /// The slot of the command's first argument: its channel or key, which share the slot of
        /// the message's channel (a retained post's key is chosen so); 0 for bytes that are no such
        /// command.
        var slot: Int { nameAndKey.map { _ClusterSlot.of($0.key) } ?? 0 }

        /// The key of a retained post's `SET` or a clear's `DEL`; `nil` for any other command.
        var storedKey: String? {
            guard let (name, key) = nameAndKey, name.elementsEqual("SET".utf8) || name.elementsEqual("DEL".utf8)
            else { return nil }
            return String(decoding: key, as: UTF8.self)
        }
    }

    /// The publisher thread's state; owned by that thread alone.
    struct _ClusterPublisher {
        let core: _RelayCore
        var map: _SlotMap? {
            didSet {
                primaries = map?.primaries ?? []
                needsConnect = true
            }
        }
        /// The connections to the primaries must be checked (the map changed, a node failed).
        var needsConnect = true
        /// The primaries of `map`, kept with it (a map has 16,384 entries: not scanned per batch).
        var primaries: Set<_Address> = []
        var stale: Bool
        /// The `-MOVED` and `-ASK` answers since the map was last read.
        var redirects: [_Redirect] = []
        var nodes: [_Address: _PublisherNode] = [:]
        var retryAt: [_Address: ContinuousClock.Instant] = [:]
        var delay: Duration
        /// When the map may be read again after no node answered, and the backoff of those reads.
        var refreshAt = ContinuousClock.now
        var refreshDelay: Duration
        var sequences: [[UInt8]: UInt64] = [:]
        /// Each channel's owner, cached per map (a channel's slot costs a CRC16 of its name).
        var owners: [[UInt8]: _Address] = [:]
        /// History mode: commands in flight on a failed connection are sent again, and posts for a
        /// primary without a connection wait for it (see `_runClusterPublisher`).
        let recovers: Bool
        /// Which key holds each name's retained post (see `_RetainedOnServer.clusterKey`).
        let retainedKeys: _RetainedKeys
        /// The channels reported once as having no retained key in their slot.
        var unstored: Set<[UInt8]> = []
        /// Redirected or refused-for-now commands to send again, in the order their replies came,
        /// with the redirection (`nil`: to the slot's owner after `CLUSTERDOWN` or `TRYAGAIN`).
        var retries: [(kept: _Kept, redirect: _Redirect?)] = []
        /// Not before then (after `CLUSTERDOWN`: the cluster needs a moment).
        var retryNotBefore = ContinuousClock.now
        /// Nodes that answered a redirection and still owe replies: no new message is taken until
        /// they answered everything.
        var draining: Set<_Address> = []
        /// History mode: no new message is taken before then (posts for a primary without a
        /// connection were put back in the outbox).
        var holdUntil = ContinuousClock.now

        init(core: _RelayCore) {
            self.core = core
            let map = core.topology.map.withLock { $0 }
            self.map = map
            self.primaries = map?.primaries ?? []
            self.stale = map == nil
            self.delay = core.options.reconnectDelay.lowerBound
            self.refreshDelay = core.options.reconnectDelay.lowerBound
            self.recovers = core.options.historyLength > 0
            self.retainedKeys = core.retainedKeys
        }

        var inFlightCommands: Int { nodes.values.reduce(0) { $0 + $1.inFlight.commands } }

        mutating func run() {
            let depth = core.options.pipelineDepth
            let maxBytes = core.options.maximumMessageBytes - (core.signer == nil ? 0 : _Wire.signatureLength)
            let interval = core.options.pingInterval
            let patience = min(core.options.connectTimeout, interval * 2)
            var batch: [_Outgoing] = []
            var counts: [Int] = []
            var deadline: ContinuousClock.Instant?
            while true {
                let stopping = core.stopping.load(ordering: .acquiring)
                if stale && !stopping && ContinuousClock.now >= refreshAt {
                    if let fresh = _ClusterNodes.refresh(core, known: map, redirects: redirects) {
                        if fresh != map { owners = [:] }
                        if fresh != map { map = fresh }
                        stale = false
                        redirects = []
                        refreshDelay = core.options.reconnectDelay.lowerBound
                    } else {
                        announce(reason: "no cluster node answers CLUSTER SLOTS")
                        // Not again before the backoff's wait, not at every post.
                        refreshAt = ContinuousClock.now + _jittered(refreshDelay)
                        refreshDelay = min(refreshDelay * 2, core.options.reconnectDelay.upperBound)
                    }
                }
                // Connections are opened, and the state announced, only when something changed:
                // not at every batch.
                if needsConnect || retryAt.values.contains(where: { $0 <= ContinuousClock.now }) {
                    needsConnect = false
                    connectAll()
                }
                draining = draining.filter { (nodes[$0]?.inFlight.commands ?? 0) > 0 }
                if !retries.isEmpty && draining.isEmpty && !stale && ContinuousClock.now >= retryNotBefore {
                    resend(now: ContinuousClock.now)
                }
                let inFlight = inFlightCommands
                // While redirected commands wait to be sent again, later ones wait behind them.
                let holding = ContinuousClock.now < holdUntil
                let room =
                    draining.isEmpty && retries.isEmpty && !holding ? depth * max(1, primaries.count) - inFlight : 0
                core.outbox.withLock { outbox in
                    outbox.connected = map != nil
                    outbox.take(messages: room, maxBytes: maxBytes, into: &batch, counts: &counts)
                    if outbox.count == 0 && inFlight == 0 && batch.isEmpty { outbox.writerWaiting = true }
                }
                var now = ContinuousClock.now
                if !batch.isEmpty {
                    route(batch, counts, now: now)
                    batch.removeAll(keepingCapacity: true)
                    counts.removeAll(keepingCapacity: true)
                }
                for (address, node) in nodes where node.inFlight.commands == 0 && now - node.lastSent >= interval {
                    node.connection.append(["PING"])
                    nodes[address]!.inFlight.push(0)
                    // One entry per command in flight, so that replies stay paired.
                    nodes[address]!.sent.appendMark()
                    nodes[address]!.progress = now
                    nodes[address]!.lastSent = now
                    if !node.connection.flush() { fail(address, "the connection failed while sending") }
                }
                if stopping {
                    let empty = core.outbox.withLock { $0.count == 0 }
                    if empty && inFlightCommands == 0 && retries.isEmpty { return }
                    if deadline == nil { deadline = now + core.options.closeTimeout }
                    if let deadline, now >= deadline {
                        for address in Array(nodes.keys) { forget(address) }
                        return
                    }
                }
                let order = Array(nodes.keys)
                var wait: Duration = stopping ? .milliseconds(10) : interval
                for address in order {
                    let node = nodes[address]!
                    wait = min(
                        wait,
                        node.inFlight.commands > 0 ? node.progress + patience - now : node.lastSent + interval - now)
                }
                if stale { wait = min(wait, refreshAt - now) }
                if let due = retryAt.values.min() { wait = min(wait, due - now) }
                if !retries.isEmpty { wait = min(wait, retryNotBefore - now) }
                if holdUntil > now { wait = min(wait, holdUntil - now) }
                let ready = _ClusterNodes.wait(
                    order.map { nodes[$0]!.connection.socket }, wake: core.publisherWake,
                    timeoutMilliseconds: _milliseconds(wait))
                now = ContinuousClock.now
                if ready.wake { core.publisherWake.drain() }
                for index in ready.ready { read(order[index], now: now) }
                for (address, node) in nodes
                where node.inFlight.commands > 0 && !stopping && now - node.progress >= patience {
                    fail(address, "no reply from the server for \(patience)")
                }
            }
        }

        /// Opens a connection to every primary of the map that has none (and is not waiting for a
        /// retry), closes those to nodes that are no primary any more, and announces the state.
        mutating func connectAll() {
            guard map != nil else { return }
            // A node that is no primary any more (a failed one, replaced) is not retried.
            retryAt = retryAt.filter { primaries.contains($0.key) }
            for address in Array(nodes.keys)
            where !primaries.contains(address) && nodes[address]!.inFlight.commands == 0 {
                nodes[address] = nil
            }
            let now = ContinuousClock.now
            for address in primaries where nodes[address] == nil {
                if let at = retryAt[address], now < at { continue }
                guard let connection = _ClusterNodes.connect(core, address) else {
                    retryAt[address] = now + _jittered(delay)
                    delay = min(delay * 2, core.options.reconnectDelay.upperBound)
                    stale = true  // a primary that cannot be reached may have been replaced
                    announce(reason: "\(address): cannot connect")
                    continue
                }
                retryAt[address] = nil
                delay = core.options.reconnectDelay.lowerBound
                nodes[address] = _PublisherNode(connection: connection)
            }
            announce(reason: "")
        }

        /// `.connected` once every primary of the map has a connection; `.disconnected` naming the
        /// node otherwise.
        func announce(reason: String) {
            let up = map != nil && primaries.allSatisfy { nodes[$0] != nil }
            core.publisherConnected.store(up, ordering: .releasing)
            core.events.set(.publisher, up: up, reason: reason.isEmpty ? "no cluster node answers" : reason)
        }
    }
#endif
