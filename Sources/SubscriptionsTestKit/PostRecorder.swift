import Foundation
import Subscriptions
import Testing

/// Records the posts of one topic or name, for tests of code that posts.
///
/// ```swift
/// import SubscriptionsTestKit
///
/// @Test func chargingPostsTheNewLevel() async throws {
///     let center = PostCenter()
///     let recorder = PostRecorder(.battery, in: center)   // records from now on
///     let model = Battery(center: center)
///     model.charge()
///     try await recorder.waitForCount(2, timeout: .seconds(1))
///     #expect(recorder.payloads == [80, 81])
/// }
/// ```
///
/// - Threading: `Sendable`; every member may be used from any thread or task at any time. A post
///   is recorded on the posting thread, before `post` returns, so posts of one thread are
///   recorded in post order. `Payload` must be `Sendable` because the payloads recorded on the
///   posting threads are read by the test on its own task.
/// - Lifetime: the recorder owns its subscription. ``cancel()`` or dropping the last reference
///   to the recorder unsubscribes; payloads recorded so far stay readable while it lives.
///   Payloads are kept strongly (a ``PostObject`` envelope still holds its data weakly).
public final class PostRecorder<Payload: Sendable>: Sendable {
    private let storage: _RecorderStorage<Payload>
    private let token: Subscription

    /// Records every post of `topic` in `center` from now on.
    ///
    /// - Parameters:
    ///   - topic: The topic to record.
    ///   - center: The center whose posts are recorded.
    ///   - fileID: The file of the call site, filled in by the compiler; named by timeout errors.
    ///   - line: The line of the call site, filled in by the compiler; named by timeout errors.
    public init(_ topic: Topic<Payload>, in center: PostCenter, fileID: String = #fileID, line: Int = #line) {
        let storage = _RecorderStorage<Payload>(source: "topic \"\(topic.name)\"", site: "\(fileID):\(line)")
        self.storage = storage
        self.token = center.subscribe(topic) { payload in storage.record(payload) }
    }

    /// Records every post of `name` in `center` from now on, as ``PostObject`` envelopes.
    ///
    /// - Parameters:
    ///   - name: The name to record.
    ///   - center: The center whose posts are recorded.
    ///   - fileID: The file of the call site, filled in by the compiler; named by timeout errors.
    ///   - line: The line of the call site, filled in by the compiler; named by timeout errors.
    public init(_ name: String, in center: PostCenter, fileID: String = #fileID, line: Int = #line)
    where Payload == PostObject {
        let storage = _RecorderStorage<PostObject>(source: "name \"\(name)\"", site: "\(fileID):\(line)")
        self.storage = storage
        self.token = center.subscribe(name) { post in storage.record(post) }
    }

    /// The payloads recorded so far, in the order they were recorded.
    public var payloads: [Payload] {
        storage.payloads
    }

    /// How many posts were recorded so far.
    public var count: Int {
        storage.count
    }

    /// Stops recording: later posts are not recorded. What was recorded stays readable.
    ///
    /// A ``waitForCount(_:timeout:sourceLocation:)`` still waiting can then only time out. Idempotent; waits
    /// like ``Subscription/cancel()`` (the recording handler is short).
    public func cancel() {
        token.cancel()
    }

    /// Waits until at least `count` posts were recorded; when they do not arrive within
    /// `timeout`, fails the test at the call.
    ///
    /// Returns at once when `count` posts were already recorded; otherwise it resumes as soon as
    /// the post that makes `count` is recorded (no polling). Throws `CancellationError` when the
    /// waiting task is cancelled. Several tasks may wait at once, for different counts.
    ///
    /// On a timeout inside a Swift Testing test, it records one issue at `sourceLocation` (the
    /// line that called `waitForCount`), whose comment is the ``PostRecorderTimeout``
    /// description: the topic or name, the recorder's call site, the count wanted and the
    /// payloads that did arrive. It then throws as a failed `#require` does, so the test stops
    /// there and the issue is reported once. Outside a Swift Testing test (XCTest, a plain
    /// program) it throws the ``PostRecorderTimeout`` instead.
    ///
    /// ```swift
    /// try await recorder.waitForCount(2)   // times out: the issue points at this line and reads
    /// // PostRecorder of topic "battery" (…): waited 1.0 seconds for 2 posts, received 1: [80]
    /// ```
    ///
    /// - Parameters:
    ///   - count: The number of recorded posts to wait for.
    ///   - timeout: How long to wait at most; one second by default.
    ///   - sourceLocation: Where a timeout is reported; leave the default (the call).
    /// - Throws: In a Swift Testing test, the error of a failed `#require` (its issue is
    ///   already recorded); elsewhere ``PostRecorderTimeout``. `CancellationError` when the
    ///   waiting task is cancelled.
    public func waitForCount(
        _ count: Int, timeout: Duration = .seconds(1), sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let storage = self.storage
        let id = storage.newWaiterID()
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    guard storage.wait(id, for: count, continuation) else { return }
                    let timer = Task {
                        try await Task.sleep(for: timeout)
                        storage.timeOut(id, after: timeout)
                    }
                    if !storage.attach(timer, to: id) { timer.cancel() }
                    if Task.isCancelled { storage.fail(id, with: CancellationError()) }
                }
            } onCancel: {
                storage.fail(id, with: CancellationError())
            }
        } catch let timeout as PostRecorderTimeout {
            guard Test.current != nil else { throw timeout }
            // A failed #require records the issue at `sourceLocation` and throws the error that
            // Swift Testing knows is already recorded, so the test reports it once, here.
            let postsArrivedInTime = false
            try #require(postsArrivedInTime, Comment(rawValue: timeout.description), sourceLocation: sourceLocation)
        }
        withExtendedLifetime(self) {}
    }
}

