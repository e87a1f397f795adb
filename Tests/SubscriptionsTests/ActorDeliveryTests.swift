import Dispatch
import Foundation
import Subscriptions
import SubscriptionsTestSupport
import Synchronization
import Testing

/// A serial executor on a dispatch queue, for actors whose jobs a test holds back (by suspending
/// the queue) or blocks on without tying up a thread of Swift's cooperative pool. Counts the jobs
/// it was given.
final class QueueExecutor: SerialExecutor {
    let queue: DispatchQueue
    private let jobs = Atomic<Int>(0)

    init(_ label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        jobs.add(1, ordering: .relaxed)
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// How many jobs were enqueued so far.
    var enqueued: Int { jobs.load(ordering: .relaxed) }
}

/// An actor on the default executor that keeps what its handler received.
private actor Inbox<Value: Sendable> {
    var values: [Value] = []
    let live: LiveObjects?
    private let reached: AsyncStream<Int>.Continuation?

    /// `reached` hears the count of received values after each append.
    init(live: LiveObjects? = nil, reached: AsyncStream<Int>.Continuation? = nil) {
        self.live = live
        self.reached = reached
        live?.enter()
    }

    deinit {
        live?.leave()
    }

    func receive(_ value: Value) {
        values.append(value)
        reached?.yield(values.count)
    }
}

/// The same on a `QueueExecutor`.
private actor GatedInbox<Value: Sendable> {
    let executor: QueueExecutor
    var values: [Value] = []
    private let reached: AsyncStream<Int>.Continuation?

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(_ label: String, reached: AsyncStream<Int>.Continuation? = nil) {
        executor = QueueExecutor(label)
        self.reached = reached
    }

    func receive(_ value: Value) {
        values.append(value)
        reached?.yield(values.count)
    }
}

/// A stream of counts, and a way to wait until one of them reaches `n` (bounded by the test's
/// time limit, never by a timing assertion).
private struct Progress {
    let stream: AsyncStream<Int>
    let continuation: AsyncStream<Int>.Continuation

    init() {
        (stream, continuation) = AsyncStream<Int>.makeStream()
    }

    func wait(for n: Int) async {
        for await count in stream where count >= n { return }
    }
}

/// Runs `body` on a thread of its own and resumes when it returned, so a test can block in
/// `body` (waiting for a handler, or cancelling one) without blocking Swift's cooperative pool.
private func onThread(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        _ = TestThread {
            body()
            done.resume()
        }
    }
}

/// An actor that owns the token of its own subscription.
private actor Owner {
    var token: Subscription?
    var received: [Int] = []
    private let gone: AsyncStream<Void>.Continuation

    init(gone: AsyncStream<Void>.Continuation) {
        self.gone = gone
    }

    deinit {
        gone.yield()
    }

    func start(_ center: PostCenter, _ topic: Topic<Int>) {
        token = center.subscribe(topic, on: self) { owner, value in owner.received.append(value) }
    }

    /// Subscribes a handler that drops the actor's own token on the first post.
    func startDroppingTokenInHandler(
        _ center: PostCenter, _ topic: Topic<Int>, _ entered: DispatchSemaphore, _ done: DispatchSemaphore
    ) {
        token = center.subscribe(topic, on: self) { owner, value in
            owner.received.append(value)
            entered.signal()
            owner.token = nil  // deinit cancels from inside the handler: must return at once
            done.signal()
        }
    }
}

/// A global actor for the tests below, with state on its shared instance.
@globalActor private actor Sensors {
    static let shared = Sensors()
    var readings: [Int] = []

    /// Runs `operation`, isolated to the global actor, from code already running on it (a
    /// handler subscribed `on: Sensors.shared`); stops the process anywhere else. The same
    /// helper as in the article "Delivery on an actor".
    static func assumeIsolated<T: Sendable>(_ operation: @Sensors () throws -> T) rethrows -> T {
        Sensors.preconditionIsolated("not on the Sensors global actor")
        return try withoutActuallyEscaping(operation) { operation in
            try unsafeBitCast(operation, to: (() throws -> T).self)()
        }
    }
}

/// State isolated to the global actor, declared outside it.
@Sensors private final class SensorLog {
    static let shared = SensorLog()
    var lines: [String] = []
}

@Suite("Actor delivery", .timeLimit(.minutes(1)))
struct ActorDeliveryTests {
    // MARK: Order and isolation

