// Retained posts seen from outside the process: the hook a relay (SubscriptionsRedis, a module of
// this package) uses to keep a name's retained post on a server. `package` access: no user of the
// library sees it.
//
// A watcher is kept per name in `_RetainedTable.watchers`, under the table's lock. Posts without
// `retain:` never reach this code; a retained post pays one test of `watchers.isEmpty` under the
// lock it takes anyway, and a dictionary lookup only while some name is watched.

/// What a relay is told about the retained post of a name it watches (see
/// `PostCenter._watchRetained(_:_:)`).
///
/// - Threading: both closures are called on the thread that posts or clears, outside every lock
///   of the center; they may post.
/// - Lifetime: held by the center until `_unwatchRetained(_:_:)` removes it.
package final class _RetainedWatcher: Sendable {
    /// Called for each retained post of the name, with the delivery of that post to the name's
    /// subscribers, which it must call exactly once (on this thread) and whose count it returns:
    /// the relay marks the thread around it, so that its own handler knows the post is retained.
    package let posting: @Sendable (_ deliver: () -> Int) -> Int
    /// Called after the name's retained post was cleared (also when there was none).
    package let cleared: @Sendable () -> Void

    /// A watcher; see the properties.
    package init(
        posting: @escaping @Sendable (_ deliver: () -> Int) -> Int, cleared: @escaping @Sendable () -> Void
    ) {
        self.posting = posting
        self.cleared = cleared
    }
}

extension PostCenter {
    /// Watches the retained post of `name`: `watcher` is told of every retained post of it and every
    /// `clearRetained` of it from now on, until `_unwatchRetained(name, watcher)`. One watcher per
    /// name: a second one replaces the first.
    ///
    /// - Threading: safe from any thread; a retained post made concurrently may or may not be seen.
    package func _watchRetained(_ name: String, _ watcher: _RetainedWatcher) {
        let replaced = _retained.withLock { $0.watchers.updateValue(watcher, forKey: name) }
        withExtendedLifetime(replaced) {}
    }

    /// Stops `watcher` watching `name`, if it still does (a later watcher of the name stays).
    ///
    /// - Threading: safe from any thread. A call of the watcher already under way may still run.
    package func _unwatchRetained(_ name: String, _ watcher: _RetainedWatcher) {
        let removed = _retained.withLock { table -> _RetainedWatcher? in
            guard table.watchers[name] === watcher else { return nil }
            return table.watchers.removeValue(forKey: name)
        }
        withExtendedLifetime(removed) {}
    }
}
