import Synchronization

// Pattern subscriptions' registration: the entry joins the pattern's route and, with `replay`,
// gets every retained post whose name the pattern matches (see `Patterns.swift` for the routes).

extension PostCenter {
    /// Records the call site in the new entry and registers it under the route of `pattern`
    /// (`key`), replaying first, when the factory built it to replay, every retained post whose
    /// name `pattern` matches, in the order they were retained (a paced entry: the newest of them,
    /// the one its pacing would keep). The hand-over is that of a name (see `Retained.swift`),
    /// with the last version stored in the section as the replayed version: every retained post
    /// stored before the section was either replayed or replaced by one that was, and is dropped
    /// if its walk reaches the entry; every one stored after reaches it live.
    func _addPattern(
        _ new: _NewEntry<_NamedPost>, _ pattern: NamePattern, _ key: _NameKey, _ fileID: String, _ line: Int,
        _ priority: Int
    ) -> Subscription {
        switch new {
        case .live(let entry):
            return _add(entry, to: key, fileID, line, priority)
        case .replaying(let entry):
            entry.site = _CallSites.shared.intern(fileID, line)
            return _addPatternReplaying(entry, pattern, key, priority)
        case .pacedReplaying(let entry):
            entry.site = _CallSites.shared.intern(fileID, line)
            return _addPatternPacedReplaying(entry, pattern, key, priority)
        }
    }

    /// `_addPattern` for a paced entry: the newest matching retained post is the first payload
    /// its slot holds.
    private func _addPatternPacedReplaying(
        _ paced: _PacedEntry<_NamedPost>, _ pattern: NamePattern, _ key: _NameKey, _ priority: Int
    ) -> Subscription {
        let (token, live, route, delay) = _retained.withLock { table in
            paced.replayed = table.lastVersion
            var delay: UInt64?
            let newest = table.matching(pattern).last { record in
                record.post.matches(paced.targets)
            }
            if let newest, !paced.targets.observerGone {
                delay = paced.slot.offer(_NamedPost(name: newest.name, post: newest.post.envelope))
            }
            let (token, route, live) = _insert(paced, to: key, priority: priority)
            return (token, live, route, delay)
        }
        _noteSubscriptionCount(key, live)
        if let delay { paced.arm(delay, route) }
        return token
    }

    /// `_addPattern` for an entry that replays through `_Replay`: every matching retained post,
    /// oldest first.
    private func _addPatternReplaying(
        _ options: _OptionsEntry<_NamedPost>, _ pattern: NamePattern, _ key: _NameKey, _ priority: Int
    ) -> Subscription {
        let replay = _Replay<_NamedPost>()
        options.replay = replay
        let (token, route, live, records, version) = _retained.withLock { table in
            let (token, route, live) = _insert(options, to: key, priority: priority)
            return (token, route, live, table.matching(pattern), table.lastVersion)
        }
        _noteSubscriptionCount(key, live)
        let payloads = records.filter { $0.post.matches(options.targets) }.map {
            _NamedPost(name: $0.name, post: $0.post.envelope)
        }
        replay.finish(replaying: payloads, upTo: version, entry: options, route: route)
        return token
    }
}

extension PostCenter {
    /// `_addActor` for a pattern's actor subscription: with `replay`, every retained post whose
    /// name `pattern` matches (and that passes the sender filter) is in the entry's mailbox,
    /// oldest first, before the entry is published; a one-shot gets the oldest alone and is spent
    /// before it is published. `replayed` is the table's last version, so a retained post that
    /// was replayed and whose live delivery is still walking reaches the entry only to be dropped.
    /// Everything runs under the retained table's lock, as a name's hand-over does.
    func _addPatternActor<A>(
        _ entry: _ActorEntry<A, _NamedPost>, _ pattern: NamePattern, _ key: _NameKey, replay: Bool,
        _ fileID: String, _ line: Int, _ priority: Int
    ) -> Subscription {
        guard replay else { return _addActor(entry, to: key, replay: false, fileID, line, priority) }
        entry.site = _CallSites.shared.intern(fileID, line)
        let (token, route, live, start, spent) = _retained.withLock { table in
            var start = false
            var spent = false
            entry.replayed = table.lastVersion
            for record in table.matching(pattern) where record.post.matches(entry.targets) {
                let named = _NamedPost(name: record.name, post: record.post.envelope)
                if entry.once { entry.state.store(_Entry.spent, ordering: .relaxed) }
                start = entry.preload(named) || start
                if entry.once {
                    spent = true
                    break
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

    /// `_addPatternActor` for a coalescing actor entry: the newest matching retained post is the
    /// first payload its slot holds, as the newest post of a burst would be.
    func _addPatternCoalescingActor<A>(
        _ entry: _CoalescingActorEntry<A, _NamedPost>, _ pattern: NamePattern, _ key: _NameKey, replay: Bool,
        _ fileID: String, _ line: Int, _ priority: Int
    ) -> Subscription {
        guard replay else { return _addCoalescingActor(entry, to: key, replay: false, fileID, line, priority) }
        entry.site = _CallSites.shared.intern(fileID, line)
        let (token, route, live, start) = _retained.withLock { table in
            var start = false
            entry.replayed = table.lastVersion
            let newest = table.matching(pattern).last { $0.post.matches(entry.targets) }
            if let newest {
                start = entry.slot.offer(_NamedPost(name: newest.name, post: newest.post.envelope)) != nil
            }
            let (token, route, live) = _insert(entry, to: key, priority: priority)
            return (token, route, live, start)
        }
        _noteSubscriptionCount(key, live)
        if start { entry.start(route) }
        return token
    }
}

extension _RetainedTable {
    /// The retained posts whose name `pattern` matches, oldest first.
    func matching(_ pattern: NamePattern) -> [(name: String, post: _RetainedPost)] {
        records.filter { pattern.matches($0.key) }.map { (name: $0.key, post: $0.value) }.sorted {
            $0.post.version < $1.post.version
        }
    }
}
