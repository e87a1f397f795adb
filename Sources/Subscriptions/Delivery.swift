import Dispatch

/// Where and when a subscription's handler runs.
///
/// - ``immediate``: on the posting thread, before `post` returns, in subscription order.
/// - ``queue(_:)``: asynchronously on the given queue, never blocking the poster. On a serial
///   queue handlers run in post order.
public enum Delivery: Sendable {
    /// Runs the handler on the posting thread before `post` returns.
    case immediate
    /// Runs the handler asynchronously on `queue`.
    ///
    /// A delivery still waiting in the queue when its subscription is cancelled, paused or its
    /// observer deallocates is dropped, never run. `post` does not wait for the queue.
    case queue(DispatchQueue)
}

/// Delivery on the main actor, for handlers that are `@MainActor`.
///
/// Pass it as the `delivery:` of the `@MainActor` overloads of `subscribe` and `register`:
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
/// order, and `post` does not wait. A scheduled delivery whose subscription is cancelled or
/// paused before it runs is dropped.
public enum MainActorDelivery: Sendable {
    /// Runs the handler on the main actor.
    case mainActor
}
