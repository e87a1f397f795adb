import Foundation
import Subscriptions
import SubscriptionsFoundation
import SubscriptionsTestSupport
import Synchronization
import Testing

private let ping = Notification.Name("bridge.ping")

/// A thread-safe list of what handlers saw.
private final class Seen<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

/// Something a handler captures, to prove by a weak reference that the handler was released.
private final class Captured: Sendable {
    let calls = Atomic<Int>(0)
    func hit() { calls.add(1, ordering: .relaxed) }
    var count: Int { calls.load(ordering: .relaxed) }
}

private final class Sender: Sendable {}

/// Holds a token until `drop()`, so that its deinit runs on the thread that calls `drop()`.
private final class TokenOwner: @unchecked Sendable {
    // @unchecked: `token` is written by one thread only (the one calling `drop()`).
    private var token: Subscription?
    init(_ token: Subscription?) { self.token = token }
    func drop() { token = nil }
}

@Suite struct FoundationBridgeTests {
    // MARK: NotificationCenter.subscribe(to:)

    @Test func tokenDeliversEveryNotificationOnceInPostOrder() {
        let center = NotificationCenter()
        let seen = Seen<Int>()
        let token = center.subscribe(to: ping) { note in seen.append(note.userInfo?["i"] as? Int ?? 0) }
        for i in 1...3 { center.post(name: ping, object: nil, userInfo: ["i": i]) }
        center.post(name: Notification.Name("bridge.other"), object: nil)
        #expect(seen.all == [1, 2, 3])
        #expect(token.isActive)
    }

    @Test func droppingTheTokenRemovesTheObserverAndReleasesTheHandler() {
        let center = NotificationCenter()
        weak var weakCaptured: Captured?
        let captured = Captured()
        do {
            let inner = Captured()
            weakCaptured = inner
            let token = center.subscribe(to: ping) { _ in
                inner.hit()
                captured.hit()
            }
            center.post(name: ping, object: nil)
            #expect(inner.count == 1)
            withExtendedLifetime(token) {}
        }
        #expect(weakCaptured == nil)
        center.post(name: ping, object: nil)
        #expect(captured.count == 1)
    }

    @Test func cancelRemovesTheObserverAndReleasesTheHandlerBeforeReturning() {
        let center = NotificationCenter()
        weak var weakCaptured: Captured?
        let token: Subscription
        do {
            let captured = Captured()
            weakCaptured = captured
            token = center.subscribe(to: ping) { _ in captured.hit() }
        }
        center.post(name: ping, object: nil)
        #expect(weakCaptured?.count == 1)
        token.cancel()
        #expect(weakCaptured == nil)
        #expect(!token.isActive)
        center.post(name: ping, object: nil)
        token.cancel()  // idempotent
        token.resume()  // does nothing after cancel
        #expect(!token.isActive)
    }

    @Test func droppingTheTokenDoesNotWaitForAHandlerRunningOnAnotherThread() {
        let center = NotificationCenter()
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        weak var weakCaptured: Captured?
        var token: Subscription?
        do {
            let captured = Captured()
            weakCaptured = captured
            token = center.subscribe(to: ping) { _ in
                captured.hit()
                entered.signal()
                release.wait()
            }
        }
        Thread.detachNewThread {
            center.post(name: ping, object: nil)
            finished.signal()
        }
        entered.wait()
        // The deinit runs on a helper thread, so a deinit that waits shows as a timeout here
        // instead of hanging the suite.
        let dropped = DispatchSemaphore(value: 0)
        let owner = TokenOwner(token)
        token = nil
        Thread.detachNewThread {
            owner.drop()
            dropped.signal()
        }
        let returnedWhileRunning = dropped.wait(timeout: .now() + 10) == .success
        #expect(returnedWhileRunning, "the token's deinit waited for the running handler")
        #expect(weakCaptured != nil, "the running call keeps its closure until it ends")
        release.signal()
        finished.wait()
        if !returnedWhileRunning { dropped.wait() }
        center.post(name: ping, object: nil)
        #expect(weakCaptured == nil, "the closure is released when the last running call ends")
    }

