import Synchronization

// The registration entry points: every public `subscribe`, `register` and `posts` ends in one
// of these, which records the call site, inserts the entry under its name's route and, with
// `replay: true`, hands the name's retained post over under the retained table's lock. Entries
// are built in `EntryFactories.swift`; pattern subscriptions register in
// `Delivery/Patterns/PatternRegistration.swift`.

/// A new entry and how it joins its name: the contract between the factories
/// (`EntryFactories.swift`), which know the options, and `_add(_:to:_:_:_:)`, stated in types.
/// A factory asked for `replay: true` builds an entry that can hand the retained post over, and
/// says which hand-over it takes.
enum _NewEntry<Payload> {
    /// Joins with no retained post (`replay: false`): any entry class, the direct-call ones too.
    case live(_Entry)
    /// Joins after the name's retained post, handed over through `_Replay` (`_addReplaying`).
    case replaying(_OptionsEntry<Payload>)
    /// Joins with the name's retained post in its slot (`_addPacedReplaying`).
    case pacedReplaying(_PacedEntry<Payload>)

    /// `entry`, joining with the retained post when `replay` is set.
    static func options(_ entry: _OptionsEntry<Payload>, replay: Bool) -> _NewEntry {
        replay ? .replaying(entry) : .live(entry)
    }

    /// The paced `entry`, joining with the retained post when `replay` is set.
    static func paced(_ entry: _PacedEntry<Payload>, replay: Bool) -> _NewEntry {
        replay ? .pacedReplaying(entry) : .live(entry)
    }
}

extension PostCenter {
    /// Registers `entry` under `key` and returns its token.
    func _add(_ entry: _Entry, to key: _NameKey, priority: Int = 0) -> Subscription {
        let (token, live) = _insertToken(entry, to: key, priority: priority)
        _noteSubscriptionCount(key, live)
        return token
    }

    /// Registers `entry` under `key`; returns its token, the route it joined (the token's home,
    /// which keeps it alive) and the name's live count. Runs no user code, so it may be called
    /// under another lock (see `_addReplaying`).
    func _insert(_ entry: _Entry, to key: _NameKey, priority: Int = 0) -> (
        token: Subscription, route: _Route, live: Int
    ) {
        let (token, live) = _insertToken(entry, to: key, priority: priority)
        return (token, unsafeDowncast(token._home, to: _Route.self), live)
    }

    /// `_insert` for callers that need no route: borrows the stripe and the route instead of
    /// retaining them (the center owns its stripes, the stripe's table its routes, and the lock
    /// is held), so the token's own reference is the only one taken.
    @inline(__always)
    func _insertToken(_ entry: _Entry, to key: _NameKey, priority: Int = 0) -> (token: Subscription, live: Int) {
        _stripes[key.hash]._withUnsafeGuaranteedRef { stripe in
            stripe.mutex.withLock { state in
                // Borrowed, not retained: the stripe's table holds the route (a new one from
                // `lockedInsert` on), and only the token's `_home` takes a reference of its own.
                let found: Unmanaged<_Route>
                if let existing = state.table.find(key) {
                    found = existing
                } else {
                    let route = _Route(key: key, stripe: stripe)
                    stripe.lockedInsert(route, &state)
                    found = Unmanaged.passUnretained(route)
                }
                return found._withUnsafeGuaranteedRef { route in
                    let token = Subscription(home: route, entry: entry)
                    token._seqWord.store(route.lockedInsert(entry, priority: priority), ordering: .relaxed)
                    return (token, route.live)
                }
            }
        }
    }

    /// Records the call site in `entry`, then registers it under `key`.
    @inline(__always)
    func _add(_ entry: _Entry, to key: _NameKey, _ fileID: String, _ line: Int, _ priority: Int = 0) -> Subscription {
        entry.site = _CallSites.shared.intern(fileID, line)
        return _add(entry, to: key, priority: priority)
    }

    /// Records the call site in the new entry, then registers it under `key` the way the
    /// factory that built it said: live, or replaying the name's retained post first (through
    /// `_Replay`, or through a paced entry's slot).
    func _add<Payload>(
        _ new: _NewEntry<Payload>, to key: _NameKey, _ fileID: String, _ line: Int, _ priority: Int = 0
    ) -> Subscription {
        switch new {
        case .live(let entry):
            return _add(entry, to: key, fileID, line, priority)
        case .replaying(let entry):
            entry.site = _CallSites.shared.intern(fileID, line)
            return _addReplaying(entry, to: key, priority)
        case .pacedReplaying(let entry):
            entry.site = _CallSites.shared.intern(fileID, line)
            return _addPacedReplaying(entry, to: key, priority)
        }
    }

