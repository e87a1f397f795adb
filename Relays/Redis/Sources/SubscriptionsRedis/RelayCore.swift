// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Dispatch
    import Subscriptions
    import Synchronization

    /// The state shared by a ``RedisRelay``, its two threads and the leases its tokens hold.
    ///
    /// `Sendable` through its members: counters are atomics, everything mutable sits in a `Mutex`.
    /// The hiredis connections are not here: each belongs to its thread (see `Publisher.swift` and
    /// `Subscriber.swift`).
    final class _RelayCore: Sendable {
        let endpoint: _Endpoint
        let tls: _TLSContext?
        let signer: _Signer?
        let prefix: String
        let options: RedisRelay.Options
        /// The header of every message this relay publishes (magic, origin id and a zero sequence
        /// number); see `_Wire`.
        let header: [UInt8]
        let events = _Events()
        /// Sentinel's primary, a cluster's slot map, and the epoch that outdates connections.
        let topology = _TopologyState()

        /// Local posts not delivered to Redis, by reason.
        let drops = _DropCounters()
        let rejected = Atomic<Int>(0)
        let published = Atomic<Int>(0)
        let missed = Atomic<Int>(0)
        /// Posts caught up from history after a reconnection (`RedisRelay.recoveredPosts`).
        let recovered = Atomic<Int>(0)
        let stopping = Atomic<Bool>(false)
        /// For tests: while `true`, the subscriber thread does not read its socket (a reader that
        /// falls behind, as a starved process's would, so that the server throws it out).
        let readingPaused = Atomic<Bool>(false)
        let publisherConnected = Atomic<Bool>(false)

        /// Posts waiting for the publisher thread.
        let outbox: Mutex<_Outbox>
        /// The relayed channels, and what the subscriber connection confirmed.
        let channels = Mutex(_Channels())
        let publisherWake = _WakePipe()
        let subscriberWake = _WakePipe()
        /// Received posts waiting for the delivery thread, and its wake-up.
        let deliveries: Mutex<_Deliveries>
        let deliveryWake = DispatchSemaphore(value: 0)

        init(
            endpoint: _Endpoint, tls: _TLSContext?, prefix: String, options: RedisRelay.Options, origin: UInt64,
            connected: Bool
        ) {
            self.endpoint = endpoint
            self.tls = tls
            self.signer = options.signingKey.map(_Signer.init(key:))
            self.prefix = prefix
            self.options = options
            self.header = _Wire.header(origin: origin, signed: options.signingKey != nil)
            var outbox = _Outbox(connected: connected)
            outbox.keepsWhileDisconnected = options.historyLength > 0
            self.outbox = Mutex(outbox)
            self.deliveries = Mutex(_Deliveries(limit: options.maxPendingPosts))
        }

        /// A new connection to the relay's server (with Sentinel: to the current primary), or `nil`;
        /// an authentication or TLS failure is reported as an event.
        func connect() -> _Connection? {
            if case .sentinel(let name) = options.topology { return _Sentinel.connect(self, masterName: name) }
            return connect(to: endpoint)
        }

        /// A new connection to `endpoint`, or `nil`; see `connect()`.
        func connect(to endpoint: _Endpoint) -> _Connection? {
            do {
                return try _Connection.open(endpoint, tls: tls, timeout: options.connectTimeout)
            } catch .authenticationFailed(let text) {
                events.emit(.authenticationFailed(text))
            } catch .tlsFailed(let text) {
                events.emit(.disconnected(reason: text))
            } catch {}
            return nil
        }

        /// The largest message this relay sends or accepts, signature included.
        var maximumMessageBytes: Int { options.maximumMessageBytes }

        deinit {
            publisherWake.close()
            subscriberWake.close()
        }

        // MARK: Outbound

        /// Queues one message for the publisher thread, or counts it dropped when the publisher is
        /// disconnected or the queue is full. Never blocks beyond a short lock; never throws.
        func enqueue(channel: [UInt8], kind: UInt8, body: some Collection<UInt8>) {
            enqueue(channel: channel, message: _Wire.message(header: header, kind: kind, body: body))
        }

        /// Queues one whole message (header, kind, body) for the publisher thread; see the other
        /// `enqueue`.
        func enqueue(channel: [UInt8], message: [UInt8]) {
            let limit = options.maxQueuedPosts
            let byteLimit = options.maxQueuedBytes
            guard message.count + (signer == nil ? 0 : _Wire.signatureLength) <= options.maximumMessageBytes else {
                drops.tooLarge.add(1, ordering: .relaxed)
                return
            }
            let outcome = outbox.withLock { outbox -> (queued: Bool, wake: Bool, full: Bool) in
                guard outbox.accepts else { return (false, false, false) }
                guard outbox.count < limit, outbox.bytes + message.count <= byteLimit else {
                    return (false, false, true)
                }
                outbox.bytes += message.count
                outbox.items.append(_Outgoing(channel: channel, message: message))
                let wake = outbox.writerWaiting
                outbox.writerWaiting = false
                return (true, wake, false)
            }
            if outcome.full {
                drops.queueFull.add(1, ordering: .relaxed)
            } else if !outcome.queued {
                drops.disconnected.add(1, ordering: .relaxed)
            }
            if outcome.wake { publisherWake.wake() }
        }

        // MARK: Inbound

        /// Records `inbound` for `name`'s channel and asks the subscriber thread to subscribe.
        func bind(_ name: String, _ inbound: _Inbound, owner: RedisRelay) -> _Lease {
            let channel = prefix + name
            let taken = channels.withLock { channels -> Bool in
                if channels.bindings[channel] != nil { return true }
                channels.bindings[channel] = inbound
                channels.generation += 1
                return false
            }
            if taken {
                fatalError(
                    "RedisRelay.relay(\"\(name)\"): this relay already relays \"\(name)\"; keep the first token "
                        + "(relaying a name twice would publish every post twice)")
            }
            subscriberWake.wake()
            return _Lease(core: self, channel: channel, name: name, inbound: inbound, owner: owner)
        }

        /// Forgets `inbound` (if it is still the binding of `channel`) and asks the subscriber thread
        /// to unsubscribe. The binding is released after unlocking.
        func unbind(_ channel: String, _ inbound: _Inbound) {
            let removed = channels.withLock { channels -> _Inbound? in
                guard channels.bindings[channel] === inbound else { return nil }
                inbound.isBound.store(false, ordering: .releasing)
                channels.generation += 1
                return channels.bindings.removeValue(forKey: channel)
            }
            if removed != nil { subscriberWake.wake() }
        }

        /// Whether the publisher is connected and every relayed channel's subscription is confirmed.
        var isReady: Bool {
            publisherConnected.load(ordering: .acquiring)
                && channels.withLock { channels in
                    channels.connected && channels.bindings.keys.allSatisfy { channels.confirmed.contains($0) }
                }
        }
    }

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

    /// The relayed channels (full names, prefix included) and the subscriber connection's state.
    struct _Channels: Sendable {
        var bindings: [String: _Inbound] = [:]
        /// Changes whenever `bindings` does: the subscriber thread's cached lookup is valid while it
        /// holds the generation it was made in.
        var generation = 0
        var connected = false
        /// Channels whose `SUBSCRIBE` the current connection confirmed.
        var confirmed: Set<String> = []
    }

    /// How messages of one relayed channel are posted on the center: made by `RedisRelay.relay`.
    /// The subscriber thread decodes; the delivery thread calls what decoding returned.
    final class _Inbound: Sendable {
        /// `_Wire.typed` or `_Wire.plain`: a message of the other kind is rejected.
        let kind: UInt8
        /// Decodes the body; returns what posts it (retained when the second argument is `true`), or
        /// `nil` when the body is malformed.
        let decode: @Sendable (UnsafeRawBufferPointer, Bool) -> (@Sendable () -> Void)?
        /// Decodes every body of a batch; only when all of them decode, returns what posts them in
        /// order, else `nil` (and nothing will be posted).
        let decodeBatch: @Sendable (_Wire.Batch) -> (@Sendable () -> Void)?
        /// Clears the name's retained post on the center (a clear received, kind `c`).
        let clear: @Sendable () -> Void
        /// `false` once the binding was removed: its messages still waiting are not posted.
        let isBound = Atomic<Bool>(true)

        init(
            kind: UInt8, decode: @escaping @Sendable (UnsafeRawBufferPointer, Bool) -> (@Sendable () -> Void)?,
            decodeBatch: @escaping @Sendable (_Wire.Batch) -> (@Sendable () -> Void)?,
            clear: @escaping @Sendable () -> Void = {}
        ) {
            self.kind = kind
            self.clear = clear
            self.decode = decode
            self.decodeBatch = decodeBatch
        }

        /// The next sequence number expected from each origin heard on this channel (see `_Wire`).
        /// Used by the subscriber thread only; kept while the binding lives, across reconnections,
        /// so that posts lost while disconnected show as a gap.
        let sequences = Mutex(_OriginSequences())

        /// This binding's identity, set as the thread marker while it posts on the center.
        var marker: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

        /// The thread marker while a local retained post of this name is delivered (see
        /// `_Lease.watcher`): one byte past `marker`, an address no object starts at (objects are
        /// aligned), unique while this binding lives.
        var retainedMarker: UnsafeMutableRawPointer { marker + 1 }
    }

    /// A relay token's registration: the center subscription of the local direction and the lease
    /// of the channel. Cancelling or dropping the token unbinds the channel at once (so the name
    /// can be relayed again right away and nothing more arrives from Redis), then cancels the
    /// subscription (a drop releases it with the token, which never waits, as every drop).
    final class _RelayRegistration: _ExternalRegistration, @unchecked Sendable {
        // @unchecked: both properties are immutable and Sendable-safe (`Subscription` is
        // thread-safe; `_Lease` is Sendable).
        private let subscription: Subscription
        private let lease: _Lease
        private let name: String

        private init(subscription: Subscription, lease: _Lease, name: String) {
            self.subscription = subscription
            self.lease = lease
            self.name = name
        }

        /// The token of a relayed name: `subscribe` makes the local subscription.
        static func token(_ lease: _Lease, name: String, _ subscribe: () -> Subscription) -> Subscription {
            Subscription(_external: _RelayRegistration(subscription: subscribe(), lease: lease, name: name))
        }

        func cancel(waiting: Bool) {
            lease.end()
            if waiting { subscription.cancel() }
            // Not waiting (a token's deinit): `subscription` goes with this registration, right
            // after, and its own deinit cancels without waiting.
        }

        func setPaused(_ paused: Bool) {
            if paused { subscription.pause() } else { subscription.resume() }
        }

        var isActive: Bool { subscription.isActive }
        var debugName: String { "relay \(name)" }
    }

    /// What the relay's local handler for a name holds: when the center releases the handler (the
    /// token was cancelled or dropped), the lease deinitialises and unbinds the channel, which stops
    /// the inbound direction too. It also keeps the relay (and so its threads) alive while the token
    /// lives.
    final class _Lease: Sendable {
        let core: _RelayCore
        let channel: String
        let channelBytes: [UInt8]
        let inbound: _Inbound
        /// The relay, kept alive while this token lives.
        let owner: RedisRelay
        /// The relayed name.
        let name: String
        /// Told by the center of each retained post and clear of `name` (see `RetainedOnServer.swift`);
        /// it holds neither this lease nor the relay, so the center does not keep them alive.
        let watcher: _RetainedWatcher

        init(core: _RelayCore, channel: String, name: String, inbound: _Inbound, owner: RedisRelay) {
            self.core = core
            self.channel = channel
            self.channelBytes = Array(channel.utf8)
            self.inbound = inbound
            self.owner = owner
            self.name = name
            self.watcher = _RetainedOnServer.watcher(core, inbound, channel: channelBytes)
            owner.center._watchRetained(name, watcher)
        }

        deinit {
            core.unbind(channel, inbound)
            owner.center._unwatchRetained(name, watcher)
        }

        /// Unbinds the channel now (idempotent: `unbind` removes only this lease's own binding).
        func end() {
            core.unbind(channel, inbound)
            owner.center._unwatchRetained(name, watcher)
        }

        /// Whether the current post is this channel's own inbound message, being posted by the
        /// subscriber thread: publishing it would echo it back to Redis.
        var isInbound: Bool { _ThreadMarker.current == inbound.marker }

        /// The kind of the message for the current local post of the name: `kind` (`t` or `p`),
        /// its retained form (`T` or `P`) while the center delivers a retained post of the name, or
        /// `nil` for an inbound post (not to be published). One read of the thread marker.
        @inline(__always)
        func outboundKind(_ kind: UInt8) -> UInt8? {
            let marker = _ThreadMarker.current
            if marker == nil { return kind }
            if marker == inbound.marker { return nil }
            return marker == inbound.retainedMarker ? kind & ~0x20 : kind
        }

        func send(kind: UInt8, body: some Collection<UInt8>) {
            core.enqueue(channel: channelBytes, kind: kind, body: body)
        }
    }
#endif
