import Foundation
import Subscriptions

/// Relays chosen names of a ``PostCenter`` to other processes through Redis pub/sub.
///
/// ```swift
/// let relay = try RedisRelay(center: center, host: "127.0.0.1", port: 6379)
/// let chat = relay.relay(.chat)        // a Topic<Message> whose Message is Codable & Sendable
/// let theme = relay.relay("theme")     // a plain name: the flag crosses, the data does not
/// center.post(.chat, Message(text: "hi"))   // also posted on every other relay's center
/// ```
///
/// For each relayed name, local posts are published on the Redis channel `<channelPrefix><name>`,
/// and messages that other relays publish there are posted on `center`. Dropping or cancelling the
/// token that ``relay(_:)-(Topic<Payload>)`` returns stops both directions for that name.
///
/// ## Delivery
/// - **At most once.** Redis pub/sub keeps nothing: a message published while a relay is
///   disconnected, or before its subscription is confirmed (see ``waitUntilReady(timeout:)``),
///   is lost for that relay. Use a queue or a stream where every message matters.
/// - **Order.** Posts of one relay reach another relay in the order they were posted on one thread
///   (one connection each way, and Redis keeps per-connection order).
/// - **No echo.** A relay skips the messages it published itself (an origin id per relay), and
///   never publishes a post that it received from Redis, so processes cannot bounce a message back
///   and forth. A post made *inside* a handler of such a received message, on the same name and
///   on the relay's thread, is local only as well.
///
/// ## Threads
/// The relay runs two threads, each with its own connection. The **publisher** drains a queue
/// that local posts fill (a post encodes its payload on the posting thread, appends it to the
/// queue under a short lock and returns; it never waits for Redis). It pipelines `PUBLISH`
/// commands, up to ``Options/pipelineDepth`` ahead of their replies, and packs consecutive queued
/// posts of one name into one message (up to 64 posts or about 16 KiB), so that under load many
/// posts ride one command; it never waits to fill a message, so a lone post goes out at once. The **subscriber** posts
/// received messages on `center`, one at a time: handlers with ``Delivery/immediate`` run on that
/// thread, so keep them short or give them a queue.
///
/// ## Faults
/// If Redis goes away, local posting keeps working and never blocks or throws. Both threads
/// reconnect with exponential backoff (``Options/reconnectDelay``) and subscribe again. Posts that
/// could not be sent are counted in ``droppedPosts``: those made while disconnected, those queued
/// beyond ``Options/maxQueuedPosts``, and those sent whose reply never came (a few of these may have
/// reached the server). A message on a relayed channel that is not a well-formed post of the
/// expected kind is counted in ``rejectedMessages`` and skipped. A receiving relay whose handlers
/// fall far behind is disconnected by the server (Redis's `client-output-buffer-limit pubsub`,
/// 32 MB by default); it reconnects, and what the server discarded is lost, uncounted.
///
/// ## Lifetime
/// The relay holds `center` strongly; each token it returns holds the relay. The relay runs while
/// you hold it or any of its tokens: when the last of them goes, it sends what is queued (waiting
/// at most ``Options/connectTimeout``), disconnects and joins its threads. All members are safe to
/// use from any thread.
///
/// On Linux, the first relay sets `SIGPIPE` to be ignored when it still has its default
/// disposition, so that a write to a closed connection fails instead of ending the process.
public final class RedisRelay: Sendable {
    /// Tuning for a ``RedisRelay``. A value type; the relay copies it at initialisation.
    public struct Options: Sendable {
        /// How long connecting may take, the time-out of a blocked read or write on a connection,
        /// and how long the publisher waits for a reply it is owed before it gives the connection
        /// up (a frozen server). Two seconds by default.
        public var connectTimeout: Duration = .seconds(2)
        /// The first and the longest wait between reconnection attempts; the wait doubles after
        /// each failure. 20 ms to 1 s by default.
        public var reconnectDelay: ClosedRange<Duration> = .milliseconds(20) ... .seconds(1)
        /// How many `PUBLISH` commands the publisher sends ahead of their replies (a command carries
        /// one post, or up to 64 consecutive queued posts of one name). 128 by default.
        public var pipelineDepth = 128
        /// How many posts may wait for the publisher; more are dropped and counted in
        /// ``RedisRelay/droppedPosts``. 100,000 by default.
        public var maxQueuedPosts = 100_000

