// expect: Sendable
// A queued handler would get the payload on another thread while the poster keeps mutating it.
import Dispatch
import Subscriptions

/// Not `Sendable`: a mutable class.
final class Counted {
    var value = 0
}

let center = PostCenter()
let counted = Topic<Counted>("counted")
let queue = DispatchQueue(label: "q")

let token = center.subscribe(counted, delivery: .queue(queue)) { $0.value += 1 }
withExtendedLifetime(token) {}
