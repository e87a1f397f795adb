// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import CHiredis
    import Foundation

    /// The subscriber thread: keeps the relayed channels subscribed on its own connection and posts
    /// every message from another relay on the center.
    ///
    /// It is the only thread that posts inbound messages, so they reach the center in the order Redis
    /// delivered them (a batch message's posts in their order, once the whole batch checked out).
    /// While it posts one, the thread marker names that channel's binding, so the relay's own handler
    /// does not publish it back. When the connection fails it reconnects with exponential backoff and
    /// subscribes again; messages published meanwhile are lost (pub/sub is at-most-once).
    func _runSubscriber(_ core: _RelayCore, first: _Connection?) {
        // History mode: where each stream was read up to, kept across connections.
        var cursors = _HistoryCursors()
        _reconnecting(core, first: first, side: .subscriber, wake: core.subscriberWake) { live in
            core.channels.withLock { channels in
                channels.connected = true
                channels.confirmed = []
            }
            let reason = core.options.historyLength > 0 ? _serveHistory(core, live, &cursors) : _serve(core, live)
            core.channels.withLock { channels in
                channels.connected = false
                channels.confirmed = []
            }
            return reason
        }
    }

    /// Serves one connection until it fails or the relay stops; returns why it ended. Sends a `PING`
    /// when nothing arrived for a `pingInterval`, and gives the connection up when nothing arrived
    /// for two.
    private func _serve(_ core: _RelayCore, _ connection: _Connection) -> String {
        var subscribed: Set<String> = []
        var needsSync = true
        var cache = _ChannelCache()
        let interval = core.options.pingInterval
        var lastHeard = ContinuousClock.now
        var pinged = false
        connection.gate = _LengthGate(limit: core.options.maximumMessageBytes)
        while !core.stopping.load(ordering: .acquiring) {
            // Sentinel: a new primary was announced; this connection is to the old one.
            if connection.epoch != core.topology.current { return "the primary moved" }
            if needsSync {
                needsSync = false
                cache = _ChannelCache()  // releases a binding cached before it was unbound
                let wanted = core.channels.withLock { Set($0.bindings.keys) }
                let added = wanted.subtracting(subscribed)
                let removed = subscribed.subtracting(wanted)
                if !added.isEmpty { connection.append([Array("SUBSCRIBE".utf8)] + added.map { Array($0.utf8) }) }
                if !removed.isEmpty { connection.append([Array("UNSUBSCRIBE".utf8)] + removed.map { Array($0.utf8) }) }
                subscribed = wanted
                if !(added.isEmpty && removed.isEmpty) && !connection.flush() {
                    return "the connection failed while sending"
                }
            }
            if core.readingPaused.load(ordering: .relaxed) {
                if _poll(socket: nil, wake: core.subscriberWake, timeoutMilliseconds: 5).wake {
                    core.subscriberWake.drain()
                    needsSync = true
                }
                continue
            }
            var now = ContinuousClock.now
            if now - lastHeard >= interval * 2 { return "no answer to PING for \(interval * 2)" }
            if !pinged && now - lastHeard >= interval {
                pinged = true
                connection.append(["PING"])
                if !connection.flush() { return "the connection failed while sending" }
            }
            let wait = lastHeard + (pinged ? interval * 2 : interval) - now
            let ready = _poll(
                socket: connection.socket, wake: core.subscriberWake, timeoutMilliseconds: _milliseconds(wait))
            if ready.wake {
                core.subscriberWake.drain()
                needsSync = true
            }
            if ready.socket {
                guard connection.readAvailable() else { return "the server closed the connection" }
                now = ContinuousClock.now
                lastHeard = now
                pinged = false
                // For reading retained keys of names confirmed in this read (see `RetainedOnServer.swift`).
                var side: _Connection?
                while true {
                    let (reply, ok) = connection.nextReply()
                    guard ok else { return "the server's reply is malformed" }
                    guard let reply else { break }
                    _handle(
                        core, reply, &cache, oversized: { connection.gate?.takeOversized() },
                        confirmed: { core.readStored($0, on: &side) })
                    freeReplyObject(reply)
                }
            }
        }
        return "closed"
    }

    /// Handles one push of the subscriber connection: a message, or a (un)subscribe confirmation.
    /// The last channel a message came on and its binding: a burst on one channel then costs a
    /// byte comparison per message instead of a `String` and a hash.
    struct _ChannelCache {
        var name: [UInt8] = []
        var inbound: _Inbound?
        var generation = -1
    }

    private let _messageKind = Array("message".utf8)
    /// A sharded channel's message (a cluster's `SSUBSCRIBE`).
    private let _shardedMessageKind = Array("smessage".utf8)

    private func _bytes(_ reply: UnsafeMutablePointer<redisReply>) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: reply.pointee.str, count: reply.pointee.str == nil ? 0 : Int(reply.pointee.len))
    }

    private func _equal(_ bytes: UnsafeRawBufferPointer, _ other: [UInt8]) -> Bool {
        bytes.count == other.count
            && other.withUnsafeBytes { other in
                bytes.count == 0 || memcmp(bytes.baseAddress!, other.baseAddress!, bytes.count) == 0
            }
    }

    /// Handles one push of the subscriber connection: a message, or a (un)subscribe confirmation.
    /// `oversized` gives the announced length of a message that the connection's `_LengthGate`
    /// replaced by a null (it was never buffered).
    /// `confirmed` is told of each channel whose subscription is confirmed, before it counts as
    /// confirmed (the pub/sub subscriber reads its retained key there).
    func _handle(
        _ core: _RelayCore, _ reply: UnsafeMutablePointer<redisReply>, _ cache: inout _ChannelCache,
        oversized: () -> Int?, confirmed: (String) -> Void = { _ in }
    ) {
        if reply.pointee.type == REDIS_REPLY_ERROR {
            // A refused SUBSCRIBE or UNSUBSCRIBE (NOPERM …): that name stays unconfirmed.
            core.events.emit(.permissionDenied(_string(reply)))
            return
        }
        guard reply.pointee.type == REDIS_REPLY_ARRAY, reply.pointee.elements >= 3,
            let elements = reply.pointee.element, let kind = elements[0], let channel = elements[1],
            let third = elements[2]
        else { return }
        if _equal(_bytes(kind), _messageKind) || _equal(_bytes(kind), _shardedMessageKind) {
            // A null: the message was over maximumMessageBytes, its bytes dropped as they arrived.
            let size = third.pointee.type == REDIS_REPLY_NIL ? oversized() : nil
            let name = _bytes(channel)
            let cached = cache
            let found = core.channels.withLock { channels -> (_Inbound?, Int)? in
                if channels.generation == cached.generation && _equal(name, cached.name) { return nil }
                return (channels.bindings[String(decoding: name, as: UTF8.self)], channels.generation)
            }
            if let (inbound, generation) = found {
                cache = _ChannelCache(name: Array(name), inbound: inbound, generation: generation)
            }
            guard let inbound = cache.inbound else { return }
            if let size {
                _reject(core, "a message of \(size) bytes, over maximumMessageBytes")
                return
            }
            guard third.pointee.type == REDIS_REPLY_STRING else {
                _reject(core, "a message that is not a string")
                return
            }
            let bytes = UnsafeRawBufferPointer(start: third.pointee.str, count: Int(third.pointee.len))
            _ = _accept(core, inbound, bytes, channel: name)
            return
        }
        switch _string(kind) {
        case "subscribe":
            let channel = _string(channel)
            confirmed(channel)
            core.channels.withLock { _ = $0.confirmed.insert(channel) }
        case "unsubscribe":
            let channel = _string(channel)
            core.channels.withLock { _ = $0.confirmed.remove(channel) }
        default:
            return
        }
    }

    /// Checks one message received on `name` for `inbound` (see `_Reception`), queues its posts for
    /// the delivery thread, and counts a rejection or a gap before it. Returns the posts queued (zero
    /// when none were). Called by the subscriber thread, for a pub/sub message or a history entry.
    /// `stored`: `bytes` is a retained post read from the key `name` (see `RetainedOnServer.swift`).
    func _accept(
        _ core: _RelayCore, _ inbound: _Inbound, _ bytes: UnsafeRawBufferPointer, channel name: UnsafeRawBufferPointer,
        stored: Bool = false
    ) -> Int {
        var queued = 0
        let action = inbound.sequences.withLock { sequences in
            _Reception.receive(
                bytes, channel: name, ownHeader: core.header, signer: core.signer,
                maximumMessageBytes: core.options.maximumMessageBytes, sequences: &sequences, stored: stored
            ) { parsed in
                // Decoded here; posted by the delivery thread, so that handlers never hold up the
                // reading of the socket.
                switch parsed {
                case .post(let kind, _) where kind == _Wire.clearRetained:
                    // A clear: no post, delivered in its place among the posts.
                    core.deliver(inbound, posts: 0, inbound.clear)
                    return true
                case .post(let kind, let body):
                    guard _Wire.postKind(kind) == inbound.kind, let post = inbound.decode(body, _Wire.isRetained(kind))
                    else { return false }
                    core.deliver(inbound, posts: 1, post)
                    queued = 1
                    return true
                case .batch(let batch):
                    // All or nothing: none of its posts made when any entry is bad.
                    guard batch.kind == inbound.kind, let post = inbound.decodeBatch(batch) else { return false }
                    core.deliver(inbound, posts: batch.count, post)
                    queued = batch.count
                    return true
                case .mine, .foreign, .announcement:
                    return false
                }
            }
        }
        switch action {
        case .ignore: break
        case .reject(let reason): _reject(core, reason)
        case .delivered(let missed), .announced(let missed):
            if missed > 0 {
                core.missed.addSaturating(missed)
                core.events.emit(.missed(count: missed))
            }
        }
        return queued
    }

    /// Counts a refused message and reports why.
    func _reject(_ core: _RelayCore, _ reason: String) {
        core.rejected.add(1, ordering: .relaxed)
        core.events.emit(.rejected(reason: reason))
    }

    private func _string(_ reply: UnsafeMutablePointer<redisReply>) -> String {
        guard let str = reply.pointee.str else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: str, count: Int(reply.pointee.len)), as: UTF8.self)
    }
#endif
