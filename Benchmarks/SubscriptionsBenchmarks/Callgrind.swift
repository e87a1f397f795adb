import Foundation
import Subscriptions

/// The tiny modes `Benchmarks/callgrind.sh` runs under `valgrind --tool=callgrind`: set up one
/// contender, then do `iterations` operations. The script runs each mode twice (with N and with
/// 0 operations) and divides the difference in instructions by N.
let callgrindModes: [(name: String, help: String)] = [
    ("typed1", "typed Topic<Int> post to 1 subscriber"),
    ("typed10", "typed Topic<Int> post to 10 subscribers"),
    ("typedpatterns1", "typed1 on a center that also holds 1,000 prefix subscriptions of other prefixes"),
    ("plainpatterns1", "plain1 on a center that also holds 1,000 prefix subscriptions of other prefixes"),
    ("main10", "typed Topic<Int> post on the main thread to 10 .mainActor subscribers"),
    ("mainoff10", "typed Topic<Int> post off the main thread to 10 .mainActor subscribers (one burst), then handled"),
    ("coalesced1", "typed Topic<Int> post on the main thread to 1 .mainActor.coalesced subscriber, payload pending"),
    ("actor1", "typed Topic<Int> post to 1 subscriber on an actor, each post waited for until handled"),
    ("actor10", "typed Topic<Int> post to 10 subscribers on one actor, each post waited for until handled"),
    (
        "actortask1",
        "by hand: Task.detached(priority: .medium) { await sink.receive(v) } per post, each waited for (the floor of actor1)"
    ),
    ("actormsg1", "AsyncMessage post to 1 observer that awaits the actor, each post waited for until handled"),
    ("plain1", "plain post, new PostObject (data nil) per post, to 1 subscriber"),
    ("plainsender1", "plain post, new PostObject(data: sender) per post, to 1 subscriber"),
    ("envelope1", "plain post of a reused PostObject to 1 subscriber"),
    ("nc1", "NotificationCenter post (object nil) to 1 block observer"),
    ("ncsender1", "NotificationCenter post (object: sender) to 1 block observer"),
    ("nc10", "NotificationCenter post (object nil) to 10 block observers"),
    ("loop1", "bare closure loop over 1 closure"),
    ("unheard", "plain post (new PostObject) to a name nobody listens to, 1000 other names subscribed"),
    ("typedunheard", "typed post to a name nobody listens to, 1000 other names subscribed"),
    ("ncunheard", "NotificationCenter post to a name nobody observes, 1000 other names observed"),
    ("subcancel", "subscribe + cancel on a name holding 10 subscriptions"),
    ("subcancel100k", "subscribe + cancel on a name holding 100,000 subscriptions"),
    ("subcancel1k", "subscribe + cancel on a name holding 1,000 subscriptions (the priority modes' base)"),
    ("subcancelfirst", "subscribe + cancel at priority 1 (before all of them) on a name holding 1,000 subscriptions"),
    ("subdrop", "subscribe + token drop (no cancel) on a name holding 10 subscriptions"),
    ("subdropposting", "subdrop while a second thread posts another name (for perf; callgrind serialises threads)"),
    ("ncsubcancel", "NotificationCenter addObserver + removeObserver on a name with 10 observers"),
]

