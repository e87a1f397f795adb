// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import CHiredis

    /// The subscriber thread of a cluster relay in history mode (`Options.historyLength > 0`): reads
    /// each relayed name's stream on the primary that owns its slot (`_ClusterHistoryPlan`), one
    /// connection per such primary, as `_serveHistory` reads one server: each channel's tip first
    /// (`XREVRANGE … COUNT 1`), then blocking `XREAD`s from the positions `_HistoryCursors` keeps, one
    /// owed command per connection. A name read for the first time has its retained key read
    /// right after its tip, on the same connection (see `RetainedOnServer.swift`).
    ///
    /// One `XREAD` reads the names of one slot (a cluster refuses keys of several slots in one
    /// command); a node that serves names of several slots reads them in turn, each read blocking
    /// 10 ms instead of `_HistoryReading.block` (names that share a hash tag share one read).
    ///
    /// The slot map is read again on `-MOVED` (to `XREVRANGE` or `XREAD`), when a connection is
    /// lost, and every `_ClusterHistoryPlan.mapAge` (a move no reply told of is followed all the
    /// same); a name whose owner changed is read on its new owner from the position it kept, so what
    /// the old owner had (and the new one has: a migrated key, a promoted replica) is delivered once,
    /// and what a failover lost shows as a gap in sequence numbers (`missedPosts`); `.topologyChanged`
    /// is sent. `-ASK` (a key already migrated while its slot still migrates) makes the node's names
    /// wait a moment and ask again, until the slot's move ends with `-MOVED`; so do `CLUSTERDOWN`,
    /// `TRYAGAIN` and `LOADING` (`_ClusterHistoryPlan.isTransient`). Any other error reply is a
    /// `.permissionDenied` event, the refused node retried after a `pingInterval`. A read of a
    /// name's retained key answered with a redirection or a passing state, or lost with its
    /// connection, is sent again after the name's next tip, on the node that serves it then (after
    /// `CLUSTERDOWN` or `TRYAGAIN` the name is placed and tipped again for that); a refused one is
    /// only reported.
    func _runClusterHistoryReader(_ core: _RelayCore) {
        var state = _ClusterHistoryReader(core: core)
        state.run()
        core.channels.withLock { channels in
            channels.connected = false
            channels.confirmed = []
        }
        core.events.set(.subscriber, up: false, reason: "closed", announce: false)
    }

    /// One node's reading connection: what it is owed, and its liveness.
    private struct _ReadingNode {
        let connection: _Connection
        var owed: [_HistoryReading.Owed] = []
        /// When an answer became due, or the last one came.
        var lastHeard = ContinuousClock.now
        var waitUntil: ContinuousClock.Instant?
        /// Which slot group the next read covers.
        var window = 0
    }

    /// The reading thread's state; owned by that thread alone.
    private struct _ClusterHistoryReader {
        let core: _RelayCore
        var plan = _ClusterHistoryPlan()
        var cursors = _HistoryCursors()
        var nodes: [_Address: _ReadingNode] = [:]
        var map: _SlotMap?
        var stale = true
        /// The `-MOVED` answers since the map was last read.
        var redirects: [_Redirect] = []
        var needsSync = true
        var delay: Duration
        var retryAt: [_Address: ContinuousClock.Instant] = [:]
        /// Nodes lost or unreachable whose names are not read elsewhere yet.
        var down: Set<_Address> = []
        /// When the map was last read: it is read again every `_ClusterHistoryPlan.mapAge`, so that a
        /// move no reply told of (a node that keeps answering `-ASK`, a read that never met the
        /// move) is followed all the same.
        var mapRead = ContinuousClock.now
        /// Names whose retained key was asked for and not answered yet: a read answered with a
        /// redirection (or lost with its connection) is sent again after the name's next tip, on
        /// the node that serves it then.
        var storedPending: Set<String> = []

        init(core: _RelayCore) {
            self.core = core
            self.map = core.topology.map.withLock { $0 }
            self.delay = core.options.reconnectDelay.lowerBound
        }

        mutating func run() {
            let interval = core.options.pingInterval
            while !core.stopping.load(ordering: .acquiring) {
                if stale {
                    guard let fresh = _ClusterNodes.refresh(core, known: map, redirects: redirects) else {
                        publishState(reason: "no cluster node answers CLUSTER SLOTS")
                        _sleep(core.subscriberWake, _jittered(delay))
                        delay = min(delay * 2, core.options.reconnectDelay.upperBound)
                        continue
                    }
                    map = fresh
                    stale = false
                    redirects = []
                    needsSync = true
                    mapRead = ContinuousClock.now
                }
                if needsSync {
                    needsSync = false
                    sync()
                    if stale { continue }
                }
                var now = ContinuousClock.now
                for address in Array(nodes.keys) {
                    issue(address, now: now)
                }
                let order = Array(nodes.keys)
                var wait = interval
                for address in order {
                    let node = nodes[address]!
                    wait = min(wait, node.lastHeard + (node.owed.isEmpty ? interval : interval * 2) - now)
                    if let until = node.waitUntil { wait = min(wait, until - now) }
                }
                if core.readingPaused.load(ordering: .relaxed) { wait = min(wait, .milliseconds(5)) }
                if let due = retryAt.values.min() { wait = min(wait, due - now) }
                wait = min(wait, mapRead + _ClusterHistoryPlan.mapAge - now)
                let ready = _ClusterNodes.wait(
                    order.map { nodes[$0]!.connection.socket }, wake: core.subscriberWake,
                    timeoutMilliseconds: _milliseconds(wait))
                if ready.wake {
                    core.subscriberWake.drain()
                    needsSync = true
                }
                for index in ready.ready { read(order[index]) }
                now = ContinuousClock.now
                let due = retryAt.filter { $0.value <= now }.map(\.key)
                if !due.isEmpty {
                    for address in due { retryAt[address] = nil }
                    stale = true
                }
                if now - mapRead >= _ClusterHistoryPlan.mapAge { stale = true }
            }
            for address in Array(nodes.keys) { nodes[address] = nil }
        }

        /// Brings the cursors and the plan up to the relayed names and the map, and opens or closes
        /// node connections accordingly.
        mutating func sync() {
            guard let map else { return }
            let wanted = core.channels.withLock { Set($0.bindings.keys) }
            cursors.sync(wanted: wanted)
            let (placed, moved) = plan.update(wanted: wanted, map: map)
            // Read where they are now, from where they stopped.
            cursors.lost(placed)
            if !moved.isEmpty { core.events.emit(.topologyChanged) }
            for address in nodes.keys where !plan.nodes.contains(address) { nodes[address] = nil }
            for address in plan.nodes where nodes[address] == nil {
                // Not reachable lately: its names wait unplaced until the retry is due, when the map
                // is read again (a replica may have taken over).
                if retryAt[address] != nil {
                    _ = plan.lost(node: address)
                    continue
                }
                guard let connection = _ClusterNodes.connect(core, address) else {
                    retryAt[address] = ContinuousClock.now + _jittered(delay)
                    delay = min(delay * 2, core.options.reconnectDelay.upperBound)
                    _ = plan.lost(node: address)
                    down.insert(address)
                    publishState(reason: "\(address): cannot connect")
                    continue
                }
                retryAt[address] = nil
                down.remove(address)
                delay = core.options.reconnectDelay.lowerBound
                connection.gate = _LengthGate(limit: core.options.maximumMessageBytes)
                nodes[address] = _ReadingNode(connection: connection)
            }
            down = down.filter { retryAt[$0] != nil || (plan.nodes.contains($0) && nodes[$0] == nil) }
            publishState(reason: "")
        }

        /// Sends a node its next command when it owes none: the tips its names need, else the read of
        /// its next slot group, else a `PING` after an interval of silence; gives up a node owed an
        /// answer for two intervals.
        mutating func issue(_ address: _Address, now: ContinuousClock.Instant) {
            guard var node = nodes[address] else { return }
            let interval = core.options.pingInterval
            if !node.owed.isEmpty {
                if now - node.lastHeard >= interval * 2 {
                    drop(address, reason: "no answer to XREAD for \(interval * 2)")
                }
                return
            }
            if let until = node.waitUntil {
                guard now >= until else { return }
                node.waitUntil = nil
            }
            let groups = plan.slotGroups(on: address)
            let paused = core.readingPaused.load(ordering: .relaxed)
            let tips = groups.joined().filter { !cursors.isReady($0) }
            if !paused && !tips.isEmpty {
                for channel in tips {
                    node.connection.append([
                        Array("XREVRANGE".utf8), Array(channel.utf8), [UInt8(ascii: "+")], [UInt8(ascii: "-")],
                        Array("COUNT".utf8), [UInt8(ascii: "1")],
                    ])
                    node.owed.append(.tip(channel))
                }
            } else if !paused && !groups.isEmpty,
                let positions = cursors.readPositions(
                    of: groups[node.window % groups.count].prefix(_HistoryReading.maxStreams))
            {
                let pending = core.deliveries.withLock(\.pending)
                let count = min(
                    cursors.readCap.value,
                    _HistoryReading.count(
                        pending: pending, limit: core.options.maxPendingPosts, streams: max(1, plan.placed.count),
                        messageBytes: core.options.maximumMessageBytes))
                if count > 0 {
                    node.window += 1
                    let block = groups.count > 1 ? 10 : _HistoryReading.block(interval)
                    var command: [[UInt8]] = [
                        Array("XREAD".utf8), Array("COUNT".utf8), Array("\(count)".utf8),
                        Array("BLOCK".utf8), Array("\(block)".utf8), Array("STREAMS".utf8),
                    ]
                    command += positions.map { Array($0.channel.utf8) }
                    command += positions.map { Array($0.after.description.utf8) }
                    node.connection.append(command)
                    node.owed.append(.read(count: count, channels: Set(positions.map(\.channel))))
                } else {
                    // Handlers are behind: the history keeps the rest; look again soon.
                    node.waitUntil = now + .milliseconds(10)
                }
            }
            if node.owed.isEmpty && now - node.lastHeard >= interval {
                node.connection.append(["PING"])
                node.owed.append(.ping)
            }
            if !node.owed.isEmpty {
                node.lastHeard = now
                nodes[address] = node
                if !node.connection.flush() { drop(address, reason: "the connection failed while sending") }
                return
            }
            nodes[address] = node
        }

        /// Reads the replies one node sent: tips, entries (delivered through `_read`), redirections.
        mutating func read(_ address: _Address) {
            guard var node = nodes[address] else { return }
            guard node.connection.readAvailable() else {
                drop(address, reason: "the server closed the connection")
                return
            }
            let now = ContinuousClock.now
            node.lastHeard = now
            var tipped = false
            var storing = false
            while true {
                let (reply, ok) = node.connection.nextReply()
                guard ok else {
                    nodes[address] = node
                    drop(address, reason: "the server's reply is malformed")
                    return
                }
                guard let reply else { break }
                defer { freeReplyObject(reply) }
                guard !node.owed.isEmpty else {
                    nodes[address] = node
                    drop(address, reason: "the server sent a reply nobody asked for")
                    return
                }
                let what = node.owed.removeFirst()
                if reply.pointee.type == REDIS_REPLY_ERROR {
                    let text = String(
                        decoding: UnsafeRawBufferPointer(start: reply.pointee.str, count: Int(reply.pointee.len)),
                        as: UTF8.self)
                    if case .stored(let channel) = what, _ClusterHistoryPlan.isRefusal(text) {
                        // A refused read of a retained key is only reported: the name is read all
                        // the same.
                        storedPending.remove(channel)
                        core.events.emit(.permissionDenied(text))
                        continue
                    }
                    let channels: [String]
                    switch what {
                    case .tip(let channel), .stored(let channel): channels = [channel]
                    case .read(_, let read): channels = read.sorted()
                    case .ping: channels = []
                    }
                    if let redirect = _Redirect(text), !redirect.asking {
                        // The slot has a new owner: place its names again once the map was read.
                        redirects = Array((redirects + [redirect]).suffix(256))
                        for channel in channels where plan.lost(channel, on: address) { cursors.lost([channel]) }
                        stale = true
                    } else if _Redirect(text) != nil {
                        // -ASK: the slot is migrating; its owner answers -MOVED once it moved.
                        node.waitUntil = now + .milliseconds(10)
                    } else if _ClusterHistoryPlan.isTransient(text) {
                        // Until a replica took over (or the node loaded its data): ask again soon.
                        node.waitUntil = now + .milliseconds(100)
                        if case .stored(let channel) = what, plan.lost(channel, on: address) {
                            // Placed again, tipped again, and its key asked for again then.
                            cursors.lost([channel])
                            stale = true
                        }
                    } else {
                        core.events.emit(.permissionDenied(text))
                        node.waitUntil = now + core.options.pingInterval
                    }
                    continue
                }
                switch what {
                case .ping: break
                case .stored(let channel):
                    storedPending.remove(channel)
                    _acceptStored(core, channel, reply, node.connection)
                case .tip(let channel):
                    guard plan.placed[channel] == address else { continue }  // moved meanwhile
                    // A name read for the first time: its retained key next, on this node (the key
                    // shares the stream's slot), before any XREAD (see `RetainedOnServer.swift`).
                    let first = cursors.cursors[channel].map { $0.position == nil } ?? false
                    cursors.tip(channel, last: _newestID(reply, node.connection))
                    tipped = true
                    if first || storedPending.contains(channel), let read = core.storedRead(channel) {
                        node.connection.append(read)
                        node.owed.append(.stored(channel))
                        storedPending.insert(channel)
                        storing = true
                    }
                case .read(let count, let channels):
                    guard _read(core, reply, count: count, channels: channels, node.connection, &cursors) else {
                        nodes[address] = node
                        drop(address, reason: "the server's reply is malformed")
                        return
                    }
                    cursors.readCap.answered()
                }
            }
            nodes[address] = node
            if storing && !node.connection.flush() {
                drop(address, reason: "the connection failed while sending")
                return
            }
            if tipped { publishState(reason: "") }
        }

        /// Forgets a node's connection (lost or failed): its names are placed again, and read on from
        /// their positions, once the map was read anew.
        mutating func drop(_ address: _Address, reason: String) {
            // Lost with a read unanswered: later reads ask for fewer entries (see `_HistoryReadCap`).
            if nodes[address]?.owed.contains(where: { if case .read = $0 { true } else { false } }) == true {
                cursors.readCap.cut()
            }
            nodes[address] = nil
            cursors.lost(plan.lost(node: address))
            down.insert(address)
            retryAt[address] = ContinuousClock.now + _jittered(delay)
            delay = min(delay * 2, core.options.reconnectDelay.upperBound)
            stale = true
            publishState(reason: "\(address): \(reason)")
        }

        /// Tells the relay which names know where to read from and whether every needed node is
        /// connected.
        func publishState(reason: String) {
            let placed = plan.placed
            let ready = placed.filter { nodes[$0.value] != nil && cursors.isReady($0.key) }.map(\.key)
            let up = map != nil && down.isEmpty
            core.channels.withLock { channels in
                channels.confirmed = Set(ready)
                channels.connected = up && channels.bindings.keys.allSatisfy { placed[$0] != nil }
            }
            core.events.set(.subscriber, up: up, reason: reason.isEmpty ? "no cluster node answers" : reason)
        }
    }
#endif
