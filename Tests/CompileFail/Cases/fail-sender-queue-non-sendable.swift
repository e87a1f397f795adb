// expect: Sendable
// Sender-filtered subscriptions follow the same rule.
import Dispatch
import Subscriptions

/// Not `Sendable`: a mutable class.
final class Counted {
    var value = 0
}

let center = PostCenter()
let counted = Topic<Counted>("counted")
let queue = DispatchQueue(label: "q")

final class Sender: Sendable {}
let sender = Sender()
let token = center.subscribe(counted, from: sender, delivery: .queue(queue)) { $0.value += 1 }
withExtendedLifetime(token) {}
