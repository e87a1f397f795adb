import Synchronization

/// The center's stripes, reachable without reference counting: `owners` keeps them alive, `base`
/// is read on the post path.
struct _Stripes: @unchecked Sendable {
    // @unchecked: `base` points at immutable memory, written once in `init` and freed by the
    // center's deinit; it holds unretained copies of the references in `owners`.
    let owners: [_Stripe]
    let base: UnsafeMutablePointer<Unmanaged<_Stripe>>
    let mask: Int

    init(count: Int) {
        precondition(count > 0 && count & (count - 1) == 0)
        owners = (0..<count).map { _ in _Stripe() }
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

/// The `_Handler` class that plain posts call directly.
let _plainDirect = ObjectIdentifier(_Handler<PostObject>.self)

extension PostCenter {
    /// Registers `entry` under `key` and returns its token.
    func _add(_ entry: _Entry, to key: _NameKey) -> Subscription {
        let stripe = _stripes[key.hash].takeUnretainedValue()
        let (token, live) = stripe.mutex.withLock { routes in
            let route: _Route
            if let existing = routes.find(key) {
                route = existing.takeUnretainedValue()
            } else {
                route = _Route(key: key, stripe: stripe)
                routes.insert(route)
            }
            route.lockedAppend(entry)
            return (Subscription(home: route, entry: entry), route.live)
        }
        if _diagnosing.load(ordering: .relaxed) { _checkCount(key, live) }
        return token
    }

    /// The hot path shared by plain and typed posts.
    ///
    /// Entries whose class is `direct` (immediate `_Handler<Payload>`, exactly this payload type)
    /// are called directly: no cast, no virtual call, no reference counting. Every other entry
    /// gets an envelope (the given one, or one made once per post for a typed payload) through
    /// its `deliver` method, which casts as needed.
    @inline(__always)
    func _post<Payload>(
        _ key: _NameKey, _ payload: Payload, envelope: PostObject?, direct: ObjectIdentifier,
        sender: AnyObject? = nil
    ) -> Int {
        let thread = _currentThreadID()
        let start = _stripes[key.hash]._withUnsafeGuaranteedRef { stripe in
            stripe.mutex.withLock { routes -> _PostStart? in
                guard let route = routes.find(key) else { return nil }
                return route._withUnsafeGuaranteedRef { $0.lockedBeginPost(thread) }
            }
        }
        guard let start else { return 0 }
        if start.outer > 0 { _checkNesting(key, start.outer) }

        var envelope = envelope
        var delivered = 0
        let slots = start.slots
        for i in 0..<start.count {
            let bits = slots[i].load(ordering: .relaxed)
            if bits == 0 { continue }
            _Route.entry(bits)._withUnsafeGuaranteedRef { entry in
                guard entry.state.load(ordering: .relaxed) == _Entry.active else { return }
                if ObjectIdentifier(type(of: entry)) == direct {
                    unsafeDowncast(entry, to: _Handler<Payload>.self).handler(payload)
                    delivered += 1
                } else {
                    let post: PostObject
                    if let envelope {
                        post = envelope
                    } else {
                        post = PostObject(_typed: payload)
                        envelope = post
                    }
                    if entry.deliver(post, sender: sender, route: start.route.takeUnretainedValue()) { delivered += 1 }
                }
            }
        }

        let garbage = start.route._withUnsafeGuaranteedRef { route in
            route.stripe.mutex.withLock { routes in
                route.lockedEndPost(start.ticket, thread, &routes)
            }
        }
        garbage?.dispose()
        return delivered
    }

    /// How many subscriptions the next post of `key` would reach.
    func _reachableCount(_ key: _NameKey) -> Int {
        var keep: [AnyObject] = []
        let n = _stripes[key.hash]._withUnsafeGuaranteedRef { stripe in
            stripe.mutex.withLock { routes in
                routes.find(key)?._withUnsafeGuaranteedRef { $0.lockedReachableCount(keeping: &keep) } ?? 0
            }
        }
        withExtendedLifetime(keep) {}
        return n
    }

    /// Detaches every route: tokens that outlive the center become inactive and harmless.
    func _detachAll() {
        for stripe in _stripes.owners {
            let routes = stripe.mutex.withLock { routes -> [_Route] in
                let all = routes.removeAll()
                for route in all { route.detached = true }
                return all
            }
            withExtendedLifetime(routes) {}
        }
        _stripes.free()
    }
}