/// Why ``PostRecorder/waitForCount(_:timeout:sourceLocation:)`` gave up: the posts did not
/// arrive in time. Thrown outside a Swift Testing test; inside one, its description is the
/// comment of the issue recorded at the call.
///
/// Its description reads, for example:
/// `PostRecorder of topic "battery" (Tests/BatteryTests.swift:12): waited 1.0 seconds for 2 posts, received 1: [80]`.
public struct PostRecorderTimeout: Error, CustomStringConvertible, Sendable {
    /// What the recorder records: `topic "battery"` or `name "login"`.
    public let source: String
    /// Where the recorder was made, as `file:line`.
    public let site: String
    /// The count that was waited for.
    public let wanted: Int
    /// How many posts were recorded when the wait gave up.
    public let received: Int
    /// How long the wait lasted.
    public let timeout: Duration
    /// The first ``listedPayloads`` payloads recorded when the wait gave up, in the order they
    /// were recorded, each as `String(describing:)` writes it.
    public let arrived: [String]

    /// Creates the error; ``PostRecorder/waitForCount(_:timeout:sourceLocation:)`` makes it
    /// for you.
    public init(source: String, site: String, wanted: Int, received: Int, timeout: Duration, arrived: [String] = []) {
        self.source = source
        self.site = site
        self.wanted = wanted
        self.received = received
        self.timeout = timeout
        self.arrived = arrived
    }

    /// Names the topic or name, the recorder's call site, the count wanted, the count received
    /// and the payloads that arrived (the first ``listedPayloads`` of them, then how many more).
    public var description: String {
        let listed = arrived.prefix(Self.listedPayloads).joined(separator: ", ")
        let more =
            received > min(arrived.count, Self.listedPayloads)
            ? ", … \(received - min(arrived.count, Self.listedPayloads)) more" : ""
        return "PostRecorder of \(source) (\(site)): waited \(timeout) for \(wanted) post\(wanted == 1 ? "" : "s"), "
            + "received \(received): [\(listed)\(more)]"
    }

    /// How many of the payloads that arrived the description lists: 20.
    public static let listedPayloads = 20
}

/// The recorder's state, shared with its subscription's handler (which must not capture the
/// recorder itself: the recorder owns the token, so that would be a cycle).
final class _RecorderStorage<Payload: Sendable>: @unchecked Sendable {
    // @unchecked: every `var` is only touched while holding `lock`. `NSLock` rather than
    // `Synchronization.Mutex`: on Linux, ThreadSanitizer sees glibc's mutex but not `Mutex`, and
    // tests using the kit run under ThreadSanitizer too.

    struct Waiter {
        var count: Int
        var continuation: CheckedContinuation<Void, any Error>
        var timer: Task<Void, any Error>?
    }

    let source: String
    let site: String
    private let lock = NSLock()
    private var records: [Payload] = []
    private var waiters: [Int: Waiter] = [:]
    private var nextID = 0

    init(source: String, site: String) {
        self.source = source
        self.site = site
    }

    var payloads: [Payload] { lock.withLock { records } }
    var count: Int { lock.withLock { records.count } }

    func newWaiterID() -> Int {
        lock.withLock {
            nextID += 1
            return nextID
        }
    }

    /// Appends `payload` and resumes the waiters it satisfies, after unlocking.
    func record(_ payload: Payload) {
        let ready = lock.withLock { () -> [Waiter] in
            records.append(payload)
            guard !waiters.isEmpty else { return [] }
            let n = records.count
            let done = waiters.filter { $0.value.count <= n }
            for id in done.keys { waiters[id] = nil }
            return Array(done.values)
        }
        for waiter in ready {
            waiter.timer?.cancel()
            waiter.continuation.resume()
        }
    }

    /// Registers a waiter; returns `false` after resuming it at once when `count` is reached.
    func wait(_ id: Int, for count: Int, _ continuation: CheckedContinuation<Void, any Error>) -> Bool {
        let reached = lock.withLock { () -> Bool in
            if records.count >= count { return true }
            waiters[id] = Waiter(count: count, continuation: continuation, timer: nil)
            return false
        }
        if reached { continuation.resume() }
        return !reached
    }

    /// Gives the waiter its timer; `false` when it was resumed meanwhile.
    func attach(_ timer: Task<Void, any Error>, to id: Int) -> Bool {
        lock.withLock {
            guard waiters[id] != nil else { return false }
            waiters[id]?.timer = timer
            return true
        }
    }

    /// Resumes the waiter `id`, if still waiting, with a ``PostRecorderTimeout``.
    func timeOut(_ id: Int, after timeout: Duration) {
        let (waiter, arrived) = lock.withLock { (waiters.removeValue(forKey: id), records) }
        guard let waiter else { return }
        waiter.continuation.resume(
            throwing: PostRecorderTimeout(
                source: source, site: site, wanted: waiter.count, received: arrived.count, timeout: timeout,
                arrived: arrived.prefix(PostRecorderTimeout.listedPayloads).map { String(describing: $0) }))
    }

    /// Resumes the waiter `id`, if still waiting, with `error`.
    func fail(_ id: Int, with error: any Error) {
        let waiter = lock.withLock { waiters.removeValue(forKey: id) }
        waiter?.timer?.cancel()
        waiter?.continuation.resume(throwing: error)
    }
}
