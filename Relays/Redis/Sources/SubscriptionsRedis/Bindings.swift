// The bindings of relayed names: `_Channels` (the relayed channels and what the subscriber
// connection confirmed), `_Inbound` (how one channel's messages are posted on the center), and
// what a relay token holds, `_RelayRegistration` and its `_Lease`.
// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Subscriptions
    import Synchronization

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
