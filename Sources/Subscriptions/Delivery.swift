import Dispatch

/// Where and when a subscription's handler runs: `delivery: .immediate`, `.queue(q)` or
/// `.mainActor`.
///
/// - ``immediate``: on the posting thread, before `post` returns, in subscription order. The
///   payload never crosses a thread, so any payload type is accepted.
/// - ``queue(_:)``: asynchronously on the given queue, never blocking the poster. On a serial
///   queue handlers run in post order.
/// - ``mainActor``: on the main actor; synchronously when posted on the main thread, else
///   scheduled on the main queue.
///
/// **Crossing threads requires `Sendable`.** Queued and main-actor deliveries hand the payload
/// to another thread while the poster goes on, so they take only topics whose `Payload` is
/// `Sendable`; `subscribe(topic, delivery: .queue(q))` with a non-`Sendable` payload does not
/// compile ("type … does not conform to the 'Sendable' protocol"). Immediate delivery, the
/// default, accepts every payload.
///
/// A `@MainActor` handler (or a method of a `@MainActor` class) needs `delivery: .mainActor`;
/// without it the compiler reports that the conversion "loses global actor 'MainActor'".
///
/// - Threading: a value, safe to share across threads.
public enum Delivery: Sendable {
    /// Runs the handler on the posting thread before `post` returns.
    case immediate
    /// Runs the handler asynchronously on `queue`.
    ///
    /// A delivery still waiting in the queue when its subscription is cancelled, paused or its
    /// observer deallocates is dropped, never run. `post` does not wait for the queue.
    case queue(DispatchQueue)
    /// Runs the handler on the main actor; see ``MainActorDelivery`` for the rules.
    ///
    /// As a `Delivery` value (for example one stored in a variable), it runs a `@Sendable`
    /// handler on the main actor. Written as the literal `delivery: .mainActor`, the overloads
    /// that take a `@MainActor` handler are chosen, so the handler may touch main-actor state.
    case mainActor
    /// The handler runs as `base` delivers, but paced: coalesced, throttled or debounced. Written
    /// `.queue(q).coalesced`, `.mainActor.throttled(.milliseconds(100))`, and so on; see
    /// ``Pacing`` for the rules. `base` is `.queue(q)` or `.mainActor` (subscribing with a paced
    /// `.immediate` traps: a paced call runs later, so it needs a queue).
    indirect case paced(Delivery, Pacing)
}

/// The one delivery that takes any payload, `Sendable` or not: ``immediate``, the default.
///
/// It is the type of `delivery:` in the overloads of `subscribe` and `register` whose topic's
/// `Payload` need not be `Sendable`. You never name it: write `delivery: .immediate` or leave the
/// argument out.
///
/// - Threading: a value, safe to share across threads.
public enum ImmediateDelivery: Sendable {
    /// Runs the handler on the posting thread before `post` returns.
    case immediate
}

/// Delivery on the main actor, for handlers that are `@MainActor`.
///
/// It is the type of `delivery:` in the overloads that take `@MainActor` handlers; you write it
/// as `delivery: .mainActor`, the same spelling as ``Delivery/mainActor``. Every method that
/// takes a delivery takes it: `subscribe` (with any `from:`, `replay:` or `once:`) and `register`.
///
/// ```swift
/// @MainActor final class LoginScreen {
///     var token: Subscription?
///     func start(_ center: PostCenter) {
///         token = center.subscribe("login", delivery: .mainActor) { [weak self] post in
///             self?.title = post.flag          // main-actor state, no `nonisolated` tricks
///         }
///     }
/// }
/// ```
///
/// Posted on the main thread, such handlers run synchronously, in subscription order, before
/// `post` returns. Posted on any other thread, they are scheduled on the main queue, in post
/// order, and `post` does not wait: a burst of posts costs one main-queue job for all of the
/// center's main-actor handlers, not one per handler. A scheduled delivery whose subscription is cancelled or
/// paused before it runs is dropped. The payload crosses to the main thread, so a topic's
/// `Payload` must be `Sendable`.
///
/// > Warning: A selector registration of a `@MainActor` observer *without*
/// > `delivery: .mainActor` compiles: an unapplied method reference such as `Screen.didLogin`
/// > loses its actor isolation, so the compiler cannot tell. A post from another thread would
/// > then call the method off the main actor. Write
/// > `center.register("login", observer: self, delivery: .mainActor, selector: Screen.didLogin)`.
///
/// - Threading: a value, safe to share across threads.
public enum MainActorDelivery: Sendable {
    /// Runs the handler on the main actor.
    case mainActor
    /// Runs the handler on the main actor, paced: `.mainActor.coalesced`,
    /// `.mainActor.throttled(_:)`, `.mainActor.debounced(_:)`; see ``Pacing``.
    case paced(Pacing)
}

extension Delivery {
    var _executor: _Executor {
        switch self {
        case .immediate: return .immediate
        case .queue(let queue): return .queue(queue)
        case .mainActor: return .mainActor
        case .paced(let base, _): return base._executor
        }
    }
}
