import Foundation
import Subscriptions

// The timed loops. Each is `@inline(never)` and takes its inputs as parameters, so the compiler
// cannot specialise a loop for the values of one benchmark, hoist the post out of it, or fold it
// away. Each returns what the library reported as delivered, which the caller checks too.

@inline(never)
func postTyped(_ center: PostCenter, _ topic: Topic<Int>, _ value: Int, _ iterations: Int) -> Int {
    var delivered = 0
    for _ in 0..<iterations { delivered &+= center.post(topic, value) }
    return delivered
}

/// A plain post made the idiomatic way: a new `PostObject` per post, like
/// `NotificationCenter.post(name:object:)` makes a new `Notification`.
@inline(never)
func postPlain(_ center: PostCenter, _ name: String, _ sender: AnyObject?, _ iterations: Int) -> Int {
    var delivered = 0
    for _ in 0..<iterations { delivered &+= center.post(name, flag: "", data: sender) }
    return delivered
}

/// A plain post of one envelope made once, outside the loop.
@inline(never)
func postEnvelope(_ center: PostCenter, _ name: String, _ envelope: PostObject, _ iterations: Int) -> Int {
    var delivered = 0
    for _ in 0..<iterations { delivered &+= center.post(name, envelope) }
    return delivered
}

@inline(never)
func postNotification(_ center: NotificationCenter, _ name: Notification.Name, _ sender: AnyObject?, _ iterations: Int)
{
    for _ in 0..<iterations { center.post(name: name, object: sender) }
}

/// The floor: call every closure of an array, as a hand-written observer list would.
@inline(never)
func callClosures(_ closures: [(Int) -> Void], _ value: Int, _ iterations: Int) -> Int {
    for _ in 0..<iterations {
        for closure in closures { closure(value) }
    }
    return iterations &* closures.count
}

/// A closure in an object of its own, for the loop without reference counting.
final class ClosureBox {
    let call: (Int) -> Void
    init(_ call: @escaping (Int) -> Void) { self.call = call }
}

/// The floor without reference counting (issue 37's): the same closures, each in an object
/// (`ClosureBox`) reached through an unretained reference and called borrowed, none retained or
/// released (`boxes` keeps them alive). Each call loads the box, then its closure, as our walk
/// loads an entry, then its handler.
@inline(never)
func callClosuresBorrowed(_ boxes: UnsafeBufferPointer<Unmanaged<ClosureBox>>, _ value: Int, _ iterations: Int)
    -> Int
{
    for _ in 0..<iterations {
        for box in boxes { box._withUnsafeGuaranteedRef { $0.call(value) } }
    }
    return iterations &* boxes.count
}

@inline(never)
func subscribeAndCancel(_ center: PostCenter, _ name: String, _ counter: Counter, _ iterations: Int) {
    for _ in 0..<iterations {
        let token = center.subscribe(name) { _ in counter.pointer.pointee &+= 1 }
        token.cancel()
    }
}

/// `subscribeAndCancel` at `priority`.
@inline(never)
func subscribeAndCancel(
    _ center: PostCenter, _ name: String, _ counter: Counter, priority: Int, _ iterations: Int
) {
    for _ in 0..<iterations {
        let token = center.subscribe(name, priority: priority) { _ in counter.pointer.pointee &+= 1 }
        token.cancel()
    }
}

@inline(never)
func observeAndRemove(_ center: NotificationCenter, _ name: Notification.Name, _ counter: Counter, _ iterations: Int) {
    for _ in 0..<iterations {
        let observer = center.addObserver(forName: name, object: nil, queue: nil) { _ in counter.pointer.pointee &+= 1 }
        center.removeObserver(observer)
    }
}

/// Subscribes `count` plain handlers to `name`, each with its own closure context.
@inline(never)
func subscribeMany(
    _ center: PostCenter, _ name: String, _ counter: Counter, _ count: Int, into tokens: inout [Subscription]
) {
    for _ in 0..<count {
        tokens.append(center.subscribe(name) { _ in counter.pointer.pointee &+= 1 })
    }
}

/// Subscribes `count` typed handlers to `topic`, each with its own closure context.
@inline(never)
func subscribeManyTyped(
    _ center: PostCenter, _ topic: Topic<Int>, _ counter: Counter, _ count: Int, into tokens: inout [Subscription]
) {
    for _ in 0..<count {
        tokens.append(center.subscribe(topic) { value in counter.pointer.pointee &+= value })
    }
}

/// Adds `count` block observers of `name`, each with its own closure context.
@inline(never)
func observeMany(
    _ center: NotificationCenter, _ name: Notification.Name, _ counter: Counter, _ count: Int,
    into observers: inout [NSObjectProtocol]
) {
    for _ in 0..<count {
        observers.append(
            center.addObserver(forName: name, object: nil, queue: nil) { _ in counter.pointer.pointee &+= 1 })
    }
}

/// Appends `count` closures for the bare loop, each with its own closure context.
@inline(never)
func appendClosures(_ counter: Counter, _ count: Int, into closures: inout [(Int) -> Void]) {
    for _ in 0..<count {
        closures.append { value in counter.pointer.pointee &+= value }
    }
}

/// Makes `count` closures exactly like the plain and NotificationCenter handlers, stored without
/// a thunk: their heap cost is the closure contexts alone.
@inline(never)
func makeHandlerContexts(_ counter: Counter, _ count: Int, into boxes: inout [HandlerBox]) {
    for _ in 0..<count {
        boxes.append(HandlerBox { _ in counter.pointer.pointee &+= 1 })
    }
}

/// A permutation of `0..<count` that scatters cancellations over the whole range: `i * stride`
/// modulo `count`, for a stride coprime with `count`.
func scatteredOrder(_ count: Int) -> [Int] {
    func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
    var stride = 7_919
    while gcd(stride, count) != 1 { stride += 1 }
    return (0..<count).map { ($0 &* stride) % count }
}
