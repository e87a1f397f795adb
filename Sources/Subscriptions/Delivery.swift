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
