// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import CHiredis

    /// The subscriber thread of a cluster relay: one connection per primary that owns a relayed
    /// name's slot, each name `SSUBSCRIBE`d on its owner (see `_ClusterPlan`), every message posted on
    /// the center as `_runSubscriber` does; on each confirmed `SSUBSCRIBE` the name's retained key is
    /// read from that node (see `RetainedOnServer.swift`).
    ///
    /// The slot map is read again when a node sends `SUNSUBSCRIBE` for a name it no longer owns, when
    /// it answers `-MOVED` or `-ASK`, and when a connection is lost; names whose owner changed are
    /// subscribed on the new owner before the old subscription is given up, and `.topologyChanged` is
    /// sent. `.connected` is due when every node the plan needs is connected; `.disconnected` names
    /// the node that went. Messages published on a node while the relay had no subscription there
    /// are lost (pub/sub is at-most-once) and show as gaps.
    func _runClusterSubscriber(_ core: _RelayCore) {
        var state = _ClusterSubscriber(core: core)
        state.run()
        core.channels.withLock { channels in
            channels.connected = false
            channels.confirmed = []
        }
        core.events.set(.subscriber, up: false, reason: "closed", announce: false)
    }

    /// One node's subscriber connection and its liveness.
    private struct _SubscriberNode {
        let connection: _Connection
        var lastHeard = ContinuousClock.now
        var pinged = false
        var cache = _ChannelCache()
    }

    /// The subscriber thread's state; owned by that thread alone.
    private struct _ClusterSubscriber {
        let core: _RelayCore
        var plan = _ClusterPlan()
        var nodes: [_Address: _SubscriberNode] = [:]
        var map: _SlotMap?
        /// The map must be read again before the plan is brought up to date.
        var stale = true
        /// The `-MOVED` and `-ASK` answers since the map was last read.
        var redirects: [_Redirect] = []
        var needsSync = true
        var delay: Duration
        /// Nodes that could not be reached lately, and when to try them again.
        var retryAt: [_Address: ContinuousClock.Instant] = [:]
        /// Nodes lost or unreachable whose names are not yet subscribed elsewhere: while any is,
        /// the relay is disconnected. (A slot that moved between two live nodes is no disconnection.)
        var down: Set<_Address> = []

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
                }
                if needsSync {
                    needsSync = false
                    sync()
                    if stale { continue }
                }
                var now = ContinuousClock.now
                for (address, node) in nodes {
                    if now - node.lastHeard >= interval * 2 {
                        drop(address, reason: "no answer to PING for \(interval * 2)")
                    } else if !node.pinged && now - node.lastHeard >= interval {
                        nodes[address]?.pinged = true
                        node.connection.append(["PING"])
                        if !node.connection.flush() { drop(address, reason: "the connection failed while sending") }
                    }
                }
                if stale { continue }
                let order = Array(nodes.keys)
                var wait = interval
                for address in order {
                    let node = nodes[address]!
                    wait = min(wait, node.lastHeard + (node.pinged ? interval * 2 : interval) - now)
                }
                // While a node is being retried, come back for it.
                if let due = retryAt.values.min() { wait = min(wait, due - now) }
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
            }
            for address in Array(nodes.keys) { nodes[address] = nil }
        }

        /// Brings the plan up to the relayed names and the map, sends the commands, and opens or
        /// closes node connections accordingly.
        mutating func sync() {
            guard let map else { return }
            let wanted = core.channels.withLock { Set($0.bindings.keys) }
            let (commands, moved) = plan.update(wanted: wanted, map: map)
            if !moved.isEmpty { core.events.emit(.topologyChanged) }
            for command in commands { send(command) }
            for address in nodes.keys where !plan.nodes.contains(address) { nodes[address] = nil }
            down = down.filter { retryAt[$0] != nil || (plan.nodes.contains($0) && nodes[$0] == nil) }
            publishState(reason: "")
        }

        /// Sends one `SSUBSCRIBE` or `SUNSUBSCRIBE`, connecting to its node first when needed. A node
        /// that cannot be reached has its names placed again once the map was read anew.
        mutating func send(_ command: _ClusterPlan.Command) {
            if nodes[command.node] == nil {
                guard command.subscribe else { return }  // no connection: nothing to give up there
                // Not reachable lately: its names wait unplaced until the retry is due, when the map
                // is read again (a replica may have taken over).
                if retryAt[command.node] != nil {
                    _ = plan.lost(node: command.node)
                    return
                }
                guard let connection = _ClusterNodes.connect(core, command.node) else {
                    retryAt[command.node] = ContinuousClock.now + _jittered(delay)
                    delay = min(delay * 2, core.options.reconnectDelay.upperBound)
                    _ = plan.lost(node: command.node)
                    down.insert(command.node)
                    publishState(reason: "\(command.node): cannot connect")
                    return
                }
                retryAt[command.node] = nil
                down.remove(command.node)
                delay = core.options.reconnectDelay.lowerBound
                connection.gate = _LengthGate(limit: core.options.maximumMessageBytes)
                nodes[command.node] = _SubscriberNode(connection: connection)
            }
            let verb = command.subscribe ? "SSUBSCRIBE" : "SUNSUBSCRIBE"
            // One command per channel: a cluster refuses several channels of different slots in one
            // (CROSSSLOT).
            for channel in command.channels { nodes[command.node]!.connection.append([verb, channel]) }
            if !nodes[command.node]!.connection.flush() {
                drop(command.node, reason: "the connection failed while sending")
            }
        }

        /// Reads what one node sent: messages, confirmations, and the server's own `SUNSUBSCRIBE`
        /// of a slot that moved away.
        mutating func read(_ address: _Address) {
            guard var node = nodes[address] else { return }
            guard node.connection.readAvailable() else {
                drop(address, reason: "the server closed the connection")
                return
            }
            node.lastHeard = ContinuousClock.now
            node.pinged = false
            var followUps: [_ClusterPlan.Command] = []
            var confirmations = false
            // For reading retained keys of names confirmed in this read, on this node (the key
            // shares the channel's slot; see `RetainedOnServer.swift`); closed when the read ends.
            var side: _Connection?
            while true {
                let (reply, ok) = node.connection.nextReply()
                guard ok else {
                    nodes[address] = node
                    drop(address, reason: "the server's reply is malformed")
                    return
                }
                guard let reply else { break }
                defer { freeReplyObject(reply) }
                if reply.pointee.type == REDIS_REPLY_ERROR {
                    let text = reply.pointee.str.map { String(cString: $0) } ?? "error"
                    if let redirect = _Redirect(text) {
                        redirects = Array((redirects + [redirect]).suffix(256))
                        stale = true  // -MOVED / -ASK: the slot is elsewhere now
                    } else {
                        core.events.emit(.permissionDenied(text))
                    }
                    continue
                }
                // A message (the common case) is told apart by its kind's length (8: smessage),
                // without making a string.
                let kind = _ClusterSubscriber.isMessage(reply) ? nil : _ClusterSubscriber.kind(reply)
                if kind == "ssubscribe" || kind == "sunsubscribe", let channel = _ClusterSubscriber.channel(reply) {
                    confirmations = true
                    if kind == "ssubscribe" {
                        if plan.placed[channel] == address { core.readStored(channel, on: &side, node: address) }
                        if let release = plan.confirmed(channel, on: address) { followUps.append(release) }
                    } else if plan.lost(channel, on: address) {
                        stale = true  // the node gave the slot up: find its new owner
                    }
                    continue
                }
                let connection = node.connection
                _handle(core, reply, &node.cache) { connection.gate?.takeOversized() }
            }
            nodes[address] = node
            for command in followUps { send(command) }
            if confirmations { publishState(reason: "") }
        }

        /// Forgets a node's connection (lost or failed): its names are placed again after the map is
        /// read anew.
        mutating func drop(_ address: _Address, reason: String) {
            nodes[address] = nil
            _ = plan.lost(node: address)
            down.insert(address)
            // Not again at once: a node that fails every connection would otherwise be retried in
            // a tight loop.
            retryAt[address] = ContinuousClock.now + _jittered(delay)
            delay = min(delay * 2, core.options.reconnectDelay.upperBound)
            stale = true
            publishState(reason: "\(address): \(reason)")
        }

        /// Tells the relay which names are confirmed and whether every needed node is connected.
        func publishState(reason: String) {
            let confirmed = plan.confirmed.filter { nodes[$0.value] != nil }.map(\.key)
            let placed = plan.placed
            let up = map != nil && down.isEmpty
            core.channels.withLock { channels in
                channels.confirmed = Set(confirmed)
                channels.connected = up && channels.bindings.keys.allSatisfy { placed[$0] != nil }
            }
            core.events.set(.subscriber, up: up, reason: reason.isEmpty ? "no cluster node answers" : reason)
        }

        /// Whether a push is a message: its kind is 7 or 8 bytes (`message`, `smessage`), unlike the
        /// (un)subscribe confirmations.
        static func isMessage(_ reply: UnsafeMutablePointer<redisReply>) -> Bool {
            guard reply.pointee.type == REDIS_REPLY_ARRAY, reply.pointee.elements >= 3,
                let first = reply.pointee.element[0]
            else { return false }
            return first.pointee.len == 7 || first.pointee.len == 8
        }

        /// The first element of a push (`smessage`, `ssubscribe`, …) as text.
        static func kind(_ reply: UnsafeMutablePointer<redisReply>) -> String? {
            guard reply.pointee.type == REDIS_REPLY_ARRAY, reply.pointee.elements >= 2,
                let first = reply.pointee.element[0],
                first.pointee.type == REDIS_REPLY_STRING || first.pointee.type == REDIS_REPLY_STATUS,
                let str = first.pointee.str,
                first.pointee.len < 16
            else { return nil }
            return String(decoding: UnsafeRawBufferPointer(start: str, count: Int(first.pointee.len)), as: UTF8.self)
        }

        /// The second element of a push (its channel) as text.
        static func channel(_ reply: UnsafeMutablePointer<redisReply>) -> String? {
            guard let second = reply.pointee.element[1], second.pointee.type == REDIS_REPLY_STRING,
                let str = second.pointee.str
            else { return nil }
            return String(decoding: UnsafeRawBufferPointer(start: str, count: Int(second.pointee.len)), as: UTF8.self)
        }
    }
#endif