/// Runs one callgrind mode; returns false for an unknown mode.
func runCallgrindMode(_ mode: String, iterations: Int) -> Bool {
    let counter = Counter.make()
    let value = postedValue
    let sender = Sender()
    let name = "bench.callgrind"
    let center = PostCenter()
    let foundation = NotificationCenter()
    var tokens: [Subscription] = []
    var observers: [NSObjectProtocol] = []
    var expected = 0
    var delivered: Int? = nil
    switch mode {
    case "typed1", "typed10":
        let n = mode == "typed1" ? 1 : 10
        let topic = Topic<Int>(name)
        subscribeManyTyped(center, topic, counter, n, into: &tokens)
        delivered = postTyped(center, topic, value, iterations)
        expected = iterations * n * value
    case "typedpatterns1":
        let topic = Topic<Int>(name)
        subscribeManyTyped(center, topic, counter, 1, into: &tokens)
        for i in 0..<1_000 {
            tokens.append(
                center.subscribe(matching: .prefix("other\(i).")) { _, _ in counter.pointer.pointee &+= 1000 })
        }
        delivered = postTyped(center, topic, value, iterations)
        expected = iterations * value
    case "main10":
        let topic = Topic<Int>(name)
        MainActor.assumeIsolated {
            for _ in 0..<10 {
                tokens.append(center.subscribe(topic, delivery: .mainActor) { v in counter.pointer.pointee &+= v })
            }
        }
        delivered = postTyped(center, topic, value, iterations)
        expected = iterations * 10 * value
    case "coalesced1":
        // The main queue is not drained while posting: after the first post a payload is
        // pending, and every post replaces it (the handler never runs here).
        let topic = Topic<Int>(name)
        MainActor.assumeIsolated {
            tokens.append(
                center.subscribe(topic, delivery: .mainActor.coalesced) { v in counter.pointer.pointee &+= v })
        }
        let reached = postTyped(center, topic, value, iterations)
        precondition(reached == iterations, "coalesced1: every post must reach the subscription")
        expected = 0
    case "mainoff10":
        // A thread makes every post while the main thread waits (one burst: one main-queue job),
        // then the main thread runs that job: the cost of the post and of the delivery.
        let topic = Topic<Int>(name)
        MainActor.assumeIsolated {
            for _ in 0..<10 {
                tokens.append(center.subscribe(topic, delivery: .mainActor) { v in counter.pointer.pointee &+= v })
            }
        }
        let returned = Counter.make()
        let posted = DispatchSemaphore(value: 0)
        let poster = Thread {
            returned.pointer.pointee = postTyped(center, topic, value, iterations)
            posted.signal()
        }
        poster.start()
        posted.wait()
        expected = iterations * 10 * value
        MainActor.assumeIsolated { runMainUntil { counter.value == expected } }
        delivered = returned.value
    case "actor1", "actor10", "actortask1", "actormsg1":
        // One post at a time, each waited for: the instructions of every thread involved (the
        // poster, the task pool, the actor), not the kernel's (the wake-ups themselves).
        let n = mode == "actor10" ? 10 : 1
        let sink = BenchSink(counter)
        let topic = Topic<Int>(name)
        let messages = NotificationCenter()
        var messageTokens: [NotificationCenter.ObservationToken] = []
        switch mode {
        case "actormsg1":
            messageTokens.append(
                messages.addObserver(of: nil, for: BenchAsyncMessage.self) { m in await sink.receive(m.value) })
        case "actortask1": break
        default:
            for _ in 0..<n { tokens.append(center.subscribe(topic, on: sink) { sink, v in sink.receive(v) }) }
        }
        delivered = postEachUntilHandled(sink, n, iterations) {
            switch mode {
            case "actormsg1": messages.post(BenchAsyncMessage(value: value), subject: benchSubject)
            case "actortask1": Task.detached(priority: .medium) { await sink.receive(value) }
            default: center.post(topic, value)
            }
        }
        for token in messageTokens { messages.removeObserver(token) }
        expected = iterations * n * value
    case "plainpatterns1":
        subscribeMany(center, name, counter, 1, into: &tokens)
        for i in 0..<1_000 {
            tokens.append(
                center.subscribe(matching: .prefix("other\(i).")) { _, _ in counter.pointer.pointee &+= 1000 })
        }
        delivered = postPlain(center, name, nil, iterations)
        expected = iterations
    case "plain1", "plainsender1":
        subscribeMany(center, name, counter, 1, into: &tokens)
        delivered = postPlain(center, name, mode == "plain1" ? nil : sender, iterations)
        expected = iterations
    case "envelope1":
        subscribeMany(center, name, counter, 1, into: &tokens)
        delivered = postEnvelope(center, name, PostObject(flag: "", data: nil), iterations)
        expected = iterations
    case "nc1", "ncsender1", "nc10":
        let n = mode == "nc10" ? 10 : 1
        let notificationName = Notification.Name(name)
        observeMany(foundation, notificationName, counter, n, into: &observers)
        postNotification(foundation, notificationName, mode == "ncsender1" ? sender : nil, iterations)
        expected = iterations * n
    case "loop1":
        var closures: [(Int) -> Void] = []
        appendClosures(counter, 1, into: &closures)
        delivered = callClosures(closures, value, iterations)
        expected = iterations * value
    case "unheard", "typedunheard":
        for i in 0..<1000 { subscribeMany(center, "bench.busy.\(i)", counter, 1, into: &tokens) }
        if mode == "unheard" {
            delivered = postPlain(center, "bench.nobody", nil, iterations)
        } else {
            delivered = postTyped(center, Topic<Int>("bench.nobody"), value, iterations)
        }
        expected = 0
    case "ncunheard":
        for i in 0..<1000 {
            observeMany(foundation, Notification.Name("bench.busy.\(i)"), counter, 1, into: &observers)
        }
        postNotification(foundation, Notification.Name("bench.nobody"), nil, iterations)
        expected = 0
    case "subcancel", "subcancel100k":
        let held = mode == "subcancel" ? 10 : 100_000
        subscribeMany(center, name, counter, held, into: &tokens)
        subscribeAndCancel(center, name, counter, iterations)
        expected = 0
        precondition(
            center.subscriptionCount(for: name) == held, "\(mode): the name should still hold \(held) subscriptions")
    case "subcancel1k", "subcancelfirst":
        subscribeMany(center, name, counter, 1_000, into: &tokens)
        subscribeAndCancel(center, name, counter, priority: mode == "subcancelfirst" ? 1 : 0, iterations)
        expected = 0
        precondition(
            center.subscriptionCount(for: name) == 1_000, "\(mode): the name should still hold 1,000 subscriptions")
    case "subdrop", "subdropposting":
        subscribeMany(center, name, counter, 10, into: &tokens)
        let poster = mode == "subdropposting" ? BackgroundPoster(center: center, name: name + ".other") : nil
        subscribeAndDrop(center, name, counter, iterations)
        if let poster { precondition(poster.stop() > 0, "subdropposting: the second thread posted nothing") }
        expected = 0
        precondition(center.subscriptionCount(for: name) == 10, "\(mode): the name should still hold 10 subscriptions")
    case "ncsubcancel":
        let notificationName = Notification.Name(name)
        observeMany(foundation, notificationName, counter, 10, into: &observers)
        observeAndRemove(foundation, notificationName, counter, iterations)
        expected = 0
    default:
        return false
    }
    expectCalls(counter.value, expected, "callgrind \(mode)")
    if let delivered, mode != "loop1" {
        expectCalls(
            delivered * (mode.hasPrefix("typed") || mode.hasPrefix("main") || mode.hasPrefix("actor") ? value : 1)
                * (mode == "actor10" ? 10 : 1), expected,
            "callgrind \(mode) (returned count)")
    }
    print("callgrind mode \(mode): \(iterations) operations, \(counter.value) handler increments")
    withExtendedLifetime((tokens, observers)) {}
    return true
}
