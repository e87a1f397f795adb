// expect: Sendable
// Async sequences hand payloads to the consuming task.
import Dispatch
import Subscriptions

/// Not `Sendable`: a mutable class.
final class Counted {
    var value = 0
}

let center = PostCenter()
let counted = Topic<Counted>("counted")
let queue = DispatchQueue(label: "q")

let posts = center.posts(counted)
withExtendedLifetime(posts) {}