        /// The defaults.
        public init() {}
    }

    /// The center whose posts are relayed.
    public let center: PostCenter
    /// The prefix of every channel name, so that several applications can share a server.
    public let channelPrefix: String
    /// A random id that tags every message this relay publishes, so that it skips them when they
    /// come back. Unique per relay, also within one process.
    public let originID: UInt64

    private let core: _RelayCore
    /// The publisher and subscriber threads, to know whether `deinit` runs on one of them.
    /// `nonisolated(unsafe)`: immutable, and only compared by identity.
    nonisolated(unsafe) private let threads: [Thread]
    private let exited = DispatchSemaphore(value: 0)

    /// Connects to the Redis server at `host:port` and starts relaying nothing yet.
    ///
    /// Opens two connections (one to publish, one to subscribe) before it returns.
    ///
    /// - Parameters:
    ///   - center: The center whose posts are relayed; held strongly.
    ///   - host: The server's address, such as `"127.0.0.1"`.
    ///   - port: The server's port, usually 6379.
    ///   - channelPrefix: Put before each relayed name to make its channel. `"subscriptions:"`
    ///     by default.
    ///   - options: Time-outs, backoff, pipelining and queue size.
    /// - Throws: ``RedisRelayError/unreachable(host:port:reason:)`` when either connection fails.
    public init(
        center: PostCenter, host: String, port: Int, channelPrefix: String = "subscriptions:",
        options: Options = Options()
    ) throws(RedisRelayError) {
        guard options.pipelineDepth > 0, options.maxQueuedPosts > 0 else {
            fatalError("RedisRelay: Options.pipelineDepth and Options.maxQueuedPosts must be positive")
        }
        let publishing = try _Connection(host: host, port: port, timeout: options.connectTimeout)
        let subscribing = try _Connection(host: host, port: port, timeout: options.connectTimeout)
        let origin = UInt64.random(in: 1...UInt64.max)
        let core = _RelayCore(host: host, port: port, prefix: channelPrefix, options: options, origin: origin)
        let handoff = _Handoff(publishing, subscribing)
        let exited = self.exited
        self.center = center
        self.channelPrefix = channelPrefix
        self.originID = origin
        self.core = core
        let publisher = Thread {
            _runPublisher(core, first: handoff.takePublisher())
            exited.signal()
        }
        let subscriber = Thread {
            _runSubscriber(core, first: handoff.takeSubscriber())
            exited.signal()
        }
        publisher.name = "SubscriptionsRedis publisher"
        subscriber.name = "SubscriptionsRedis subscriber"
        self.threads = [publisher, subscriber]
        publisher.start()
        subscriber.start()
    }

    /// Sends what is queued (for at most ``Options/connectTimeout``), disconnects and joins both
    /// threads; when it runs on one of them (a handler dropped the last reference), it does not wait.
    deinit {
        core.stopping.store(true, ordering: .releasing)
        core.publisherWake.wake()
        core.subscriberWake.wake()
        let current = Thread.current
        guard !threads.contains(where: { $0 === current }) else { return }
        exited.wait()
        exited.wait()
    }

    // MARK: Relaying