    /// Adds a paced `replay: true` subscription: the retained post (if it is a `Payload` and
    /// passes the sender filter) is the first payload its slot holds, put there before the entry
    /// is published, under the table's lock; the wake-up is armed after unlocking. A retained
    /// post stored before that section and still walking is dropped by the entry (`replayed`);
    /// one stored after reaches it live. Later posts replace a payload that has not been called
    /// yet, exactly as for live posts: the retained post is the first post the pacing sees.
    func _addPacedReplaying<Payload>(
        _ entry: _PacedEntry<Payload>, to key: _NameKey, _ priority: Int
    ) -> Subscription {
        let (token, route, live, delay) = _retained.withLock { table in
            var delay: UInt64?
            if let record = table.records[key.name] {
                entry.replayed = record.version
                if record.matches(entry.targets),
                    !entry.targets.observerGone,
                    let payload = record.payload(as: Payload.self)
                {
                    delay = entry.slot.offer(payload)
                }
            }
            let (token, route, live) = _insert(entry, to: key, priority: priority)
            return (token, route, live, delay)
        }
        _noteSubscriptionCount(key, live)
        if let delay { entry.arm(delay, route) }
        return token
    }

    /// Adds a `replay: true` subscription; see the comment at the top of `Retained.swift` for why
    /// this hand-over is exact.
    func _addReplaying<Payload>(
        _ entry: _OptionsEntry<Payload>, to key: _NameKey, _ priority: Int
    ) -> Subscription {
        entry.replay = _Replay()
        let (token, route, live, record) = _retained.withLock { table in
            let (token, route, live) = _insert(entry, to: key, priority: priority)
            return (token, route, live, table.records[key.name])
        }
        _noteSubscriptionCount(key, live)
        entry.replay?.finish(record, entry: entry, route: route)
        return token
    }

    /// Records the call site in `entry`, then registers it under `key`; with `replay`, the name's
    /// retained post (if it is a `Payload` and passes the sender filter) goes into the mailbox
    /// first.
    ///
    /// Under the retained table's lock, the retained post is read, appended to the mailbox
    /// (which starts the burst, without its task) and the entry is published: live posts that
    /// reach the entry append behind it, and a retained post stored before that section and
    /// still walking reaches the entry only to be dropped (its version is at most `replayed`).
    /// A one-shot that replays is spent before it is published (no live post can claim it), and
    /// leaves its route right after. The task starts after unlocking. See `Retained.swift` for
    /// why this hand-over is exact.
    func _addActor<A, Payload>(
        _ entry: _ActorEntry<A, Payload>, to key: _NameKey, replay: Bool, _ fileID: String, _ line: Int,
        _ priority: Int = 0
    ) -> Subscription {
        entry.site = _CallSites.shared.intern(fileID, line)
        guard replay else { return _add(entry, to: key, priority: priority) }
        let (token, route, live, start, spent) = _retained.withLock { table in
            var start = false
            var spent = false
            if let record = table.records[key.name] {
                entry.replayed = record.version
                if record.matches(entry.targets),
                    let payload = record.payload(as: Payload.self)
                {
                    if entry.once {
                        entry.state.store(_Entry.spent, ordering: .relaxed)
                        spent = true
                    }
                    start = entry.preload(payload)
                }
            }
            let (token, route, live) = _insert(entry, to: key, priority: priority)
            return (token, route, live, start, spent)
        }
        if spent { route._detach(entry) }
        _noteSubscriptionCount(key, live)
        if start { entry.startDraining(route) }
        return token
    }

    /// `_addActor` for a coalescing actor entry: the retained post (if it is a `Payload` and
    /// passes the sender filter) is the first payload its slot holds, so the first call gets it
    /// unless a newer post replaced it meanwhile, exactly as for a live post.
    func _addCoalescingActor<A, Payload>(
        _ entry: _CoalescingActorEntry<A, Payload>, to key: _NameKey, replay: Bool, _ fileID: String, _ line: Int,
        _ priority: Int = 0
    ) -> Subscription {
        entry.site = _CallSites.shared.intern(fileID, line)
        guard replay else { return _add(entry, to: key, priority: priority) }
        let (token, route, live, start) = _retained.withLock { table in
            var start = false
            if let record = table.records[key.name] {
                entry.replayed = record.version
                if record.matches(entry.targets),
                    let payload = record.payload(as: Payload.self)
                {
                    start = entry.slot.offer(payload) != nil
                }
            }
            let (token, route, live) = _insert(entry, to: key, priority: priority)
            return (token, route, live, start)
        }
        _noteSubscriptionCount(key, live)
        if start { entry.start(route) }
        return token
    }
}
