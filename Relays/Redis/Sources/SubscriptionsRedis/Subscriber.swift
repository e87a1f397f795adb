import CHiredis

/// The subscriber thread: keeps the relayed channels subscribed on its own connection and posts
/// every message from another relay on the center.
///
/// It is the only thread that posts inbound messages, so they reach the center in the order Redis
/// delivered them. While it posts one, the thread marker names that channel's binding, so the
/// relay's own handler does not publish it back. When the connection fails it reconnects with
/// exponential backoff and subscribes again; messages published meanwhile are lost (pub/sub is
/// at-most-once).
func _runSubscriber(_ core: _RelayCore, first: _Connection?) {
    var connection = first
    var delay = core.options.reconnectDelay.lowerBound
    while !core.stopping.load(ordering: .acquiring) {
        guard let live = connection ?? _connect(core) else {
            _sleep(core.subscriberWake, delay)
            delay = min(delay * 2, core.options.reconnectDelay.upperBound)
            continue
        }
        connection = nil
        delay = core.options.reconnectDelay.lowerBound
        core.channels.withLock { channels in
            channels.connected = true
            channels.confirmed = []
        }
        _serve(core, live)
        core.channels.withLock { channels in
            channels.connected = false
            channels.confirmed = []
        }
    }
}

/// Serves one connection until it fails or the relay stops.
private func _serve(_ core: _RelayCore, _ connection: _Connection) {
    var subscribed: Set<String> = []
    var needsSync = true
    while !core.stopping.load(ordering: .acquiring) {
        if needsSync {
            needsSync = false
            let wanted = core.channels.withLock { Set($0.bindings.keys) }
            let added = wanted.subtracting(subscribed)
            let removed = subscribed.subtracting(wanted)
            if !added.isEmpty { connection.append([Array("SUBSCRIBE".utf8)] + added.map { Array($0.utf8) }) }
            if !removed.isEmpty { connection.append([Array("UNSUBSCRIBE".utf8)] + removed.map { Array($0.utf8) }) }
            subscribed = wanted
            if !(added.isEmpty && removed.isEmpty) && !connection.flush() { return }
        }
        let ready = _poll(socket: connection.fd, wake: core.subscriberWake, timeoutMilliseconds: -1)
        if ready.wake {
            core.subscriberWake.drain()
            needsSync = true
        }
        if ready.socket {
            guard connection.readAvailable() else { return }
            while true {
                let (reply, ok) = connection.nextReply()
                guard ok else { return }
                guard let reply else { break }
                _handle(core, reply)
                freeReplyObject(reply)
            }
        }
    }
}

/// Handles one push of the subscriber connection: a message, or a (un)subscribe confirmation.
private func _handle(_ core: _RelayCore, _ reply: UnsafeMutablePointer<redisReply>) {
    guard reply.pointee.type == REDIS_REPLY_ARRAY, reply.pointee.elements >= 3,
        let elements = reply.pointee.element, let kind = elements[0], let channel = elements[1],
        let third = elements[2]
    else { return }
    let name = _string(kind)
    switch name {
    case "message":
        let channel = _string(channel)
        guard let inbound = core.channels.withLock({ $0.bindings[channel] }) else { return }
        guard third.pointee.type == REDIS_REPLY_STRING else {
            core.rejected.add(1, ordering: .relaxed)
            return
        }
        let bytes = UnsafeRawBufferPointer(start: third.pointee.str, count: Int(third.pointee.len))
        switch _Wire.parse(bytes, ownHeader: core.header) {
        case .mine:
            return
        case .foreign:
            core.rejected.add(1, ordering: .relaxed)
        case .post(let kind, let body):
            let delivered = kind == inbound.kind && _ThreadMarker.with(inbound.marker) { inbound.deliver(body) }
            if !delivered { core.rejected.add(1, ordering: .relaxed) }
        }
    case "subscribe":
        let channel = _string(channel)
        core.channels.withLock { _ = $0.confirmed.insert(channel) }
    case "unsubscribe":
        let channel = _string(channel)
        core.channels.withLock { _ = $0.confirmed.remove(channel) }
    default:
        return
    }
}

private func _string(_ reply: UnsafeMutablePointer<redisReply>) -> String {
    guard let str = reply.pointee.str else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: str, count: Int(reply.pointee.len)), as: UTF8.self)
}
