import Dispatch
import Foundation
import SubscriptionsFoundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

/// Tests that pin guarantees which the rest of the suite only reached by luck: each was written
/// against a mutant of the engine (`Scripts/mutants.txt`) that survived the suite, and fails on
/// (nearly) every run of that mutant. They test behaviour, so that they outlive the engine they
/// were written against; `@testable` is used only where no public API can tell.
///
/// No assertion depends on timing; waits are bounded in checks (`Reliability.wait`), and a
/// semaphore only orders the threads.
@Suite("Guarantee pins (guarantees 4, 5, 8 and 11, one-shot, Foundation bridge)")
struct GuaranteePinTests {
    // MARK: Foundation bridge: cancel removes the Foundation observer

    /// `cancel()` on a `NotificationCenter.subscribe(to:)` token removes the Foundation observer,
    /// not only the handler: nothing of the registration stays in the notification center.
    ///
    /// A leftover observer is invisible to the handler (it is cleared), so this watches what only
    /// the observer keeps alive: the token's home (the observer's block captures it; `@testable`)
    /// and the `object` it filters on (swift-corelibs-foundation keeps it until the observer is
    /// removed; Darwin holds it weakly, where that half of the check passes either way).
    @Test func bridgeCancelRemovesTheFoundationObserver() {
        let center = NotificationCenter()
        let name = Notification.Name("pin.bridge")
        let calls = Counter()
        weak var weakHome: AnyObject?
        weak var weakSender: PinSender?
        do {
            let sender = PinSender()
            let token = center.subscribe(to: name, object: sender) { _ in calls.increment() }
            weakHome = (token._home as? _ExternalHome)?.registration
            weakSender = sender
            center.post(name: name, object: sender)
            token.cancel()
            center.post(name: name, object: sender)
            #expect(!token.isActive)
        }
        #expect(calls.count == 1)
        #expect(weakHome == nil, "the Foundation observer (which holds the token's home) outlived cancel()")
        #expect(weakSender == nil, "the notification center still holds the observer's object after cancel()")
    }

    // MARK: Guarantee 8: a cancel from another thread while a post walks a replaced slot array

    /// While a post is inside the first handler of a name, that handler subscribes enough to the
    /// name to make the engine replace its slot storage; the post goes on walking what it read
    /// when it started. Another thread then cancels every later subscription of the name (whose
    /// handlers are not running, so `cancel()` waits for nobody, in either fence mode, and frees them at once)
    /// and subscribes fresh handlers to another name, which reuse the freed memory. When the post
    /// resumes it must call none of them: not the cancelled handlers (guarantee 8), not the
    /// handlers subscribed during the post (guarantee 5), and never the handler of another name.
    ///
    /// The later subscriptions are made, cancelled and replaced on one thread, because allocators
    /// hand a thread back the memory it freed first; a few rounds make the reuse near certain.
    @Test func cancelFromAnotherThreadWhileAPostWalksAReplacedSlotArrayNeverCallsAFreedEntry() {
        for round in 0..<8 {
            let wrong = walkAReplacedSlotArrayWhileAnotherThreadCancels(round: round)
            if wrong { break }
        }
    }

