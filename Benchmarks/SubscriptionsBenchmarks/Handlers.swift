import Foundation
import Subscriptions

// Every contender's handler has the same body, `counter += value` (or `+= 1` when the post
// carries no number), reached through the captured pointer of one `Counter`:
//
//     { _ in counter.pointer.pointee &+= 1 }          PostCenter plain, NotificationCenter
//     { value in counter.pointer.pointee &+= value }  PostCenter typed, the bare closure loop
//
// The closures are written as literals where they are handed over (see Contenders.swift), as
// user code writes them: a literal passed to a generic parameter, or appended to an array of
// closures, is emitted in the form the receiver stores, while a closure made elsewhere and
// converted would get a reabstraction thunk (a second allocation, and a second indirect call on
// every invocation) that users do not pay. Each evaluation of a literal inside a loop allocates
// its own context, so every subscription has its own, as when each subscriber captures its own
// state.

/// The object posts carry as their sender/data, like `post(name:object: self)`.
final class Sender {}

/// A value the optimiser cannot see through: 1 unless someone passes a thousand arguments.
let postedValue = CommandLine.arguments.count > 1_000 ? 2 : 1

/// A handler closure stored at its own type, so that storing it adds no thunk: what
/// ``makeHandlerContexts(_:_:into:)`` keeps to measure the size of one closure context.
struct HandlerBox {
    let handler: @Sendable (PostObject) -> Void
}
