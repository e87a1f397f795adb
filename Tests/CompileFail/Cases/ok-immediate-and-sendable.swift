// The control: everything the failing cases do, written the way that compiles. If this case
// fails, the setup is broken, not the rules.
import Dispatch
import Subscriptions

/// Not `Sendable`: a mutable class.
final class Counted {
    var value = 0
}

let center = PostCenter()
let counted = Topic<Counted>("counted")
let queue = DispatchQueue(label: "q")

final class Screen {
    func didCount(_ counted: Counted) {}
}
@MainActor final class Panel {
    var title = ""
    var token: Subscription?
    func start(_ center: PostCenter) {
        token = center.subscribe("login", delivery: .mainActor) { [weak self] post in self?.title = post.flag }
    }
}
let screen = Screen()
let tokens = [
    center.subscribe(counted) { $0.value += 1 },
    center.subscribe(counted, delivery: .immediate) { $0.value += 1 },
    center.subscribe(counted, once: true) { $0.value += 1 },
    center.register(counted, observer: screen, selector: Screen.didCount),
    center.subscribe(Topic<Int>("n"), delivery: .queue(queue)) { _ in },
    center.subscribe(Topic<Int>("n"), delivery: .mainActor) { _ in },
    PostCenter.subscribe(counted) { $0.value += 1 },
    center.subscribe(counted, replay: true) { $0.value += 1 },
    center.subscribe(counted, replay: true, once: true) { $0.value += 1 },
    center.register(counted, observer: screen, replay: true, selector: Screen.didCount),
    center.subscribe(Topic<Int>("n"), delivery: .queue(queue), replay: true) { _ in },
    center.subscribe(Topic<Int>("n"), delivery: .mainActor, replay: true) { _ in },
    PostCenter.subscribe(counted, replay: true) { $0.value += 1 },
]
center.post(Topic<Int>("n"), 1, retain: true)
Panel().start(center)
center.post(counted, Counted())
withExtendedLifetime(tokens) {}
