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

extension PostCenter {
    /// Registers `entry` under `key` and returns its token.
    func _add(_ entry: _Entry, to key: _NameKey) -> Subscription {
        let (token, live) = _insert(entry, to: key)
        if _diagnosing.load(ordering: .relaxed) { _checkCount(key, live) }
        return token
    }

    /// Registers `entry` under `key`; returns its token and the name's live count. Runs no user
    /// code, so it may be called under another lock (see `_addReplaying`).
    func _insert(_ entry: _Entry, to key: _NameKey) -> (Subscription, Int) {
        let stripe = _stripes[key.hash].takeUnretainedValue()
        return stripe.mutex.withLock { routes in
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
    }

    /// Finds the route of `key` and links a frame for a post on it; `nil` when nobody listens.
    @inline(__always)
    func _beginPost(_ key: _NameKey, _ thread: UInt, _ cell: UnsafePointer<_FrameCell>) -> _PostStart? {
        let start = _stripes[key.hash]._withUnsafeGuaranteedRef { stripe in
            stripe.mutex.withLock { routes -> _PostStart? in
                guard let route = routes.find(key) else { return nil }
                return route._withUnsafeGuaranteedRef { $0.lockedBeginPost(thread, cell) }
            }
        }
        if let start, start.outer > 0 { _checkNesting(key, start.outer) }
        return start
    }

    /// Unlinks the post's frame and releases what the route let go of meanwhile.
    @inline(__always)
    func _endPost(_ start: _PostStart, _ thread: UInt) {
        let garbage = start.route._withUnsafeGuaranteedRef { route in
            route.stripe.mutex.withLock { routes in
                route.lockedEndPost(start.ticket, thread, &routes)
            }
        }
        garbage?.dispose()
    }

    /// Walks the slots the post saw, without any lock.
    ///
    /// Entries whose class is `direct` (an immediate handler of exactly the posted payload type)
    /// are called through `call`: no cast, no virtual call, no reference counting. Every other
    /// entry gets the envelope through its `deliver` method, which casts and filters as needed.
    @inline(__always)
    func _walk(
        _ start: _PostStart, direct: ObjectIdentifier, sender: AnyObject?,
        call: (_Entry) -> Void, envelope: () -> PostObject
    ) -> Int {
        var delivered = 0
        let slots = start.slots
        let progress = start.cell
        for i in 0..<start.count {
            // Publish the slot before reading it; see `_Route` ("Progress").
            progress.pointee.progress.store(i, ordering: .releasing)
            _subscriptions_compiler_fence()
            let bits = slots[i].load(ordering: .relaxed)
            if bits == 0 { continue }
            _Route.entry(bits)._withUnsafeGuaranteedRef { entry in
                guard entry.state.load(ordering: .relaxed) == _Entry.active else { return }
                if ObjectIdentifier(type(of: entry)) == direct {
                    call(entry)
                    delivered += 1
                } else if entry.deliver(envelope(), sender: sender, route: start.route.takeUnretainedValue()) {
                    delivered += 1
                }
            }
        }
        return delivered
    }

    /// Runs `body` inside a post's frame on the route of `key`: links the frame, lets `body`
    /// walk the slots, unlinks it. Returns 0 without calling `body` when nobody listens.
    @inline(__always)
    func _inPostFrame(_ key: _NameKey, _ body: (_PostStart) -> Int) -> Int {
        _withFrameCell { cell in
            let thread = _currentThreadID()
            guard let start = _beginPost(key, thread, cell) else { return 0 }
            let delivered = body(start)
            _endPost(start, thread)
            return delivered
        }
    }

    /// A typed post. Plain subscribers get an envelope made once, when the first one is reached.
    @inline(__always)
    func _post<Payload>(_ key: _NameKey, _ payload: Payload, direct: ObjectIdentifier, sender: AnyObject?) -> Int {
        if Payload.self == PostObject.self {
            let object = unsafeDowncast(payload as AnyObject, to: PostObject.self)
            return _post(key, sender: sender) { object }
        }
        return _inPostFrame(key) { start in
            var made: PostObject?
            return _walk(
                start, direct: direct, sender: sender,
                call: { unsafeDowncast($0, to: _Handler<Payload>.self).handler(payload) },
                envelope: {
                    if let made { return made }
                    let object = PostObject(_typed: payload)
                    made = object
                    return object
                })
        }
    }

    /// A plain post. `makeEnvelope` runs only when somebody listens to the name.
    @inline(__always)
    func _post(_ key: _NameKey, sender: AnyObject?, makeEnvelope: () -> PostObject) -> Int {
        _inPostFrame(key) { start in
            let object = makeEnvelope()
            return _walk(
                start, direct: ObjectIdentifier(_EnvelopeHandler.self), sender: sender,
                call: { unsafeDowncast($0, to: _EnvelopeHandler.self).handler(object) },
                envelope: { object })
        }
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

/// Runs `body` with a `_FrameCell` on the stack: a post's or queued call's published progress,
/// valid for exactly as long as its frame can be linked.
@inline(__always)
func _withFrameCell<R>(_ body: (UnsafePointer<_FrameCell>) -> R) -> R {
    withUnsafeTemporaryAllocation(of: _FrameCell.self, capacity: 1) { buffer in
        let cell = buffer.baseAddress.unsafelyUnwrapped
        cell.initialize(to: _FrameCell())
        defer { cell.deinitialize(count: 1) }
        return body(cell)
    }
}

/// Whether this process can run the process-wide fence that makes `cancel()` wait only for
/// deliveries calling the cancelled handler (see `_Route`). For tests and diagnostics.
func _processFenceAvailable() -> Bool {
    _subscriptions_process_fence() == 1
}
