import Synchronization
internal import _SubscriptionsShims

/// A lock and the routes whose names hash to it. A center has several stripes so that
/// subscribes and cancels of different names rarely meet on a lock. Posts take no lock: they
/// read the published `table`, holding it in their thread record while they use it.
final class _Stripe: Sendable {
    let mutex: _PlatformMutex<_StripeState>
    /// The address of the current `_NameTable`.
    let table: Atomic<UInt>
    /// The center's tracker, through which a route reports a handler that threw (its
    /// `reporter` is the center, held weakly). Read only on that cold path.
    let tracker: _DeliveryTracker
    /// Keeps stripes allocated one after another on different cache lines.
    private let _padding: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)

    init(tracker: _DeliveryTracker) {
        self.tracker = tracker
        let initial = _NameTable.allocate(capacity: 8)
        mutex = _PlatformMutex(_StripeState(table: initial))
        table = Atomic(initial.bits)
    }

    deinit {
        // The center is gone (`_detachAll` emptied the table): no post reads it.
        mutex.withLock { state in
            state.table.free()
            for item in state.retired { item.table.free() }
        }
    }

    /// Adds `route` to the table (the caller holds the lock): in place, or in a bigger copy.
    func lockedInsert(_ route: _Route, _ state: inout _StripeState) {
        if (state.count + 1) * 2 > state.table.capacity {
            lockedRebuild(&state, capacity: state.table.capacity * 2)
        }
        state.table.place(Unmanaged.passRetained(route))
        state.count += 1
    }

    /// Notes that a route became empty; drops the empty routes once they are as many as the
    /// others (amortised O(1) per emptied route).
    func lockedNoteEmpty(_ state: inout _StripeState) {
        state.emptied += 1
        if state.emptied >= max(8, state.count / 2) { lockedRebuild(&state, capacity: nil) }
    }

    /// Publishes a new table holding the routes that still have subscriptions (all of them when
    /// `capacity` is given), and retires the old one with the routes it alone holds.
    private func lockedRebuild(_ state: inout _StripeState, capacity: Int?) {
        var keep: [Unmanaged<_Route>] = []
        var drop: [_Route] = []
        state.table.visitRoutes { route in
            if capacity != nil || route._withUnsafeGuaranteedRef({ $0.live > 0 }) {
                keep.append(route)
            } else {
                drop.append(route.takeRetainedValue())
            }
        }
        var size = capacity ?? 8
        while (keep.count + 1) * 2 > size { size *= 2 }
        let fresh = _NameTable.allocate(capacity: size)
        for route in keep { fresh.place(route) }
        table.store(fresh.bits, ordering: .releasing)
        state.retired.append((state.table, drop))
        state.table = fresh
        state.count = keep.count
        state.emptied = 0
    }

    /// Frees the retired tables that no post reads any more. Returns the routes that no post can
    /// reach any more, to be released after unlocking.
    ///
    /// A route dropped by a rebuild is held by the table that rebuild retired, but a post may
    /// reach it through an *older* retired table too (growth copies every route into the new
    /// table, so the route is in every table since it was inserted), and a post walking the route
    /// reads its slot buffer, which the route's deinit frees. So the routes of a freed table go
    /// to the newest older table still read, and are released only with the oldest read table.
    /// (A post reads only the current table: a retired table that nobody reads after the fence
    /// is never read again.) Inlined for the common case, nothing retired, which every
    /// `cancel()` asks about: `nil` then, so that the caller has no empty array to release.
    @inline(__always)
    func lockedReclaim(_ state: inout _StripeState) -> [_Route]? {
        state.retired.isEmpty ? nil : lockedReclaimRetired(&state)
    }

    /// `lockedReclaim` when some tables are retired.
    private func lockedReclaimRetired(_ state: inout _StripeState) -> [_Route] {
        var released: [_Route] = []
        var kept: [(table: _NameTable, routes: [_Route])] = []
        let onlyThread = _ThreadRecord.onlyThread
        let section = _Fence.beginHeavy(onlyThread: onlyThread)
        for item in state.retired {
            if _ThreadRecord.anyReads(item.table.bits, onlyThread: onlyThread) {
                kept.append(item)
                continue
            }
            item.table.free()
            if kept.isEmpty {
                released.append(contentsOf: item.routes)
            } else {
                kept[kept.count - 1].routes.append(contentsOf: item.routes)
            }
        }
        _Fence.endHeavy(section)
        state.retired = kept
        return released
    }
}
