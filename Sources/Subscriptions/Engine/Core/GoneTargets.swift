// Registrations whose actor, observer or sender deallocated while their token lives: posts skip
// them, and they tell why in two places.
// - A token's `debugDescription` reads `actor gone`, `observer gone` or `sender gone` instead of
//   `cancelled` (`_Route._goneTarget(_:)`, asked by `Subscription.debugDescription` when the
//   route's own answer is `cancelled`).
// - The first post that reaches such a registration whose actor or observer is gone reports
//   `Diagnostic.subscriberGone` through the center's tracker (`_DeliveryTracker.noteGone`), once
//   per registration, on the posting thread, inside the post, with no lock held. A sender filter
//   whose sender is gone is not reported: dropping a sender is how such a subscription ends.

extension _Route {
    /// What deallocated under `token`'s registration, if it is still in this route, not cancelled
    /// and not a fired one-shot; `nil` otherwise. Loaded references are released after unlocking.
    func _goneTarget(_ token: Subscription) -> String? {
        var keep: [AnyObject] = []
        let gone = stripe.mutex.withLock { _ -> String? in
            guard !detached.load(ordering: .relaxed), let entry = token._entry else { return nil }
            let state = entry.state.load(ordering: .relaxed)
            guard state == _Entry.active || state == _Entry.paused else { return nil }
            return entry.goneTarget(keeping: &keep)
        }
        withExtendedLifetime(keep) {}
        return gone
    }
}

extension _DeliveryTracker {
    /// Reports that a post of `route`'s name found the actor or observer (`subscriber`) of the
    /// registration made at `site` gone; see the comment at the top of this file.
    func noteGone(_ route: _Route, _ subscriber: String, site: UInt16) {
        reporter?._noteSubscriberGone(route.key, subscriber, site: site)
    }
}
