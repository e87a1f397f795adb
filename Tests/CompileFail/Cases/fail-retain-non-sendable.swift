// expect: Sendable
// A retained payload is kept by the center and replayed to later subscribers on their threads and
// queues, so it must be `Sendable` even when posted with immediate subscribers only.
import Subscriptions

/// Not `Sendable`: a mutable class.
final class Counted {
    var value = 0
}

let center = PostCenter()
let counted = Topic<Counted>("counted")

center.post(counted, Counted(), retain: true)
