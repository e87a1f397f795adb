/// What `PostCenter.removeObserver(_:)` needs from selector registrations: the identity of the
/// observer they call, read without loading the observer.
protocol _ObserverHolding: AnyObject {
    /// The identity of a selector registration's observer at registration; `nil` for other
    /// registrations.
    var _observerID: ObjectIdentifier? { get }
}

extension _OptionsEntry: _ObserverHolding {
    var _observerID: ObjectIdentifier? { targets.observerID }
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
    func lockedRemoveObserver(_ id: ObjectIdentifier, _ state: inout _StripeState) {
        guard !detached.load(ordering: .relaxed) else { return }
        var i = 0
        // `lockedDetach` may publish a compacted buffer: read `buffer` afresh at every step, and
        // step past a slot only when it was not squeezed away.
        while i < buffer.count {
            let bits = buffer.slot(i)
            i += 1
            guard bits != 0 else { continue }
            let entry = _SlotBuffer.entry(bits).takeUnretainedValue()
            guard let holder = entry as? _ObserverHolding, holder._observerID == id else { continue }
            let phase = entry.state.load(ordering: .relaxed)
            guard phase == _Entry.active || phase == _Entry.paused else { continue }
            entry.state.store(_Entry.cancelled, ordering: .relaxed)
            let before = buffer.bits
            lockedDetach(entry, &state)
            if buffer.bits != before { i = 0 }  // compacted: start over (finds only live entries)
        }
    }
}

extension PostCenter {
    /// Ends the selector registrations of `observer` on every name; see `removeObserver(_:)`.
    /// - Complexity: O(subscriptions in the center).
    func _removeSelectorRegistrations(of observer: AnyObject) {
        let id = ObjectIdentifier(observer)
        for stripe in _stripes.owners {
            stripe.mutex.withLock { state in
                var routes: [_Route] = []
                state.table.forEachRoute { routes.append($0) }
                for route in routes { route.lockedRemoveObserver(id, &state) }
            }
        }
    }
}
