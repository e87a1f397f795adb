// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import CHiredis
    import Foundation

    /// The subscriber connection in history mode (`Options.historyLength > 0`): instead of
    /// `SUBSCRIBE`, it reads each relayed name's stream (`<prefix><name>`, which publishers append to
    /// with `XADD … MAXLEN ~ historyLength`) with `XREAD`, from the id where it stopped, so that a
    /// reconnection delivers what it missed. `cursors` (see `_HistoryCursors`) keeps the positions
    /// across connections; this function only speaks Redis.
    ///
    /// One command is owed at a time, but for the tips: a new connection first asks each channel's
    /// newest id (`XREVRANGE key + - COUNT 1`), then reads all channels with one blocking `XREAD`
    /// (at most `_HistoryReading.count(pending:limit:)` entries per channel, blocking for at most
    /// `_HistoryReading.block(interval)`), again and again; while handlers have half of
    /// `maxPendingPosts` waiting it reads nothing (checking every 10 ms). A name relayed meanwhile is taken up when
    /// the read in flight returns. The read's own answer is the liveness traffic: a connection owed
    /// an answer for two `pingInterval`s is given up; one with nothing to read sends a `PING` after
    /// one interval of silence. An error reply (`NOPERM …`) is a `.permissionDenied` event, and the
    /// refused command is retried after a `pingInterval`.
    func _serveHistory(_ core: _RelayCore, _ connection: _Connection, _ cursors: inout _HistoryCursors) -> String {
        cursors.connectionLost()
        var owed: [_HistoryReading.Owed] = []
        // Lost with a read unanswered: the next connection asks for fewer entries (see `_HistoryReadCap`).
        defer {
            if owed.contains(where: { if case .read = $0 { true } else { false } }) { cursors.readCap.cut() }
        }
        var needsSync = true
        let interval = core.options.pingInterval
        let block = _HistoryReading.block(interval)
        // When an answer became due, or the last one came.
        var lastHeard = ContinuousClock.now
        var refusedUntil: ContinuousClock.Instant?
        // Which window of names the next read covers, when there are more than `maxStreams`.
        var window = 0
        connection.gate = _LengthGate(limit: core.options.maximumMessageBytes)
        while !core.stopping.load(ordering: .acquiring) {
            var now = ContinuousClock.now
            if needsSync {
                needsSync = false
                let wanted = core.channels.withLock { Set($0.bindings.keys) }
                cursors.sync(wanted: wanted)
                _confirm(core, cursors)
            }
            if let until = refusedUntil, now >= until { refusedUntil = nil }
            // Entries asked for per channel: zero while handlers are behind.
            var count = 1
            reading: if owed.isEmpty && refusedUntil == nil && !core.readingPaused.load(ordering: .relaxed) {
                let tips = cursors.tipsNeeded
                if !tips.isEmpty {
                    for channel in tips {
                        connection.append([
                            Array("XREVRANGE".utf8), Array(channel.utf8), [UInt8(ascii: "+")], [UInt8(ascii: "-")],
                            Array("COUNT".utf8), [UInt8(ascii: "1")],
                        ])
                        owed.append(.tip(channel))
                    }
                } else if let all = cursors.readPositions {
                    // More names than one reply may carry: a window of them per read, in turn, each
                    // read waiting only briefly so that the others are not held up.
                    let windows = (all.count + _HistoryReading.maxStreams - 1) / _HistoryReading.maxStreams
                    let first = (window % windows) * _HistoryReading.maxStreams
                    let positions = all[first..<min(all.count, first + _HistoryReading.maxStreams)]
                    let pending = core.deliveries.withLock(\.pending)
                    count = min(
                        cursors.readCap.value,
                        _HistoryReading.count(
                            pending: pending, limit: core.options.maxPendingPosts, streams: positions.count,
                            messageBytes: core.options.maximumMessageBytes))
                    guard count > 0 else { break reading }
                    window += 1
                    var command: [[UInt8]] = [
                        Array("XREAD".utf8), Array("COUNT".utf8), Array("\(count)".utf8),
                        Array("BLOCK".utf8), Array("\(windows > 1 ? 10 : block)".utf8), Array("STREAMS".utf8),
                    ]
                    command += positions.map { Array($0.channel.utf8) }
                    command += positions.map { Array($0.after.description.utf8) }
                    connection.append(command)
                    owed.append(.read(count: count, channels: Set(positions.map(\.channel))))
                }
                if !owed.isEmpty {
                    lastHeard = now
                    if !connection.flush() { return "the connection failed while sending" }
                }
            }
            if core.readingPaused.load(ordering: .relaxed) {
                if _poll(socket: nil, wake: core.subscriberWake, timeoutMilliseconds: 5).wake {
                    core.subscriberWake.drain()
                    needsSync = true
                }
                continue
            }
            if !owed.isEmpty && now - lastHeard >= interval * 2 {
                return "no answer to XREAD for \(interval * 2)"
            }
            if owed.isEmpty && now - lastHeard >= interval {
                connection.append(["PING"])
                owed.append(.ping)
                lastHeard = now
                if !connection.flush() { return "the connection failed while sending" }
            }
            var wait = lastHeard + (owed.isEmpty ? interval : interval * 2) - now
            if let until = refusedUntil { wait = min(wait, until - now) }
            if count == 0 { wait = min(wait, .milliseconds(10)) }
            let ready = _poll(
                socket: connection.socket, wake: core.subscriberWake, timeoutMilliseconds: _milliseconds(wait))
            if ready.wake {
                core.subscriberWake.drain()
                needsSync = true
            }
            guard ready.socket else { continue }
            guard connection.readAvailable() else { return "the server closed the connection" }
            now = ContinuousClock.now
            lastHeard = now
            while true {
                let (reply, ok) = connection.nextReply()
                guard ok else { return "the server's reply is malformed" }
                guard let reply else { break }
                defer { freeReplyObject(reply) }
                guard !owed.isEmpty else { return "the server sent a reply nobody asked for" }
                let what = owed.removeFirst()
                if reply.pointee.type == REDIS_REPLY_ERROR {
                    // NOPERM, or WRONGTYPE for a key that is not a stream: that name waits. A refused
                    // read of a retained key is only reported: the name is read all the same.
                    core.events.emit(.permissionDenied(_text(reply)))
                    if case .stored = what { continue }
                    refusedUntil = now + interval
                    continue
                }
                switch what {
                case .ping: break
                case .tip(let channel):
                    // A name read for the first time: its retained key next, before any XREAD (see
                    // `RetainedOnServer.swift`).
                    let first = cursors.cursors[channel].map { $0.position == nil } ?? false
                    cursors.tip(channel, last: _newestID(reply, connection))
                    if first, let read = core.storedRead(channel) {
                        connection.append(read)
                        owed.append(.stored(channel))
                        if !connection.flush() { return "the connection failed while sending" }
                    }
                    _confirm(core, cursors)
                case .stored(let channel): _acceptStored(core, channel, reply, connection)
                case .read(let count, let channels):
                    guard _read(core, reply, count: count, channels: channels, connection, &cursors) else {
                        return "the server's reply is malformed"
                    }
                    cursors.readCap.answered()
                }
            }
        }
        return "closed"
    }

    /// Handles the reply to the `GETRANGE` of `channel`'s retained key (history mode, on one server
    /// or a cluster node): a null is a value the connection's gate kept out; see `acceptStored`.
    func _acceptStored(
        _ core: _RelayCore, _ channel: String, _ reply: UnsafeMutablePointer<redisReply>, _ connection: _Connection
    ) {
        if reply.pointee.type == REDIS_REPLY_NIL {
            core.acceptStored(channel, nil, oversized: connection.gate?.takeOversized())
        } else if reply.pointee.type == REDIS_REPLY_STRING {
            core.acceptStored(channel, _replyBytes(reply))
        } else {
            _reject(core, "a stored retained post that is not a string")
        }
    }

    /// The constants of history reading, and what a command in flight is.
    enum _HistoryReading {
        /// What the subscriber connection is owed an answer for.
        enum Owed {
            case tip(String)
            /// The `GETRANGE` of a channel's retained key.
            case stored(String)
            /// An `XREAD` of at most `count` entries for each of `channels`.
            case read(count: Int, channels: Set<String>)
            case ping
        }

        /// The most entries an `XREAD` asks for per channel (each entry is a message: up to 64 posts).
        static let maxCount = 256
        /// The most channels one `XREAD` reads (its reply is an array of one element per channel,
        /// within `_LengthGate.maxElements`).
        static let maxStreams = 1000
        /// About the most bytes of messages one `XREAD` reply may hold, counting each entry as
        /// `maximumMessageBytes` (the whole reply is in memory before it is handled).
        static let replyBytes = 64 << 20

        /// How many entries per channel the next `XREAD` of `streams` channels asks for while
        /// `pending` received posts wait for handlers that take at most `limit`
        /// (`Options.maxPendingPosts`): as many as surely fit, counting 64 posts an entry, and within
        /// `replyBytes` counting `messageBytes` an entry; or one when nothing waits, else none (the
        /// history keeps the rest: slow handlers hold reading back instead of making the relay drop
        /// posts).
        static func count(pending: Int, limit: Int, streams: Int = 1, messageBytes: Int = 0) -> Int {
            let streams = max(1, streams)
            let perRound = messageBytes.multipliedReportingOverflow(by: streams)
            let byBytes =
                messageBytes <= 0 ? maxCount : perRound.overflow ? 1 : max(1, replyBytes / perRound.partialValue)
            let perStream = (limit - pending) / (_Wire.batchMaxPosts * streams)
            if perStream >= 1 { return min(maxCount, perStream, byBytes) }
            return pending == 0 ? 1 : 0
        }

        /// How long an `XREAD` waits for new entries, in milliseconds: half a `pingInterval`, at most
        /// 250 ms (a name relayed while it waits is read when it returns).
        static func block(_ interval: Duration) -> Int {
            max(
                1,
                min(
                    250,
                    Int(interval.components.seconds * 500 + interval.components.attoseconds / 2_000_000_000_000_000)))
        }
    }

    /// Marks the channels that know where to read from as confirmed (`waitUntilReady`).
    private func _confirm(_ core: _RelayCore, _ cursors: _HistoryCursors) {
        core.channels.withLock { channels in
            channels.confirmed = Set(channels.bindings.keys.filter { cursors.isReady($0) })
        }
    }

    /// The id of the one entry of an `XREVRANGE … COUNT 1` reply, or `nil` when the history is empty
    /// (or the reply is not what Redis sends). Oversized fields of the entry are taken off the gate.
    func _newestID(_ reply: UnsafeMutablePointer<redisReply>, _ connection: _Connection) -> _StreamID? {
        guard reply.pointee.type == REDIS_REPLY_ARRAY, reply.pointee.elements == 1,
            let entry = reply.pointee.element?[0]
        else { return nil }
        _skipOversized(entry, connection)
        guard entry.pointee.type == REDIS_REPLY_ARRAY, entry.pointee.elements >= 1, let id = entry.pointee.element?[0],
            id.pointee.type == REDIS_REPLY_STRING
        else { return nil }
        return _StreamID(_replyBytes(id))
    }

    /// Takes one announced length off the gate for each null bulk string in `reply`, so that the next
    /// oversized message's length is the right one.
    private func _skipOversized(_ reply: UnsafeMutablePointer<redisReply>, _ connection: _Connection) {
        if reply.pointee.type == REDIS_REPLY_NIL {
            _ = connection.gate?.takeOversized()
        } else if reply.pointee.type == REDIS_REPLY_ARRAY, let elements = reply.pointee.element {
            for index in 0..<reply.pointee.elements {
                if let element = elements[index] { _skipOversized(element, connection) }
            }
        }
    }

    /// Handles an `XREAD` reply: each new entry's message goes through `_accept` (checks, sequence
    /// numbers, delivery), caught-up ones count as recovered. `false` when the reply does not have
    /// the shape Redis gives it.
    func _read(
        _ core: _RelayCore, _ reply: UnsafeMutablePointer<redisReply>, count: Int, channels: Set<String>,
        _ connection: _Connection,
        _ cursors: inout _HistoryCursors
    ) -> Bool {
        var counts: [String: Int] = [:]
        if reply.pointee.type == REDIS_REPLY_ARRAY, let streams = reply.pointee.element {
            for index in 0..<reply.pointee.elements {
                guard let stream = streams[index], stream.pointee.type == REDIS_REPLY_ARRAY,
                    stream.pointee.elements == 2, let parts = stream.pointee.element, let key = parts[0],
                    let entries = parts[1], entries.pointee.type == REDIS_REPLY_ARRAY
                else { return false }
                let channel = String(decoding: _replyBytes(key), as: UTF8.self)
                counts[channel] = entries.pointee.elements
                let inbound = core.channels.withLock { $0.bindings[channel] }
                for entryIndex in 0..<entries.pointee.elements {
                    guard let entry = entries.pointee.element?[entryIndex] else { return false }
                    _entry(core, entry, channel: channel, key: key, inbound: inbound, connection, &cursors)
                }
            }
        } else if reply.pointee.type != REDIS_REPLY_NIL {
            return false
        }
        if let recovered = cursors.readFinished(entries: counts, limit: count, read: channels), recovered > 0 {
            core.recovered.addSaturating(recovered)
            core.events.emit(.recovered(count: recovered))
        }
        return true
    }

    /// One entry `[id, [field, value, …]]` of `channel`'s history: its `m` field is a relay message.
    private func _entry(
        _ core: _RelayCore, _ entry: UnsafeMutablePointer<redisReply>, channel: String,
        key: UnsafeMutablePointer<redisReply>, inbound: _Inbound?, _ connection: _Connection,
        _ cursors: inout _HistoryCursors
    ) {
        guard entry.pointee.type == REDIS_REPLY_ARRAY, entry.pointee.elements == 2, let parts = entry.pointee.element,
            let idReply = parts[0], let fields = parts[1]
        else {
            _skipOversized(entry, connection)
            _reject(core, "a history entry that is not an id and fields")
            return
        }
        let size = _firstOversized(fields, connection)
        guard idReply.pointee.type == REDIS_REPLY_STRING, let id = _StreamID(_replyBytes(idReply)) else {
            _reject(core, "a history entry whose id is malformed")
            return
        }
        // Moves the position even for a name no longer relayed; an old entry is skipped unseen.
        let kind = cursors.entry(channel, id: id)
        guard kind != .old, let inbound else { return }
        if let size {
            _reject(core, "a message of \(size) bytes, over maximumMessageBytes")
            return
        }
        guard let message = _field(fields, named: _HistoryReading.messageField) else {
            _reject(core, "a history entry without a relay message")
            return
        }
        let posts = _accept(core, inbound, _replyBytes(message), channel: _replyBytes(key))
        if kind == .caughtUp { cursors.recovered(posts: posts) }
    }

    extension _HistoryReading {
        /// The field of a history entry that holds the relay message.
        static let messageField: [UInt8] = [UInt8(ascii: "m")]
    }

    /// The most entries per channel a read may ask for, learnt from connections lost while a read
    /// was unanswered: a server whose `client-output-buffer-limit normal` is below one reply throws
    /// the reader out as it answers, and a reader that asked for the same entries again would be
    /// thrown out for ever. Halved at each such loss (down to 1); doubled back (up to
    /// `_HistoryReading.maxCount`) after `regrowAfter` answered reads in a row, so that a loss for
    /// another reason costs a while of smaller replies, never entries. Pure: kept with the cursors
    /// across connections.
    struct _HistoryReadCap: Equatable {
        /// Answered reads in a row after which the cap doubles.
        static let regrowAfter = 1024
        private(set) var value = _HistoryReading.maxCount
        private var answered = 0

        /// A connection was lost while a read was unanswered.
        mutating func cut() {
            value = max(1, value / 2)
            answered = 0
        }

        /// A read was answered.
        mutating func answered(_ count: Int = 1) {
            answered += count
            guard answered >= _HistoryReadCap.regrowAfter else { return }
            answered = 0
            value = min(_HistoryReading.maxCount, value * 2)
        }
    }

    /// The announced length of the first null value among `fields` (a message the gate kept out),
    /// taking every null's length off the gate.
    private func _firstOversized(_ fields: UnsafeMutablePointer<redisReply>, _ connection: _Connection) -> Int? {
        guard fields.pointee.type == REDIS_REPLY_ARRAY, let elements = fields.pointee.element else { return nil }
        var first: Int?
        for index in 0..<fields.pointee.elements where elements[index]?.pointee.type == REDIS_REPLY_NIL {
            let size = connection.gate?.takeOversized()
            if first == nil { first = size }
        }
        return first
    }

    /// The value of the field `name` in a `[field, value, …]` array, when it is a string.
    private func _field(_ fields: UnsafeMutablePointer<redisReply>, named name: [UInt8])
        -> UnsafeMutablePointer<redisReply>?
    {
        guard fields.pointee.type == REDIS_REPLY_ARRAY, let elements = fields.pointee.element else { return nil }
        var index = 0
        while index + 1 < fields.pointee.elements {
            if let field = elements[index], let value = elements[index + 1], value.pointee.type == REDIS_REPLY_STRING,
                _replyBytes(field).elementsEqual(name)
            {
                return value
            }
            index += 2
        }
        return nil
    }

    /// The bytes of a string reply.
    private func _replyBytes(_ reply: UnsafeMutablePointer<redisReply>) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: reply.pointee.str, count: reply.pointee.str == nil ? 0 : Int(reply.pointee.len))
    }

    /// The text of a status or error reply.
    private func _text(_ reply: UnsafeMutablePointer<redisReply>) -> String {
        String(decoding: _replyBytes(reply), as: UTF8.self)
    }
#endif
