import Synchronization
internal import _SubscriptionsShims

/// The center's stripes, reachable without reference counting: `owners` keeps them alive, `base`
/// is read on the post path.
struct _Stripes: @unchecked Sendable {
    // @unchecked: `base` points at immutable memory, written once in `init` and freed by the
    // center's deinit; it holds unretained copies of the references in `owners`.
    let owners: [_Stripe]
    let base: UnsafeMutablePointer<Unmanaged<_Stripe>>
    let mask: Int

    init(count: Int, tracker: _DeliveryTracker) {
        precondition(count > 0 && count & (count - 1) == 0)
        owners = (0..<count).map { _ in _Stripe(tracker: tracker) }
        base = .allocate(capacity: count)
        for i in 0..<count { (base + i).initialize(to: .passUnretained(owners[i])) }
        mask = count - 1
    }

    func free() { base.deallocate() }

    @inline(__always)
    subscript(_ hash: UInt) -> Unmanaged<_Stripe> {
        base[Int(truncatingIfNeeded: hash) & mask]
    }
}

/// A center's routes, read under their stripes' locks: lookups and counts for the center, and the
/// detach of every route when the center goes (`PostCenter+Engine.swift` forwards to these).
extension _Stripes {
    /// The route of `key`, for tests: `nil` when the name has none.
    func _route(_ key: _NameKey) -> _Route? {
        self[key.hash]._withUnsafeGuaranteedRef { stripe in
            stripe.mutex.withLock { state in state.table.find(key)?.takeUnretainedValue() }
        }
    }

    /// How many subscriptions the next post of `key` would reach.
    func _reachableCount(_ key: _NameKey) -> Int {
        var keep: [AnyObject] = []
        let n = self[key.hash]._withUnsafeGuaranteedRef { stripe in
            stripe.mutex.withLock { state in
                state.table.find(key)?._withUnsafeGuaranteedRef { $0.lockedReachableCount(keeping: &keep) } ?? 0
            }
        }
        withExtendedLifetime(keep) {}
        return n
    }

    /// Live subscriptions of `key` per call-site id (see `_Route.lockedSiteCounts(keeping:)`).
    func _siteCounts(_ key: _NameKey) -> [UInt16: Int] {
        var keep: [AnyObject] = []
        let counts = self[key.hash]._withUnsafeGuaranteedRef { stripe in
            stripe.mutex.withLock { state -> [UInt16: Int] in
                guard let route = state.table.find(key) else { return [:] }
                return route._withUnsafeGuaranteedRef { $0.lockedSiteCounts(keeping: &keep) }
            }
        }
        withExtendedLifetime(keep) {}
        return counts
    }

    /// Detaches every route: tokens that outlive the center become inactive and harmless. No
    /// post of this center is in progress (the poster would hold a reference), so the tables
    /// are freed at once.
    func _detachAll() {
        for stripe in owners {
            let routes = stripe.mutex.withLock { state -> [_Route] in
                var all: [_Route] = []
                state.table.visitRoutes { route in
                    route._withUnsafeGuaranteedRef { $0.detached.store(true, ordering: .relaxed) }
                    all.append(route.takeRetainedValue())
                }
                state.table.free()
                for item in state.retired {
                    item.table.free()
                    all.append(contentsOf: item.routes)
                }
                state.retired.removeAll()
                state.table = _NameTable.allocate(capacity: 8)
                state.count = 0
                stripe.table.store(state.table.bits, ordering: .releasing)
                return all
            }
            withExtendedLifetime(routes) {}
        }
        free()
    }
}
