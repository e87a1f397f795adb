// expect: Sendable
// Issue 38: a plain subscription delivered on an actor reads a non-Sendable typed payload.
import Subscriptions

/// Not `Sendable`: a mutable class.
final class Draft {
    var text = ""
}

actor Store {
    var last = ""
}

let center = PostCenter()
let store = Store()
let token = center.subscribe("edited", on: store) { store, post in
    store.last = post.payload(as: Draft.self)?.text ?? ""
}
center.post(Topic<Draft>("edited"), Draft())
withExtendedLifetime(token) {}
