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
    _reconnecting(core, first: first, wake: core.subscriberWake) { live in
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
    var cache = _ChannelCache()
    while !core.stopping.load(ordering: .acquiring) {
        if needsSync {
            needsSync = false
            cache = _ChannelCache()  // releases a binding cached before it was unbound
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
                _handle(core, reply, &cache)
                freeReplyObject(reply)
            }
        }
    }
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
private func _handle(_ core: _RelayCore, _ reply: UnsafeMutablePointer<redisReply>, _ cache: inout _ChannelCache) {
    guard reply.pointee.type == REDIS_REPLY_ARRAY, reply.pointee.elements >= 3,
        let elements = reply.pointee.element, let kind = elements[0], let channel = elements[1],
        let third = elements[2]
    else { return }
    if _equal(_bytes(kind), _messageKind) {
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
        case .batch(let batch):
            // All or nothing: one rejected message, and none of its posts made, when any entry is bad.
            let delivered =
                batch.kind == inbound.kind && _ThreadMarker.with(inbound.marker) { inbound.deliverBatch(batch) }
            if !delivered { core.rejected.add(1, ordering: .relaxed) }
        }
        return
    }
    switch _string(kind) {
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