    /// Relays `topic` both ways: local posts of it are published to Redis in a compact
    /// binary encoding of its `Codable` form, and posts
    /// published by other relays on its channel are decoded and posted on ``center``.
    ///
    /// The relay subscribes to `topic` on ``center`` with ``Delivery/immediate`` delivery, so a post
    /// is queued for Redis before `post` returns; it receives typed posts and plain posts whose data
    /// is a `Payload`. Received posts are made on the relay's subscriber thread.
    ///
    /// - Returns: The token; it keeps the relay alive. Cancelling or dropping it stops both
    ///   directions; the channel is unsubscribed. Until the server confirms the subscription, messages from other processes
    ///   may be missed: see ``waitUntilReady(timeout:)``.
    /// - Precondition: the relay does not relay `topic`'s name already (it would publish every post
    ///   twice); the call stops the process with a message naming the topic.
    public func relay<Payload: Codable & Sendable>(_ topic: Topic<Payload>) -> Subscription {
        let inbound = _Inbound(kind: _Wire.typed) { [weak center] body in
            guard let value = try? _Codec.decode(Payload.self, from: body) else { return false }
            center?.post(topic, value)
            return true
        } deliverBatch: { [weak center] batch in
            var values: [Payload] = []
            values.reserveCapacity(batch.count)
            for body in batch {
                guard let value = try? _Codec.decode(Payload.self, from: body) else { return false }
                values.append(value)
            }
            if let center { for value in values { center.post(topic, value) } }
            return true
        }
        let lease = core.bind(topic.name, inbound, owner: self)
        return center.subscribe(topic) { [lease] payload in
            guard !lease.isInbound else { return }
            // One array per post: header, kind and body written straight into it, then queued.
            var message = lease.core.header
            message.reserveCapacity(64)
            message.append(_Wire.typed)
            do {
                try _Codec.encode(payload, into: &message)
            } catch {
                lease.core.dropped.add(1, ordering: .relaxed)
                return
            }
            lease.core.enqueue(channel: lease.channelBytes, message: message)
        }
    }

    /// Relays the plain name `name` both ways: the ``PostObject/flag`` of local posts is published,
    /// and posts from other relays arrive as a ``PostObject`` with that flag and no data (an object
    /// cannot cross processes).
    ///
    /// The relay subscribes to `name` on ``center`` with ``Delivery/immediate`` delivery. Received
    /// posts are made on the relay's subscriber thread.
    ///
    /// - Returns: The token; it keeps the relay alive. Cancelling or dropping it stops both
    ///   directions; the channel is unsubscribed.
    /// - Precondition: the relay does not relay `name` already; the call stops the process with a
    ///   message naming it.
    public func relay(_ name: String) -> Subscription {
        let inbound = _Inbound(kind: _Wire.plain) { [weak center] body in
            guard let flag = String(validating: body, as: UTF8.self) else { return false }
            center?.post(name, flag: flag)
            return true
        } deliverBatch: { [weak center] batch in
            var flags: [String] = []
            flags.reserveCapacity(batch.count)
            for body in batch {
                guard let flag = String(validating: body, as: UTF8.self) else { return false }
                flags.append(flag)
            }
            if let center { for flag in flags { center.post(name, flag: flag) } }
            return true
        }
        let lease = core.bind(name, inbound, owner: self)
        return center.subscribe(name) { [lease] post in
            guard !lease.isInbound else { return }
            lease.send(kind: _Wire.plain, body: post.flag.utf8)
        }
    }

    // MARK: State

    /// How many local posts were not delivered to Redis: made while disconnected, beyond
    /// ``Options/maxQueuedPosts``, sent but unacknowledged when a connection failed, refused by the
    /// server, or whose payload failed to encode. Read from any thread; it only grows.
    public var droppedPosts: Int { core.dropped.load(ordering: .relaxed) }

    /// How many messages on relayed channels were skipped as malformed or foreign (not from a
    /// relay, of the other kind, or failing to decode). Read from any thread; it only grows.
    public var rejectedMessages: Int { core.rejected.load(ordering: .relaxed) }

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

/// The error ``RedisRelay/init(center:host:port:channelPrefix:options:)`` throws.
public enum RedisRelayError: Error, CustomStringConvertible, Sendable {
    /// No Redis server could be reached at `host:port`; `reason` is hiredis's explanation, such as
    /// "Connection refused".
    case unreachable(host: String, port: Int, reason: String)

    /// A sentence naming the address and the reason.
    public var description: String {
        switch self {
        case .unreachable(let host, let port, let reason):
            return "RedisRelay: cannot reach Redis at \(host):\(port): \(reason)"
        }
    }
}

/// Carries the two connections opened by `init` to the threads that own them.
private final class _Handoff: @unchecked Sendable {
    // @unchecked: each connection is read exactly once, by the thread that then owns it; the
    // thread starts after `init` stored both (Thread.start is a happens-before edge).
    private var publishing: _Connection?
    private var subscribing: _Connection?

    init(_ publishing: _Connection, _ subscribing: _Connection) {
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
