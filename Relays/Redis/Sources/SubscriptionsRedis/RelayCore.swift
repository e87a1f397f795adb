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
                // With Sentinel or a cluster, the reason names the node (see `Event.disconnected`).
                let node = options.topology == .standalone ? "" : "\(endpoint.address): "
                events.emit(.disconnected(reason: node + text))
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
#endif
