// expect: Sendable
// Selector registrations follow the same rule.
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
let screen = Screen()
let token = center.register(counted, observer: screen, delivery: .queue(queue), selector: Screen.didCount)
withExtendedLifetime(token) {}