    @Test func objectFilterDeliversOnlyThatSendersNotifications() {
        let center = NotificationCenter()
        let mine = Sender()
        let other = Sender()
        let seen = Seen<Bool>()
        let token = center.subscribe(to: ping, object: mine) { note in
            seen.append(note.object as AnyObject? === mine)
        }
        center.post(name: ping, object: mine)
        center.post(name: ping, object: other)
        center.post(name: ping, object: nil)
        center.post(name: ping, object: mine)
        #expect(seen.all == [true, true])
        withExtendedLifetime(token) {}
    }

    @Test func pauseDropsNotificationsAndResumeRestoresDelivery() {
        let center = NotificationCenter()
        let seen = Seen<Int>()
        let token = center.subscribe(to: ping) { note in seen.append(note.userInfo?["i"] as? Int ?? 0) }
        center.post(name: ping, object: nil, userInfo: ["i": 1])
        token.pause()
        #expect(!token.isActive)
        center.post(name: ping, object: nil, userInfo: ["i": 2])
        token.resume()
        #expect(token.isActive)
        center.post(name: ping, object: nil, userInfo: ["i": 3])
        #expect(seen.all == [1, 3])
    }

    @Test func handlerRunsOnTheGivenOperationQueue() {
        let center = NotificationCenter()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let seen = Seen<Bool>()
        let token = center.subscribe(to: ping, queue: queue) { _ in
            seen.append(OperationQueue.current === queue)
        }
        center.post(name: ping, object: nil)
        center.post(name: ping, object: nil)
        queue.waitUntilAllOperationsAreFinished()
        #expect(seen.all == [true, true])
        withExtendedLifetime(token) {}
    }

    @Test func tokenOfADeallocatedCenterIsInactiveAndHarmless() {
        var center: NotificationCenter? = NotificationCenter()
        let token = center!.subscribe(to: ping) { _ in }
        #expect(token.isActive)
        center = nil
        #expect(!token.isActive)
        token.cancel()
    }

    @Test func cancelInsideTheHandlerReturnsAtOnceAndStopsLaterNotifications() {
        let center = NotificationCenter()
        let slot = Mutex<Subscription?>(nil)
        let captured = Captured()
        let token = center.subscribe(to: ping) { _ in
            captured.hit()
            slot.withLock { $0 }?.cancel()
        }
        slot.withLock { $0 = token }
        center.post(name: ping, object: nil)
        center.post(name: ping, object: nil)
        #expect(captured.count == 1)
        #expect(!token.isActive)
    }

