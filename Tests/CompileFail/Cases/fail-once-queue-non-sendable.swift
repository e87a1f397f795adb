// expect: Sendable
// One-shot subscriptions follow the same rule.
import Dispatch
import Subscriptions

/// Not `Sendable`: a mutable class.
final class Counted {
    var value = 0
}

let center = PostCenter()
let counted = Topic<Counted>("counted")
let queue = DispatchQueue(label: "q")

let token = center.subscribe(counted, delivery: .queue(queue), once: true) { $0.value += 1 }
withExtendedLifetime(token) {}
