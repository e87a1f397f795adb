/// What `PostCenter.removeObserver(_:)` needs from selector registrations: the observer they
/// call, if it is still alive.
protocol _ObserverHolding: AnyObject {
    /// The observer of a selector registration (a strong reference, loaded from the weak one);
    /// `nil` for other registrations and once the observer deallocated.
    var _observedObject: AnyObject? { get }
}

extension _Slow: _ObserverHolding {
    var _observedObject: AnyObject? { observed ? observer : nil }
}

extension _Route {
    /// Ends every selector registration of the observer `id`: each is marked cancelled (posts
    /// and queued deliveries skip it from now on, its token reports inactive) and leaves the
    /// slot array. The entry itself stays owned by its token, which releases it as usual.
    /// Loaded observers go to `keep`, to be released after unlocking.
    /// - Complexity: O(slots of the route).
    func lockedRemoveObserver(_ id: ObjectIdentifier, keeping keep: inout [AnyObject]) {
        guard !detached else { return }
        for i in 0..<count {
            let bits = slots[i].load(ordering: .relaxed)
            guard bits != 0 else { continue }
            let entry = _Route.entry(bits).takeUnretainedValue()
            guard let holder = entry as? _ObserverHolding, let observer = holder._observedObject else { continue }
            keep.append(observer)
            guard ObjectIdentifier(observer) == id else { continue }
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
        var keep: [AnyObject] = []
        for stripe in _stripes.owners {
            stripe.mutex.withLock { routes in
                routes.forEachRoute { $0.lockedRemoveObserver(id, keeping: &keep) }
            }
        }
        withExtendedLifetime(keep) {}
    }
}
