/// The engine side of a token: each kind of registration (names, protocol observers, Foundation
/// observers) subclasses it. The token calls these; they must be thread-safe and idempotent.
class _SubscriptionHome: @unchecked Sendable {
    // @unchecked: the base class has no state; subclasses document their own locking.

    /// Ends the registration of `token`; see ``Subscription/cancel()`` for the contract.
    func _cancel(_ token: Subscription) {}
    /// Ends the registration of `token` without waiting for calls under way (a token's deinit);
    /// by default the same as `_cancel(_:)`.
    func _drop(_ token: Subscription) { _cancel(token) }
    /// Pauses (`true`) or resumes (`false`) the registration of `token`.
    func _setPaused(_ paused: Bool, _ token: Subscription) {}
    /// Whether the next delivery would reach `token`'s registration.
    func _isActive(_ token: Subscription) -> Bool { false }
    /// What `token` is for (a name, a protocol), its call-site id (`_CallSites`, 0 when unknown)
    /// and its state (`active`, `paused` or `cancelled`), for its `debugDescription`. Each home
    /// answers for its own kind of registration; this default knows only `_isActive(_:)`.
    func _describe(_ token: Subscription) -> (name: String, site: UInt16, state: String) {
        ("?", 0, _isActive(token) ? "active" : "cancelled")
    }
}