    /// One round of the test above; returns whether anything went wrong.
    private func walkAReplacedSlotArrayWhileAnotherThreadCancels(round: Int) -> Bool {
        let center = PostCenter()
        let name = "pin.walk"
        let firstCalls = Counter()
        let cancelledCalls = Counter()
        let lateCalls = Counter()
        let wrongCalls = Counter()
        let subscribed = DispatchSemaphore(value: 0)
        let grown = DispatchSemaphore(value: 0)
        let cancelled = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let late = Reliability.Locked<[Subscription]>([])
        let later = Reliability.Locked<[Subscription]>([])
        let fresh = Reliability.Locked<[Subscription]>([])
        let first = center.subscribe(name) { _ in
            firstCalls.increment()
            guard firstCalls.count == 1 else { return }
            // More than any slot storage of 64 entries holds: the post's storage is replaced.
            let made = (0..<256).map { _ in center.subscribe(name) { _ in lateCalls.increment() } }
            late.withLock { $0 = made }
            grown.signal()
            proceed.wait()
        }
        let canceller = TestThread {
            let made = (0..<63).map { _ in center.subscribe(name) { _ in cancelledCalls.increment() } }
            later.withLock { $0 = made }
            subscribed.signal()
            grown.wait()
            for token in made { token.cancel() }
            let others = (0..<512).map { _ in center.subscribe("pin.walk.fresh") { _ in wrongCalls.increment() } }
            fresh.withLock { $0 = others }
            cancelled.signal()
        }
        subscribed.wait()
        let returned = Counter()
        let poster = TestThread { returned.add(center.post(name)) }
        // A deadlock guard, not a timing assertion: these cancels must not wait for the post.
        let cancelsReturned = cancelled.wait(timeout: .now() + 10) == .success
        proceed.signal()
        poster.join()
        canceller.join()
        #expect(cancelsReturned, "round \(round): cancelling subscriptions whose handlers were not running waited")
        #expect(cancelledCalls.count == 0, "round \(round): a cancelled handler ran after cancel() returned")
        #expect(wrongCalls.count == 0, "round \(round): a post of \(name) called a handler of another name")
        #expect(lateCalls.count == 0, "round \(round): a handler subscribed during the post received it")
        #expect(returned.count == 1, "round \(round)")
        let wrong =
            !cancelsReturned || cancelledCalls.count != 0 || wrongCalls.count != 0 || lateCalls.count != 0
            || returned.count != 1
        #expect(center.post(name) == 1 + 256)
        #expect(lateCalls.count == 256)
        #expect(wrongCalls.count == 0)
        withExtendedLifetime(first) {}
        for tokens in [late, later, fresh] { tokens.withLock { $0.removeAll() } }
        return wrong
    }

    // MARK: Guarantee 8: cancelling from inside the handler itself never waits

    /// Two threads are inside the same handler; one cancels the subscription from inside it. That
    /// cancel returns at once: it waits for nobody, not even for the call still running on the
    /// other thread (which here waits for the cancel to return, so a cancel that waited for it
    /// would wait for itself). No call starts afterwards.
    @Test func cancelFromInsideItsOwnHandlerDoesNotWaitForTheSameHandlerOnAnotherThread() {
        let center = PostCenter()
        let name = "pin.self"
        let slot = TokenSlot()
        let inside = Counter()
        let cancelReturned = DispatchSemaphore(value: 0)
        let waitedOut = Flag()
        slot.token = center.subscribe(name) { post in
            inside.increment()
            Reliability.wait(for: "both posts inside the handler") { inside.count >= 2 }
            if post.flag == "cancels" {
                slot.cancel()
                cancelReturned.signal()
            } else if cancelReturned.wait(timeout: .now() + 5) == .timedOut {
                // A deadlock guard, not a timing assertion: the cancel waited for this call.
                waitedOut.set()
            }
        }
        let cancelling = TestThread { center.post(name, flag: "cancels") }
        let waiting = TestThread { center.post(name, flag: "waits") }
        cancelling.join()
        waiting.join()
        #expect(!waitedOut.isSet, "cancel() from inside its own handler waited for a call on another thread")
        #expect(slot.token?.isActive == false)
        #expect(center.post(name) == 0)
        #expect(inside.count == 2)
    }

    // MARK: Guarantee 4: runaway nesting stops with a message

