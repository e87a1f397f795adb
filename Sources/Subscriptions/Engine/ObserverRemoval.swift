/// What `PostCenter.removeObserver(_:)` needs from selector registrations: the identity of the
/// observer they call, read without loading the observer.
protocol _ObserverHolding: AnyObject {
    /// The identity of a selector registration's observer at registration; `nil` for other
    /// registrations.
    var _observerID: ObjectIdentifier? { get }
}

extension _Slow: _ObserverHolding {
    var _observerID: ObjectIdentifier? { observerID }
}

extension _Route {
    /// Ends every selector registration of the observer `id`: each is marked cancelled (posts
    /// and queued deliveries skip it from now on, its token reports inactive) and leaves the
    /// slot array. The entry itself stays owned by its token, which releases it as usual.
    ///
    /// No observer is loaded: loading one would retain it, and a thread dropping its last
    /// reference to an unrelated observer meanwhile would see it outlive its owner and have its
    /// deinit run here. A dead observer whose address `id` now names is matched too, which is
    /// harmless: its registration is garbage either way.
    /// - Complexity: O(slots of the route).
    func lockedRemoveObserver(_ id: ObjectIdentifier) {
        guard !detached else { return }
        for i in 0..<count {
            let bits = slots[i].load(ordering: .relaxed)
            guard bits != 0 else { continue }
            let entry = _Route.entry(bits).takeUnretainedValue()
            guard let holder = entry as? _ObserverHolding, holder._observerID == id else { continue }
            let state = entry.state.load(ordering: .relaxed)
            guard state == _Entry.active || state == _Entry.paused else { continue }
            entry.state.store(_Entry.cancelled, ordering: .relaxed)
            lockedDetach(entry)
        }
    }
}

extension PostCenter {
    /// Ends the selector registrations of `observer` on every name; see `removeObserver(_:)`.
    /// - Complexity: O(subscriptions in the center).
    func _removeSelectorRegistrations(of observer: AnyObject) {
        let id = ObjectIdentifier(observer)
        for stripe in _stripes.owners {
            stripe.mutex.withLock { routes in
                routes.forEachRoute { $0.lockedRemoveObserver(id) }
            }
        }
    }
}