    @Test func postsFromOneThreadReachTheActorInPostOrder() async {
        let center = PostCenter()
        let topic = Topic<Int>("reading")
        let progress = Progress()
        let inbox = Inbox<Int>(reached: progress.continuation)
        let token = center.subscribe(topic, on: inbox) { inbox, value in
            inbox.assertIsolated()
            inbox.receive(value)
        }
        let returned = await Task.detached {
            (0..<2_000).map { center.post(topic, $0) }
        }.value
        #expect(returned == Array(repeating: 1, count: 2_000))
        await progress.wait(for: 2_000)
        #expect(await inbox.values == Array(0..<2_000))
        withExtendedLifetime(token) {}
    }

    @Test(arguments: 0..<3)
    func postsFromSeveralThreadsKeepEachThreadsOrderWithNothingLostOrDuplicated(round: Int) async {
        let center = PostCenter()
        let topic = Topic<Point>("point")
        let threads = 4
        let perThread = 2_500
        let progress = Progress()
        let inbox = Inbox<Point>(reached: progress.continuation)
        let token = center.subscribe(topic, on: inbox) { inbox, point in inbox.receive(point) }
        await onThread {
            let posters = (0..<threads).map { t in
                TestThread { for i in 0..<perThread { center.post(topic, Point(x: t, y: i)) } }
            }
            for poster in posters { poster.join() }
        }
        await progress.wait(for: threads * perThread)
        let values = await inbox.values
        #expect(values.count == threads * perThread)
        for t in 0..<threads {
            #expect(values.filter { $0.x == t }.map(\.y) == Array(0..<perThread), "thread \(t), round \(round)")
        }
        withExtendedLifetime(token) {}
    }

