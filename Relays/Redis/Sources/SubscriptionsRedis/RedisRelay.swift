// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Foundation
    import Subscriptions

    /// Relays chosen names of a ``PostCenter`` to other processes through Redis pub/sub.
    ///
    /// ```swift
    /// let relay = try RedisRelay(center: center, url: "redis://app:secret@127.0.0.1:6379")
    /// let chat = relay.relay(.chat)        // a Topic<Message> whose Message is Codable & Sendable
    /// let theme = relay.relay("theme")     // a plain name: the flag crosses, the data does not
    /// center.post(.chat, Message(text: "hi"))   // also posted on every other relay's center
    /// Task { for await event in relay.events { print(event) } }
    /// await relay.close()                  // sends what is queued, then stops
    /// ```
    ///
    /// For each relayed name, local posts are published on the Redis channel `<channelPrefix><name>`,
    /// and messages that other relays publish there are posted on `center`. Dropping or cancelling the
    /// token that ``relay(_:fileID:line:)-(Topic<Payload>,_,_)`` returns stops both directions for that name.
    ///
    /// ## Delivery
    /// - **At most once.** Redis pub/sub keeps nothing: a message published while a relay is
    ///   disconnected, or before its subscription is confirmed (see ``waitUntilReady(timeout:)``),
    ///   is lost for that relay. With ``Options/historyLength`` > 0 (history mode) messages go through
    ///   a capped Redis stream per name instead, and a relay that was away reads on from where it
    ///   stopped: what it missed is delivered once, in order (``recoveredPosts``,
    ///   ``Event/recovered(count:)``); only posts older than the history are lost.
    /// - **No silent loss.** Each relay numbers the posts it publishes on each channel; a receiving
    ///   relay that sees a gap in another relay's numbers counts the lost posts in ``missedPosts``
    ///   and sends ``Event/missed(count:)`` (for instance after the server disconnected it for
    ///   falling behind). A loss shows when that relay's next message arrives, or within two
    ///   ``Options/pingInterval``s when it went quiet (it announces its next number on quiet names).
    /// - **Order.** Posts of one relay reach another relay in the order they were posted on one thread,
    ///   also across reconnections: a message that a reconnection overtook is skipped (its posts
    ///   were counted missed). In history mode, within each name only.
    /// - **No echo.** A relay skips the messages it published itself (an origin id per relay), and
    ///   never publishes a post that it received from Redis, so processes cannot bounce a message back
    ///   and forth. A post made *inside* a handler of such a received message, on the same name and
    ///   on the relay's thread, is local only as well.
    /// - **Retained posts.** A post of a relayed name made with `retain: true` is also kept on the
    ///   server (the last one per name, as the key `<prefix>retained:<name>`, in both modes; with
    ///   ``Topology/cluster``, a key in the name's hash slot, `<prefix>retained:{<prefix><name>}`
    ///   for a name without braces): relays that hear it post it retained, and a relay that starts
    ///   later reads it when the name's subscription is confirmed and posts it on its center as
    ///   retained, so `replay: true` subscribers and `retained(_:)` see it. `clearRetained` deletes
    ///   the key and clears the name on the relays that hear it. The last writer wins, per name. See
    ///   the README's "Retained posts".
    ///
    /// ## Threads
    /// The relay runs three threads; the first two have a connection each (in a cluster, one per
    /// primary each; with Sentinel a fourth thread watches a sentinel, see ``Options/topology``). The **publisher** drains a queue
    /// that local posts fill (a post encodes its payload on the posting thread, appends it to the
    /// queue under a short lock and returns; it never waits for Redis). It pipelines `PUBLISH`
    /// commands, up to ``Options/pipelineDepth`` ahead of their replies, and packs consecutive queued
    /// posts of one name into one message (up to 64 posts or about 16 KiB), so that under load many
    /// posts ride one command; it never waits to fill a message, so a lone post goes out at once.
    /// The **subscriber** reads, checks and decodes received messages and queues them for the
    /// **deliverer**, which posts them on `center`, one at a time, in the order they arrived: handlers
    /// with ``Delivery/immediate`` run on that thread. The subscriber never waits for handlers, so a
    /// slow handler never makes the connection look dead: liveness is judged by the server's
    /// answers alone. Between the two sit at most ``Options/maxPendingPosts`` posts; when a slow
    /// handler lets more pile up, the oldest are dropped, counted in ``missedPosts``, and
    /// ``Event/slowConsumer(pending:)`` is sent (at most once a second).
    ///
    /// ## Faults
    /// If Redis goes away, local posting keeps working and never blocks or throws. Both threads
    /// reconnect with exponential backoff and jitter (``Options/reconnectDelay``), authenticate and
    /// subscribe again; ``events`` reports each loss and return. Both connections send a `PING` when
    /// they sent nothing for ``Options/pingInterval``; one that stays silent for two intervals (a
    /// frozen server, a network that drops packets without closing) is closed and re-opened.
    /// Posts that could not be sent are counted in ``droppedPosts``: those made while disconnected,
    /// those beyond ``Options/maxQueuedPosts`` or ``Options/maxQueuedBytes``, those larger than
    /// ``Options/maximumMessageBytes``, and those sent whose reply never came (a few of these may have
    /// reached the server). In history mode (``Options/historyLength``), a lost connection drops
    /// nothing: posts wait in the queue and unanswered ones are sent again (see
    /// ``Options/historyLength``). Once every post was answered, `publishedPosts + droppedPosts` is the
    /// number of posts made. A message on a relayed channel that is larger than `maximumMessageBytes`,
    /// unsigned or wrongly signed when ``Options/signingKey`` is set, or not a well-formed post of the
    /// expected kind is counted in ``rejectedMessages`` and skipped.
    ///
    /// ## Lifetime
    /// The relay holds `center` strongly; each token it returns holds the relay. The relay runs until
    /// ``close()``, or while you hold it or any of its tokens: when the last of them goes, it sends what
    /// is queued (waiting at most ``Options/closeTimeout``), counts the rest dropped, disconnects and
    /// joins its threads. All members are safe to use from any thread.
    ///
    /// On Linux, the first relay sets `SIGPIPE` to be ignored when it still has its default
    /// disposition, so that a write to a closed connection fails instead of ending the process.
    public final class RedisRelay: Sendable {
        /// The center whose posts are relayed.
        public let center: PostCenter
        /// The prefix of every channel name, so that several applications can share a server.
        public let channelPrefix: String
        /// A random id that tags every message this relay publishes, so that it skips them when they
        /// come back. Unique per relay, also within one process.
        public let originID: UInt64

        /// The relay's engine: its queues, counters and connections' state.
        let core: _RelayCore
        /// The publisher, subscriber and delivery threads, to know whether `deinit` runs on one of them.
        /// `nonisolated(unsafe)`: immutable, and only compared by identity.
        nonisolated(unsafe) private let threads: [Thread]
        /// Left by each thread when it exits.
        private let running = DispatchGroup()

        /// Connects to the Redis server of `url` and starts relaying nothing yet.
        ///
        /// `url` is `redis://[user[:password]@]host[:port]` or `rediss://…` for TLS (see
        /// ``Options/tlsCAFile``); user and password may be %-encoded. With a password the relay sends
        /// `AUTH` (with the user: an ACL user) on each connection. Opens two connections (one to
        /// publish, one to subscribe) before it returns.
        ///
        /// - Parameters:
        ///   - center: The center whose posts are relayed; held strongly.
        ///   - url: The server, such as `"redis://127.0.0.1:6379"`.
        ///   - channelPrefix: Put before each relayed name to make its channel. `"subscriptions:"`
        ///     by default.
        ///   - options: Time-outs, limits, TLS and signing.
        /// - Throws: ``RedisRelayError/invalidURL(_:)``, ``RedisRelayError/authenticationFailed(_:)``
        ///   (also sent as an event), ``RedisRelayError/tlsFailed(_:)``,
        ///   ``RedisRelayError/permissionDenied(_:)`` when the server refuses `SUBSCRIBE`,
        ///   `UNSUBSCRIBE` or `PUBLISH` on the relay's channels (later refusals are
        ///   ``Event/permissionDenied(_:)`` events), or
        ///   ``RedisRelayError/unreachable(host:port:reason:)`` unless ``Options/waitsForServer``.
        ///   No error text contains the password.
        public convenience init(
            center: PostCenter, url: String, channelPrefix: String = "subscriptions:", options: Options = Options()
        ) throws(RedisRelayError) {
            try self.init(center: center, endpoint: _Endpoint(url: url), channelPrefix: channelPrefix, options: options)
        }

        /// Connects to the Redis server at `host:port` without TLS or `AUTH`; see
        /// ``init(center:url:channelPrefix:options:)``.
        ///
        /// - Parameters:
        ///   - center: The center whose posts are relayed; held strongly.
        ///   - host: The server's address, such as `"127.0.0.1"`.
        ///   - port: The server's port, usually 6379.
        ///   - channelPrefix: Put before each relayed name to make its channel. `"subscriptions:"`
        ///     by default.
        ///   - options: Time-outs, limits and signing.
        /// - Throws: ``RedisRelayError/unreachable(host:port:reason:)`` when either connection fails
        ///   (unless ``Options/waitsForServer``), ``RedisRelayError/authenticationFailed(_:)`` when the
        ///   server wants a password.
        public convenience init(
            center: PostCenter, host: String, port: Int, channelPrefix: String = "subscriptions:",
            options: Options = Options()
        ) throws(RedisRelayError) {
            try self.init(
                center: center, endpoint: _Endpoint(host: host, port: port), channelPrefix: channelPrefix,
                options: options)
        }

        private init(
            center: PostCenter, endpoint: _Endpoint, channelPrefix: String, options: Options
        ) throws(RedisRelayError) {
            guard options.pipelineDepth > 0, options.maxQueuedPosts > 0, options.maxQueuedBytes > 0,
                options.maxPendingPosts > 0
            else {
                fatalError(
                    "RedisRelay: Options.pipelineDepth, Options.maxQueuedPosts, Options.maxQueuedBytes and "
                        + "Options.maxPendingPosts must be positive")
            }
            guard options.maximumMessageBytes >= 256 else {
                fatalError("RedisRelay: Options.maximumMessageBytes must be at least 256")
            }
            guard options.historyLength >= 0 else {
                fatalError("RedisRelay: Options.historyLength must not be negative")
            }
            guard options.pingInterval > .zero, options.closeTimeout >= .zero else {
                fatalError("RedisRelay: Options.pingInterval must be positive and Options.closeTimeout not negative")
            }
            let tls =
                endpoint.tls
                ? try _TLSContext(
                    caFile: options.tlsCAFile, serverName: options.tlsServerName,
                    certificateFile: options.tlsCertificateFile, keyFile: options.tlsKeyFile) : nil
            var publishing: _Connection?
            var subscribing: _Connection?
            // Sentinel: the primary; cluster: the slot map and the node of the probes below.
            var start = try _TopologyStart(endpoint, topology: options.topology)
            do {
                try start.locate(tls: tls, timeout: options.connectTimeout, prefix: channelPrefix)
                publishing = try _Connection.open(start.endpoint, tls: tls, timeout: options.connectTimeout)
                subscribing = try _Connection.open(start.endpoint, tls: tls, timeout: options.connectTimeout)
            } catch .unreachable(let host, let port, let reason) where options.waitsForServer {
                _ = (host, port, reason)
                publishing = nil
                subscribing = nil
            }
            // The commands the relay needs, tried once on its first connections, so that a refusal
            // (an ACL user without them) throws here instead of losing posts without a word.
            if let publishing, let subscribing, options.historyLength > 0 {
                try _requireHistoryCommands(publishing, subscribing, channelPrefix, endpoint)
            } else if let publishing, let subscribing {
                let channel = Array(channelPrefix.utf8)
                let (subscribe, unsubscribe, publish) = start.commands
                try subscribing.require([Array(subscribe.utf8), channel], start.endpoint)
                try subscribing.require([Array(unsubscribe.utf8), channel], start.endpoint)
                try publishing.require([Array(publish.utf8), channel, []], start.endpoint)
            }
            let origin = UInt64.random(in: 1...UInt64.max)
            let core = _RelayCore(
                endpoint: endpoint, tls: tls, prefix: channelPrefix, options: options, origin: origin,
                connected: publishing != nil)
            start.install(in: core, publishing, subscribing)
            // A cluster's threads open a connection per node themselves.
            let handoff = start.cluster ? _Handoff(nil, nil) : _Handoff(publishing, subscribing)
            let cluster = start.cluster
            let running = self.running
            self.center = center
            self.channelPrefix = channelPrefix
            self.originID = origin
            self.core = core
            running.enter()
            running.enter()
            running.enter()
            let publisher = Thread {
                if cluster { _runClusterPublisher(core) } else { _runPublisher(core, first: handoff.takePublisher()) }
                running.leave()
            }
            let subscriber = Thread {
                if cluster && options.historyLength > 0 {
                    _runClusterHistoryReader(core)
                } else if cluster {
                    _runClusterSubscriber(core)
                } else {
                    _runSubscriber(core, first: handoff.takeSubscriber())
                }
                running.leave()
            }
            let watcher = start.masterName.map { name in
                running.enter()
                let watcher = Thread {
                    _Sentinel.watch(core, masterName: name)
                    running.leave()
                }
                watcher.name = "SubscriptionsRedis sentinel watcher"
                return watcher
            }
            let deliverer = Thread {
                _runDeliverer(core)
                running.leave()
            }
            publisher.name = "SubscriptionsRedis publisher"
            subscriber.name = "SubscriptionsRedis subscriber"
            deliverer.name = "SubscriptionsRedis deliverer"
            self.threads = [publisher, subscriber, deliverer] + (watcher.map { [$0] } ?? [])
            // The stream ends once the threads did, however the relay stopped.
            running.notify(queue: .global()) { core.events.finish() }
            publisher.start()
            subscriber.start()
            deliverer.start()
            watcher?.start()
        }

        /// Sends what is queued (for at most ``Options/closeTimeout``), disconnects and joins both
        /// threads; when it runs on one of them (a handler dropped the last reference), it does not wait.
        deinit {
            _stop(core)
            let current = Thread.current
            guard !threads.contains(where: { $0 === current }) else { return }
            running.wait()
            core.events.finish()
        }

        /// Stops the relay: sends what is queued (for at most ``Options/closeTimeout``, counting the
        /// rest in ``droppedPosts``), disconnects, and returns once its threads ended. Posts made
        /// from then on are counted dropped; nothing is received any more; ``events`` finishes.
        ///
        /// Safe to call from any task or thread, more than once (later calls wait for the same end).
        /// It suspends without blocking a thread of the cooperative pool.
        public func close() async {
            _stop(core)
            let running = self.running
            let core = self.core
            await withCheckedContinuation { (resumed: CheckedContinuation<Void, Never>) in
                running.notify(queue: .global()) {
                    core.events.finish()
                    resumed.resume()
                }
            }
        }

        /// Connection changes, authentication failures, missed posts and rejected messages, as they
        /// happen. One stream per relay, meant for one consumer (an `AsyncStream`): iterate it in one
        /// task. It keeps the newest 1,024 events when nobody reads, and finishes when the relay is
        /// closed or released. The first event is ``Event/connected`` when the initializer connected.
        public var events: AsyncStream<Event> { core.events.stream }

        /// Ends ``events`` now: for tests that must not wait forever for an event.
        func _endEvents() { core.events.finish() }

        /// Stops or resumes the reading of the subscriber connection: for tests of a reader that falls
        /// behind (handlers can no longer hold it up).
        func _pauseReading(_ paused: Bool) { core.readingPaused.store(paused, ordering: .relaxed) }

        // MARK: State

        /// How many local posts were not delivered to Redis: made while disconnected or after
        /// ``close()``, beyond ``Options/maxQueuedPosts`` or ``Options/maxQueuedBytes``, larger than
        /// ``Options/maximumMessageBytes``, sent but unacknowledged when a connection failed or the
        /// close time-out passed, refused by the server, or whose payload failed to encode. Read from
        /// any thread; it only grows.
        public var droppedPosts: Int { core.drops.counts.total }

        /// ``droppedPosts`` by reason (see ``DropCounts``); its fields sum to `droppedPosts` read at
        /// the same moment. Read from any thread; each field only grows.
        public var dropCounts: DropCounts { core.drops.counts }

        /// How many messages on relayed channels were skipped as malformed or foreign (not from a
        /// relay, of the other kind, or failing to decode), larger than
        /// ``Options/maximumMessageBytes``, or, with a ``Options/signingKey``, unsigned or wrongly
        /// signed. Each such message counts once. In a cluster, also each report of a retained post
        /// not kept on the server (see ``Event/rejected(reason:)``). Read from any thread; it only
        /// grows.
        public var rejectedMessages: Int { core.rejected.load(ordering: .relaxed) }

        /// How many posts of other relays were lost on their way to this one, as gaps in their
        /// sequence numbers showed (each post counts once, whatever carried it), plus the received
        /// posts dropped because more than ``Options/maxPendingPosts`` waited for slow handlers, or
        /// still waited when the relay stopped. Read from any thread; it only grows, and stops at
        /// `Int.max` (a forged sequence number can claim any gap).
        public var missedPosts: Int { core.missed.load(ordering: .relaxed) }

        /// How many local posts Redis acknowledged. Read from any thread; it only grows.
        public var publishedPosts: Int { core.published.load(ordering: .relaxed) }

        /// Waits until the publisher is connected and the server confirmed the subscription of every
        /// relayed name, so that messages from other processes reach this relay from now on.
        ///
        /// Blocks the calling thread (it checks every millisecond); call it at start-up or in tests, not
        /// on the main thread of an app.
        ///
        /// - Returns: `true` when ready, `false` when `timeout` passed first.
        public func waitUntilReady(timeout: Duration) -> Bool {
            let deadline = ContinuousClock.now + timeout
            while !core.isReady {
                if ContinuousClock.now >= deadline { return false }
                Thread.sleep(forTimeInterval: 0.001)
            }
            return true
        }
    }

    /// Asks the threads of `core` to stop.
    private func _stop(_ core: _RelayCore) {
        core.stopping.store(true, ordering: .releasing)
        core.publisherWake.wake()
        core.subscriberWake.wake()
        core.topology.wake.wake()
        core.deliveryWake.signal()
    }

    /// Carries the two connections opened by `init` to the threads that own them.
    private final class _Handoff: @unchecked Sendable {
        // @unchecked: each connection is read exactly once, by the thread that then owns it; the
        // thread starts after `init` stored both (Thread.start is a happens-before edge).
        private var publishing: _Connection?
        private var subscribing: _Connection?

        init(_ publishing: _Connection?, _ subscribing: _Connection?) {
            self.publishing = publishing
            self.subscribing = subscribing
        }

        func takePublisher() -> _Connection? {
            defer { publishing = nil }
            return publishing
        }

        func takeSubscriber() -> _Connection? {
            defer { subscribing = nil }
            return subscribing
        }
    }
#endif
