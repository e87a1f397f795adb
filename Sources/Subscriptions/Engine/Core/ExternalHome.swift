/// A registration kept outside the center, such as a `NotificationCenter` observer of the
/// `SubscriptionsFoundation` module, which gets a ``Subscription`` token through
/// `Subscription(_external:)`.
///
/// Only modules of this package implement it (`package` access): the implementation must keep
/// the token contract of ``Subscription/cancel()`` (idempotent, thread-safe, waits for handler
/// calls on other threads, returns at once inside the handler, releases the handler before it
/// returns).
package protocol _ExternalRegistration: AnyObject, Sendable {
    /// Ends the registration; see ``Subscription/cancel()``. With `waiting` false (a token's
    /// deinit) it does not wait for calls running on other threads: they complete, and the
    /// handler is released when the last of them ends, on its thread.
    func cancel(waiting: Bool)
    /// Pauses (`true`) or resumes (`false`) the registration.
    func setPaused(_ paused: Bool)
    /// Whether the next delivery would reach the registration.
    var isActive: Bool { get }
    /// What the token is for, for its `debugDescription`, such as `NSSystemTimeZoneDidChange`.
    var debugName: String { get }
}

/// The home of a token whose registration lives outside the center.
final class _ExternalHome: _SubscriptionHome, @unchecked Sendable {
    // @unchecked: the only stored property is immutable and Sendable.
    let registration: any _ExternalRegistration

    init(_ registration: any _ExternalRegistration) {
        self.registration = registration
    }

    override func _cancel(_ token: Subscription) { registration.cancel(waiting: true) }
    override func _drop(_ token: Subscription) { registration.cancel(waiting: false) }
    override func _setPaused(_ paused: Bool, _ token: Subscription) { registration.setPaused(paused) }
    override func _isActive(_ token: Subscription) -> Bool { registration.isActive }
    override func _describe(_ token: Subscription) -> (name: String, site: UInt16, state: String) {
        (registration.debugName, 0, registration.isActive ? "active" : "cancelled")
    }
}

extension Subscription {
    /// A token for a registration kept outside the center (for modules of this package).
    package convenience init(_external registration: any _ExternalRegistration) {
        self.init(home: _ExternalHome(registration), entry: nil)
    }
}