    @Test func nameSubscriptionGetsEnvelopesOnTheActorInPostOrder() async {
        let center = PostCenter()
        let progress = Progress()
        let session = Inbox<String>(reached: progress.continuation)
        let token = center.subscribe("login", on: session) { session, post in session.receive(post.flag) }
        for flag in ["a", "b", "c"] { #expect(center.post("login", flag: flag) == 1) }
        await progress.wait(for: 3)
        #expect(await session.values == ["a", "b", "c"])
        withExtendedLifetime(token) {}
    }

    @Test func aBurstOfPostsCostsOneJobOnTheActorAndThePosterNeverWaits() async {
        let center = PostCenter()
        let topic = Topic<Int>("burst")
        let progress = Progress()
        let inbox = GatedInbox<Int>("burst", reached: progress.continuation)
        let token = center.subscribe(topic, on: inbox) { inbox, value in inbox.receive(value) }
        // The actor cannot run anything while its queue is suspended; every post must still return.
        inbox.executor.queue.suspend()
        for i in 0..<100 { #expect(center.post(topic, i) == 1) }
        inbox.executor.queue.resume()
        await progress.wait(for: 100)
        // One drain for the whole burst, not one task per post: one job on the actor's executor.
        #expect(inbox.executor.enqueued == 1)
        #expect(await inbox.values == Array(0..<100))
        withExtendedLifetime(token) {}
    }

    @Test func aLongBurstReachesTheActorInOrderAndEveryPayloadIsReleasedOnceHandled() async {
        let center = PostCenter()
        let topic = Topic<Tracked>("long burst")
        let live = LiveObjects()
        let progress = Progress()
        let inbox = GatedInbox<String>("long burst", reached: progress.continuation)
        let token = center.subscribe(topic, on: inbox) { inbox, value in inbox.receive(value.name) }
        // 1,000 payloads wait while the actor cannot run: the mailbox grows several times over,
        // moving the payloads it holds, and must neither lose, duplicate nor leak one.
        inbox.executor.queue.suspend()
        for i in 0..<1_000 { #expect(center.post(topic, Tracked("\(i)", live: live)) == 1) }
        #expect(live.alive == 1_000)
        inbox.executor.queue.resume()
        await progress.wait(for: 1_000)
        #expect(await inbox.values == (0..<1_000).map { "\($0)" })
        // The drain releases each batch before it looks for the next, and the last batch before
        // it reports the count the wait above saw; a yield later, all are gone.
        inbox.executor.queue.sync {}
        #expect(live.alive == 0, "payloads the handler has seen are still held by the mailbox")
        withExtendedLifetime(token) {}
    }

    @Test func aPostOfAnotherStaticTypeReachesTheActorExactlyWhenItsValueIsAPayload() async {
        let center = PostCenter()
        let progress = Progress()
        let inbox = Inbox<String>(reached: progress.continuation)
        let token = center.subscribe(Topic<Animal>("pets"), on: inbox) { inbox, animal in inbox.receive(animal.name) }
        // Posted as the subscription's own type, as a subclass (a cast finds it), and as an
        // unrelated type (nothing to deliver, not counted).
        let counts = [
            center.post(Topic<Animal>("pets"), Animal("cat")),
            center.post(Topic<Dog>("pets"), Dog("rex")),
            center.post(Topic<String>("pets"), "not an animal"),
            center.post(Topic<Animal>("pets"), Dog("fido")),
        ]
        #expect(counts == [1, 1, 0, 1])
        await progress.wait(for: counts.reduce(0, +))
        #expect(await inbox.values == ["cat", "rex", "fido"])
        withExtendedLifetime(token) {}
    }

    // MARK: Lifetime

    @Test func theActorIsHeldWeaklyAndOnceGoneIsNotReachedOrCounted() async {
        let center = PostCenter()
        let topic = Topic<Int>("weak")
        let live = LiveObjects()
        var inbox: Inbox<Int>? = Inbox(live: live)
        weak var watched: Inbox<Int>?
        watched = inbox
        let token = center.subscribe(topic, on: inbox!) { inbox, value in inbox.receive(value) }
        #expect(center.subscriptionCount(for: "weak") == 1)
        #expect(token.isActive)
        inbox = nil
        #expect(watched == nil)
        #expect(live.alive == 0)
        #expect(center.post(topic, 1) == 0)
        #expect(center.subscriptionCount(for: "weak") == 0)
        #expect(!token.isActive)
    }

    @Test func anActorOwningItsOwnTokenIsFreedAndItsSubscriptionEnds() async {
        let center = PostCenter()
        let topic = Topic<Int>("owner")
        let (gone, goneContinuation) = AsyncStream<Void>.makeStream()
        var owner: Owner? = Owner(gone: goneContinuation)
        await owner!.start(center, topic)
        #expect(center.subscriptionCount(for: "owner") == 1)
        #expect(center.post(topic, 7) == 1)
        owner = nil
        // The deinit runs once the drain that may be running has let go of the actor.
        for await _ in gone { break }
        #expect(center.subscriptionCount(for: "owner") == 0)
        #expect(center.post(topic, 8) == 0)
    }

    // MARK: Cancellation

    @Test(arguments: 0..<5)
    func cancelWaitsForTheHandlerRunningOnTheActorAndDropsTheQueuedPayloads(round: Int) async {
        let center = PostCenter()
        let topic = Topic<Int>("running")
        let inbox = GatedInbox<Int>("running")
        let started = DispatchSemaphore(value: 0)
        let cancelling = Flag()
        let finished = Flag()
        let calls = Counter()
        let slot = TokenSlot()
        slot.token = center.subscribe(topic, on: inbox) { inbox, value in
            calls.increment()
            inbox.receive(value)
            guard value == 0 else { return }
            started.signal()
            // Until cancel() has begun (the token reads inactive), so the nine payloads still
            // waiting are the cancelled ones on any machine however slow, then long enough for
            // cancel() to reach its wait: a slow machine can miss a bug, never fail a correct engine.
            while !cancelling.isSet || slot.token?.isActive != false { sched_yield() }
            usleep(20_000)
            finished.set()
        }
        for i in 0..<10 { #expect(center.post(topic, i) == 1) }
        let finishedWhenCancelReturned = Flag()
        await onThread {
            started.wait()
            cancelling.set()
            slot.cancel()
            if finished.isSet { finishedWhenCancelReturned.set() }
        }
        #expect(finishedWhenCancelReturned.isSet, "cancel() returned while the handler still ran on the actor")
        inbox.executor.queue.sync {}
        // The payloads still waiting when cancel() returned never reach the handler.
        #expect(calls.count == 1)
        #expect(await inbox.values == [0])
        #expect(center.post(topic, 10) == 0)
    }

    @Test func cancelWhileTheActorIsBusyReturnsAtOnceAndReleasesTheWaitingPayloads() async {
        let center = PostCenter()
        let topic = Topic<Tracked>("busy")
        let live = LiveObjects()
        let inbox = GatedInbox<String>("busy")
        let calls = Counter()
        let token = center.subscribe(topic, on: inbox) { inbox, value in
            calls.increment()
            inbox.receive(value.name)
        }
        inbox.executor.queue.suspend()
        for i in 0..<10 { #expect(center.post(topic, Tracked("\(i)", live: live)) == 1) }
        let returned = Flag()
        // The actor cannot run until the queue resumes: cancel() must not wait for it.
        await onThread {
            let canceller = TestThread { token.cancel() }
            let joined = canceller.join(timeout: 5)
            if joined { returned.set() }
            inbox.executor.queue.resume()
            if !joined { canceller.join() }
        }
        #expect(returned.isSet, "cancel() waited for an actor that was not running the handler")
        #expect(live.alive == 0, "payloads waiting for the actor outlived cancel()")
        inbox.executor.queue.sync {}
        #expect(calls.count == 0)
        #expect(await inbox.values == [])
    }

    @Test(arguments: 0..<5)
    func cancelFromInsideTheHandlerOnTheActorReturnsAtOnce(round: Int) async {
        let center = PostCenter()
        let topic = Topic<Int>("inside")
        let inbox = GatedInbox<Int>("inside")
        let slot = TokenSlot()
        let entered = DispatchSemaphore(value: 0)
        let returned = DispatchSemaphore(value: 0)
        let activeAfterCancel = Recorder<Bool>()
        slot.token = center.subscribe(topic, on: inbox) { inbox, value in
            inbox.receive(value)
            entered.signal()
            slot.cancel()
            activeAfterCancel.append(slot.token?.isActive ?? true)
            returned.signal()
        }
        inbox.executor.queue.suspend()
        for i in 0..<5 { #expect(center.post(topic, i) == 1) }
        inbox.executor.queue.resume()
        let neverRan = Flag()
        let timedOut = Flag()
        await onThread {
            // Deadlock guards, not timing assertions. The delivery's task may wait long for the
            // cooperative pool when other tests hold it (under ThreadSanitizer, two slow tests on
            // two cores), so the cancel's own guard starts once the handler runs.
            if entered.wait(timeout: .now() + 300) == .timedOut { neverRan.set() }
            if returned.wait(timeout: .now() + 10) == .timedOut { timedOut.set() }
        }
        #expect(!neverRan.isSet, "the handler on the actor never ran")
        #expect(!timedOut.isSet, "cancel() from inside the handler on the actor did not return")
        inbox.executor.queue.sync {}
        #expect(activeAfterCancel.values == [false])
        #expect(await inbox.values == [0])
    }

    @Test func droppingItsOwnTokenInsideTheHandlerReturnsAtOnce() async {
        let center = PostCenter()
        let topic = Topic<Int>("drop")
        let (gone, goneContinuation) = AsyncStream<Void>.makeStream()
        let owner = Owner(gone: goneContinuation)
        let entered = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        await owner.startDroppingTokenInHandler(center, topic, entered, done)
        for i in 0..<3 { center.post(topic, i) }
        let neverRan = Flag()
        let timedOut = Flag()
        await onThread {
            // As above: the guard of the drop starts once the handler runs.
            if entered.wait(timeout: .now() + 300) == .timedOut { neverRan.set() }
            if done.wait(timeout: .now() + 10) == .timedOut { timedOut.set() }
        }
        #expect(!neverRan.isSet, "the handler on the actor never ran")
        #expect(!timedOut.isSet, "dropping the token inside its handler did not return")
        #expect(await owner.received == [0])
        #expect(await owner.token == nil)
        #expect(center.subscriptionCount(for: "drop") == 0)
        withExtendedLifetime(gone) {}
    }

    @Test func pauseDropsThePayloadsWaitingForTheActorAndResumeDeliversLaterPosts() async {
        let center = PostCenter()
        let topic = Topic<Int>("pause")
        let progress = Progress()
        let inbox = GatedInbox<Int>("pause", reached: progress.continuation)
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let token = center.subscribe(topic, on: inbox) { inbox, value in
            inbox.receive(value)
            guard value == 0 else { return }
            started.signal()
            release.wait()
        }
        #expect(center.post(topic, 0) == 1)
        await onThread { started.wait() }
        #expect(center.post(topic, 1) == 1)
        #expect(center.post(topic, 2) == 1)
        token.pause()
        release.signal()
        inbox.executor.queue.sync {}  // the drain that was running has finished
        token.resume()
        #expect(center.post(topic, 3) == 1)
        await progress.wait(for: 2)
        #expect(await inbox.values == [0, 3])
    }

    // MARK: Global actors

    @Test func aGlobalActorsSharedInstanceRunsTheHandlerIsolatedToTheGlobalActor() async {
        let center = PostCenter()
        let topic = Topic<Int>("sensor")
        let progress = Progress()
        let token = center.subscribe(topic, on: Sensors.shared) { sensors, value in
            Sensors.assertIsolated()
            sensors.readings.append(value)
            Sensors.assumeIsolated { SensorLog.shared.lines.append("reading \(value)") }
            progress.continuation.yield(sensors.readings.count)
        }
        for i in 0..<3 { #expect(center.post(topic, i) == 1) }
        await progress.wait(for: 3)
        #expect(await Sensors.shared.readings == [0, 1, 2])
        #expect(await SensorLog.shared.lines == ["reading 0", "reading 1", "reading 2"])
        withExtendedLifetime(token) {}
    }

    @Test func theMainActorSharedInstanceRunsTheHandlerOnTheMainActor() async {
        let center = PostCenter()
        let topic = Topic<Int>("main")
        let progress = Progress()
        let seen = Recorder<Int>()
        let token = center.subscribe(topic, on: MainActor.shared) { _, value in
            MainActor.assumeIsolated { seen.append(value) }
            progress.continuation.yield(seen.count)
        }
        await Task.detached { for i in 0..<3 { center.post(topic, i) } }.value
        await progress.wait(for: 3)
        #expect(seen.values == [0, 1, 2])
        withExtendedLifetime(token) {}
    }

    /// Every option of an actor subscription combines: `from:` filters live and replayed posts,
    /// `once:` takes exactly one (the replayed one when there is one) and leaves the route, and
    /// `coalesced:` with `replay:` starts from the retained post.
    @Test(.tags(.pin)) func anActorSubscriptionTakesFromReplayOnceAndCoalescedTogether() async {
        final class Sender: Sendable {}
        let center = PostCenter()
        let (a, b) = (Sender(), Sender())
        let topic = Topic<Int>("actor.combined")
        center.post(topic, 1, from: a, retain: true)
        let onceFromA = Inbox<Int>()
        let onceFromB = Inbox<Int>()
        let fromB = Inbox<Int>()
        let coalesced = Inbox<Int>()
        let names = Inbox<String>()
        let t1 = center.subscribe(topic, from: a, on: onceFromA, replay: true, once: true) { $0.receive($1) }
        let t2 = center.subscribe(topic, from: b, on: onceFromB, replay: true, once: true) { $0.receive($1) }
        let t3 = center.subscribe(topic, from: b, on: fromB, replay: true, coalesced: true) { $0.receive($1) }
        let t4 = center.subscribe(topic, on: coalesced, replay: true, coalesced: true) { $0.receive($1) }
        let t5 = center.subscribe(topic.name, from: a, on: names, replay: true, once: true) {
            $0.receive("\($1.payload(as: Int.self) ?? 0)")
        }
        #expect(!t1.isActive && !t5.isActive)
        #expect(t2.isActive && t3.isActive)
        await center.waitForPendingDeliveries()
        #expect(center.post(topic, 2, from: a) == 1)  // only t4: the one-shots from a are spent
        await center.waitForPendingDeliveries()
        center.post(topic, 3, from: b)
        center.post(topic, 4, from: b)
        await center.waitForPendingDeliveries()
        #expect(await onceFromA.values == [1])
        #expect(await names.values == ["1"])
        #expect(await onceFromB.values == [3])
        #expect(!t2.isActive)
        #expect(await fromB.values.last == 4)
        #expect(await fromB.values.allSatisfy { $0 == 3 || $0 == 4 })
        #expect(await coalesced.values.first == 1)
        #expect(await coalesced.values.last == 4)
        withExtendedLifetime((t1, t2, t3, t4, t5, a, b)) {}
    }

    /// A coalescing actor subscription with `replay: true`: a post made before the first call
    /// replaces the retained payload, as any pending one (the actor is held back meanwhile).
    @Test(.tags(.pin)) func aCoalescedActorReplayIsReplacedByAPostBeforeTheFirstCall() async {
        let center = PostCenter()
        let topic = Topic<Int>("actor.coalesced.replay")
        center.post(topic, 1, retain: true)
        let progress = Progress()
        let inbox = GatedInbox<Int>("actor.coalesced.replay", reached: progress.continuation)
        inbox.executor.queue.suspend()
        let token = center.subscribe(topic, on: inbox, replay: true, coalesced: true) { $0.receive($1) }
        center.post(topic, 2)
        inbox.executor.queue.resume()
        await center.waitForPendingDeliveries()
        #expect(await inbox.values == [2])
        withExtendedLifetime(token) {}
    }
}