    /// A handler that re-posts its own name without end stops the process with a message that
    /// names the post and the depth, one past `maximumNestingDepth`, instead of overflowing the
    /// stack later with no message.
    @Test func runawayRecursivePostStopsWithAMessageNamingThePostAndTheDepth() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let center = PostCenter()
            let token = center.subscribe("pin.loop") { _ in center.post("pin.loop") }
            center.post("pin.loop")
            withExtendedLifetime(token) {}
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        let expected =
            "a post of \"pin.loop\" started while \(PostCenter.maximumNestingDepth) posts were in progress on one "
            + "thread: a loop of posts"
        #expect(message.contains(expected), "the stop message does not say \(expected)")
    }

    // MARK: Guarantees 8 and 11: captures go on the cancelling thread, after the running call

    /// The registrations with an option, and the Foundation bridge, each of which keeps its
    /// handler in a different kind of entry than a plain immediate subscription.
    enum Option: String, CaseIterable, Sendable {
        case senderFilter
        case queue
        case observer
        case foundationBridge
    }

    /// A handler with an option is running on another thread when `cancel()` is called: cancel
    /// waits for that call, then releases the closure and everything it captured on the
    /// cancelling thread, before it returns. So the captured object's deinit runs on the
    /// cancelling thread, after the running call ended, and before `cancel()` returned.
    ///
    /// The handler stays inside its call until `cancel()` has marked the subscription (its token
    /// reports `isActive == false`), so cancel always finds it running.
    @Test(arguments: Option.allCases)
    func cancelReleasesAnOptionHandlersCapturesOnTheCancellingThreadAfterItsRunningCall(_ option: Option) {
        let log = ReleaseLog()
        let callEnded = Flag()
        let started = DispatchSemaphore(value: 0)
        let slot = TokenSlot()
        var probe: ReleaseProbe? = ReleaseProbe(log, callEnded)
        weak var weakProbe: ReleaseProbe?
        weakProbe = probe
        // A fresh closure for each registration below, so that only the center holds the probe.
        let makeBody: (ReleaseProbe?) -> @Sendable () -> Void = { probe in
            { [probe] in
                withExtendedLifetime(probe) {}
                started.signal()
                Reliability.wait(for: "cancel() to mark the subscription") { slot.token?.isActive == false }
                callEnded.set()
            }
        }

        let center = PostCenter()
        let name = "pin.options"
        let sender = PinSender()
        let observer = PinSender()
        let notifications = NotificationCenter()
        let queue = makeSerialQueue("pin.options.queue")
        var poster: TestThread?
        switch option {
        case .senderFilter:
            slot.token = center.subscribe(name, from: sender) { [body = makeBody(probe)] _ in body() }
            poster = TestThread { center.post(name, PostObject(), from: sender) }
        case .queue:
            slot.token = center.subscribe(name, delivery: .queue(queue)) { [body = makeBody(probe)] _ in body() }
            #expect(center.post(name) == 1)
        case .observer:
            slot.token = center.register(name, observer: observer) { [body = makeBody(probe)] _ in { _ in body() } }
            poster = TestThread { center.post(name) }
        case .foundationBridge:
            slot.token = notifications.subscribe(to: Notification.Name(name)) { [body = makeBody(probe)] _ in body() }
            poster = TestThread { notifications.post(name: Notification.Name(name), object: nil) }
        }
        probe = nil
        started.wait()
        let canceller = currentThreadID()
        slot.cancel()
        let releasedBeforeCancelReturned = weakProbe == nil
        let release = log.entries
        poster?.join()
        queue.sync {}
        #expect(releasedBeforeCancelReturned, "the handler's captures outlived cancel()")
        #expect(release.count == 1)
        #expect(release.first?.thread == canceller, "the captures were released on another thread than cancel()'s")
        #expect(release.first?.afterTheCall == true, "the captures were released while the handler was running")
        withExtendedLifetime((sender, observer)) {}
    }

    // MARK: One-shot: exactly one post wins

    /// A thousand one-shot subscriptions of one name, posted by two threads released at the same
    /// moment: each one-shot runs exactly once, and the two posts together report exactly a
    /// thousand calls. Repeated, so that the two walks meet at the same subscription many times
    /// (on 2 cores a round makes them meet at the claim about one time in ten); stops at the
    /// first round that fails.
    @Test func oneShotRunsExactlyOnceWhenTwoThreadsPostItAtTheSameMoment() {
        let center = PostCenter()
        let name = "pin.once"
        let count = 1_000
        for round in 0..<Reliability.scaled(200, minimum: 20) {
            let runs = (0..<count).map { _ in Reliability.Tally() }
            let tokens = runs.map { tally in center.subscribeOnce(name) { _ in tally.up() } }
            let returned = Reliability.Tally()
            Reliability.onThreads(2) { _ in returned.add(center.post(name)) }
            let twice = runs.count { $0.current != 1 }
            #expect(twice == 0, "round \(round): \(twice) one-shots did not run exactly once")
            #expect(returned.current == count, "round \(round)")
            #expect(center.subscriptionCount(for: name) == 0)
            withExtendedLifetime(tokens) {}
            if twice != 0 || returned.current != count { break }
        }
    }
}

/// An object with an identity and nothing else: a sender, an observer, a notification's object.
private final class PinSender: Sendable {}