    @Test func cancelFromInsideItsOwnHandlerOnTwoThreadsAtOnceBothReturn() async {
        // The same Foundation handler runs on two threads (two posts), and each call cancels the
        // token from inside the handler. Each cancel must return at once; waiting for the other
        // thread's call deadlocks both. A child process with a watchdog turns a deadlock into
        // exit code 2; success is 42 (see `twoThreadsCancellingTheirOwnHandlersAtOnceBothReturn`).
        await #expect(processExitsWith: .exitCode(42)) {
            let watchdog = Thread {
                sleep(3)
                _exit(2)
            }
            watchdog.start()
            let center = NotificationCenter()
            let both = DispatchGroup()
            both.enter()
            both.enter()
            let slot = TokenSlot()
            slot.token = center.subscribe(to: ping) { _ in
                both.leave()
                both.wait()  // both threads are inside the handler now
                slot.cancel()
            }
            let t1 = TestThread { center.post(name: ping, object: nil) }
            let t2 = TestThread { center.post(name: ping, object: nil) }
            t1.join()
            t2.join()
            _exit(slot.token?.isActive == false ? 42 : 3)
        }
    }

    @Test func cancelFromAnotherThreadWaitsForRunningHandler() {
        let center = NotificationCenter()
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let cancelling = DispatchSemaphore(value: 0)
        let cancelled = DispatchSemaphore(value: 0)
        let cancelReturned = Atomic<Bool>(false)
        let handlerFinished = Atomic<Bool>(false)
        let cancelReturnedWhileRunning = Atomic<Bool>(false)
        let token = center.subscribe(to: ping) { _ in
            started.signal()
            gate.wait()
            for _ in 0..<1_000 { sched_yield() }  // give a wrongly non-waiting cancel time to return
            if cancelReturned.load(ordering: .sequentiallyConsistent) {
                cancelReturnedWhileRunning.store(true, ordering: .sequentiallyConsistent)
            }
            handlerFinished.store(true, ordering: .sequentiallyConsistent)
        }
        Thread.detachNewThread { center.post(name: ping, object: nil) }
        started.wait()
        Thread.detachNewThread {
            cancelling.signal()
            token.cancel()
            cancelReturned.store(true, ordering: .sequentiallyConsistent)
            cancelled.signal()
        }
        cancelling.wait()
        gate.signal()
        cancelled.wait()
        let finished = handlerFinished.load(ordering: .sequentiallyConsistent)
        let returnedEarly = cancelReturnedWhileRunning.load(ordering: .sequentiallyConsistent)
        #expect(finished)
        #expect(!returnedEarly)
    }

    @Test func noHandlerCallStartsAfterCancelReturns() {
        for _ in 0..<20 {
            let center = NotificationCenter()
            let calls = Atomic<Int>(0)
            let others = Atomic<Int>(0)
            // Other observers of the name widen the window between Foundation's snapshot of the
            // observers and the call of ours, where a removed observer is still called.
            var tokens = (0..<32).map { _ in
                center.subscribe(to: ping) { _ in others.add(1, ordering: .relaxed) }
            }
            let token = center.subscribe(to: ping) { _ in calls.add(1, ordering: .sequentiallyConsistent) }
            tokens += (0..<32).map { _ in
                center.subscribe(to: ping) { _ in others.add(1, ordering: .relaxed) }
            }
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                for _ in 0..<300 { center.post(name: ping, object: nil) }
                done.signal()
            }
            var spins = 0
            while calls.load(ordering: .sequentiallyConsistent) < 20 && spins < 10_000_000 {
                spins += 1
                sched_yield()
            }
            token.cancel()
            let atCancel = calls.load(ordering: .sequentiallyConsistent)
            done.wait()
            #expect(calls.load(ordering: .sequentiallyConsistent) == atCancel)
            withExtendedLifetime(tokens) {}
        }
    }

    // MARK: PostObject(notification)

    @Test func postObjectFromNotificationCopiesFlagAndData() throws {
        let data = Sender()
        let original = PostObject(flag: "sso", data: data)
        let copy = try #require(PostObject(Notification(name: ping, object: original)))
        #expect(copy !== original)
        #expect(copy.flag == "sso")
        #expect(copy.data === data)
        #expect(copy.payload(as: Sender.self) === data)
    }

    @Test func copiedEnvelopeHoldsDataWeaklyLikeTheOriginal() throws {
        let original: PostObject
        let copy: PostObject
        weak var weakData: Sender?
        do {
            let data = Sender()
            weakData = data
            original = PostObject(flag: "f", data: data)
            copy = try #require(PostObject(Notification(name: ping, object: original)))
            #expect(copy.data === data)
        }
        #expect(weakData == nil)
        #expect(copy.data == nil)
        #expect(copy.flag == "f")
        withExtendedLifetime(original) {}
    }

    @Test func notificationWithoutAPostObjectGivesNil() {
        #expect(PostObject(Notification(name: ping)) == nil)
        #expect(PostObject(Notification(name: ping, object: Sender())) == nil)
        #expect(PostObject(Notification(name: ping, object: "text")) == nil)
    }

    // MARK: PostCenter.forward

    @Test func forwardRepostsEveryPostWithItsEnvelope() throws {
        let posts = PostCenter()
        let center = NotificationCenter()
        let seen = Seen<PostObject>()
        let names = Seen<String>()
        let observer = center.subscribe(to: Notification.Name("bridge.login")) { note in
            names.append(note.name.rawValue)
            if let post = note.userInfo?[PostObject.UserInfoKey.post] as? PostObject { seen.append(post) }
        }
        let forwarding = posts.forward("bridge.login", to: center)
        let envelope = PostObject(flag: "sso")
        #expect(posts.post("bridge.login", envelope) == 1)
        #expect(posts.post("bridge.login", flag: "password") == 1)
        #expect(posts.post("bridge.other", flag: "ignored") == 0)
        #expect(names.all == ["bridge.login", "bridge.login"])
        #expect(seen.all.count == 2)
        #expect(seen.all.first === envelope)
        #expect(seen.all.map(\.flag) == ["sso", "password"])
        withExtendedLifetime((observer, forwarding)) {}
    }

    @Test func forwardedTypedPostCarriesTheEngineEnvelopeAndRoundTrips() throws {
        let topic = Topic<Int>("bridge.count")
        let posts = PostCenter()
        let center = NotificationCenter()
        let values = Seen<Int>()
        let observer = center.subscribe(to: Notification.Name(topic.name)) { note in
            values.append(PostObject(note)?.payload(as: Int.self) ?? -1)
        }
        let forwarding = posts.forward(topic, to: center)
        posts.post(topic, 42)
        posts.post(Topic<String>(topic.name), "not an Int")  // not a post of the topic: skipped
        posts.post(topic.name, flag: "no payload")  // neither
        posts.post(topic, 43)
        #expect(values.all == [42, 43])
        withExtendedLifetime((observer, forwarding)) {}
    }

    @Test func droppingTheForwardTokenStopsForwarding() {
        let posts = PostCenter()
        let center = NotificationCenter()
        let captured = Captured()
        let observer = center.subscribe(to: Notification.Name("bridge.drop")) { _ in captured.hit() }
        do {
            let forwarding = posts.forward("bridge.drop", to: center)
            posts.post("bridge.drop")
            withExtendedLifetime(forwarding) {}
        }
        #expect(posts.subscriptionCount(for: "bridge.drop") == 0)
        #expect(posts.post("bridge.drop") == 0)
        #expect(captured.count == 1)
        withExtendedLifetime(observer) {}
    }

    @Test func forwardPostsToTheDefaultNotificationCenterByDefault() {
        let posts = PostCenter()
        let name = "bridge.default.\(UUID().uuidString)"
        let captured = Captured()
        let observer = NotificationCenter.default.subscribe(to: Notification.Name(name)) { _ in captured.hit() }
        let forwarding = posts.forward(name)
        posts.post(name, flag: "x")
        #expect(captured.count == 1)
        withExtendedLifetime((observer, forwarding)) {}
    }

    // MARK: forward keeps the sender, relay maps notifications into topics

    /// A legacy observer that filters on the sender (`object:`) receives exactly that sender's
    /// forwarded posts, with the flag and data in `userInfo`; a post without a sender arrives with
    /// `object == nil`.
    @Test func forwardKeepsTheSenderAsObjectAndPassesFlagAndDataInUserInfo() {
        final class Sender: Sendable {}
        final class Data: Sendable {}
        let posts = PostCenter()
        let center = NotificationCenter()
        let sender = Sender()
        let other = Sender()
        let data = Data()
        let flags = Seen<String>()
        let datas = Seen<Bool>()
        let legacy = center.subscribe(to: Notification.Name("bridge.sender"), object: sender) { note in
            flags.append(note.userInfo?[PostObject.UserInfoKey.flag] as? String ?? "?")
            datas.append(note.userInfo?[PostObject.UserInfoKey.data] as AnyObject? === data)
        }
        let objects = Seen<Bool>()
        let everyone = center.subscribe(to: Notification.Name("bridge.sender")) { note in
            objects.append(note.object == nil)
        }
        let forwarding = posts.forward("bridge.sender", to: center)
        posts.post("bridge.sender", flag: "mine", data: data, from: sender)
        posts.post("bridge.sender", flag: "theirs", from: other)
        posts.post("bridge.sender", flag: "nobody's")
        #expect(flags.all == ["mine"])
        #expect(datas.all == [true])
        #expect(objects.all == [false, false, true])
        withExtendedLifetime((legacy, everyone, forwarding)) {}
    }

    /// A retained post is made without a sender: forwarded, its notification's `object` is nil
    /// (not the record the center keeps the retained post in), typed or plain.
    @Test func aForwardedRetainedPostHasNoObject() {
        let posts = PostCenter()
        let center = NotificationCenter()
        let objects = Seen<Bool>()
        let flags = Seen<String>()
        let observer = center.subscribe(to: Notification.Name("bridge.retained")) { note in
            objects.append(note.object == nil)
            flags.append(note.userInfo?[PostObject.UserInfoKey.flag] as? String ?? "?")
        }
        let forwarding = posts.forward("bridge.retained", to: center)
        posts.post("bridge.retained", flag: "kept", retain: true)
        posts.post(Topic<Int>("bridge.retained"), 7, retain: true)
        #expect(objects.all == [true, true])
        #expect(flags.all.first == "kept")
        // A retained post made from: a sender forwards with that sender as the object.
        final class Phone: Sendable {}
        let sender = Phone()
        let senders = Seen<Bool>()
        let identity = center.subscribe(to: Notification.Name("bridge.retained")) { note in
            senders.append((note.object as AnyObject?) === sender)
        }
        posts.post("bridge.retained", flag: "from", from: sender, retain: true)
        #expect(senders.all == [true])
        #expect(objects.all == [true, true, false])
        withExtendedLifetime((observer, forwarding, identity, sender)) {}
    }

    /// A notification posted by `NotificationCenter` arrives as a typed payload; with `object:`
    /// only that sender's notifications are relayed, and the relayed post is made from the sender.
    /// Cancelling the token removes the observer.
    @Test func relayTurnsANotificationIntoATypedPost() {
        struct Keyboard: Sendable, Equatable {
            let height: Int
            let animated: Bool
            init(height: Int, animated: Bool) {
                self.height = height
                self.animated = animated
            }
            init(_ note: Notification) {
                height = note.userInfo?["height"] as? Int ?? -1
                animated = note.userInfo?["animated"] as? Bool ?? false
            }
        }
        final class Window: Sendable {}
        let keyboard = Topic<Keyboard>("bridge.keyboard")
        let posts = PostCenter()
        let center = NotificationCenter()
        let window = Window()
        let other = Window()
        let name = Notification.Name("KeyboardWillShow")
        let received = Seen<Keyboard>()
        let fromWindow = Seen<Int>()
        let subscriber = posts.subscribe(keyboard) { received.append($0) }
        let filtered = posts.subscribe(keyboard, from: window) { fromWindow.append($0.height) }
        let relay = center.relay(name, object: window, to: keyboard, on: posts) { note in Keyboard(note) }
        center.post(name: name, object: window, userInfo: ["height": 300, "animated": true])
        center.post(name: name, object: other, userInfo: ["height": 1, "animated": false])
        #expect(received.all == [Keyboard(height: 300, animated: true)])
        #expect(fromWindow.all == [300])

        let any = center.relay(name, to: keyboard, on: posts) { note in Keyboard(note) }
        center.post(name: name, object: nil, userInfo: ["height": 5])
        #expect(received.all.map(\.height) == [300, 5])
        relay.cancel()
        any.cancel()
        center.post(name: name, object: window, userInfo: ["height": 7])
        #expect(received.all.map(\.height) == [300, 5])
        withExtendedLifetime((subscriber, filtered)) {}
    }
}
