import Synchronization

extension PostCenter: _EngineReporting {
    /// A likely misuse noticed by a center with ``PostCenter/diagnostics`` set.
    public enum Diagnostic: Sendable, Equatable, CustomStringConvertible {
        /// `name` now has `count` live subscriptions, at or past
        /// ``Diagnostics/subscriptionLimit`` (reported at the limit, then at each doubling).
        /// Usually tokens that are created repeatedly and stored somewhere that never lets go.
        /// `site` is the call site holding the most of them (see
        /// ``PostCenter/subscriptionSites(for:)``): the line to look at.
        ///
        /// Reported once per level: a count that goes up and down around the limit is not
        /// reported again until it has fallen below half the limit.
        case manySubscriptions(name: String, count: Int, site: SubscriptionSite?)
        /// A post of `name` started while `depth - 1` posts (of any names) were already in
        /// progress on the same thread: handlers re-posting their own name, directly or through
        /// other names. Queued, main-actor and actor handler calls are not posts and do not count.
        /// Reported each time the depth reaches ``Diagnostics/nestingLimit``.
        case deepNesting(name: String, depth: Int)
        /// A post of `name` reached no handler: nobody listens, or every subscription is paused or
        /// takes another payload type. Reported only with ``Diagnostics/reportsUnheardPosts``.
        case unheardPost(name: String)
        /// A ``Posts`` sequence of `name` with a bounded ``PostsBufferingPolicy`` discarded `count`
        /// posts because its consumer did not take them in time. Reported when the consumer next
        /// takes a post, with the number discarded since the previous report, on the iterating
        /// task; posts discarded after the consumer's last take are not reported.
        case droppedPosts(name: String, count: Int)
        /// A post of `name` reached a subscription whose `subscriber` deallocated while its token
        /// lives: `"actor"` for `subscribe(_:on:…)`, `"observer"` for `register(…observer:…)`.
        /// Nothing reaches that subscription again, and its token reads `actor gone` or
        /// `observer gone`. Usually an actor or observer kept in a local `let`, whose life ends at
        /// its last use (right after `subscribe`), while the token lives on. `site` is where the
        /// subscription was made. Reported once per subscription, by the first post that finds
        /// it so, on the posting thread.
        case subscriberGone(name: String, subscriber: String, site: SubscriptionSite?)
        /// The handler of a subscription of `name`, made at `site`, threw `error`. The post went
        /// on: the next handler ran, and the call counted in `post`'s result as run. Reported on
        /// the thread, queue or actor that ran the handler, right after it threw and before the
        /// next handler of the post runs; every delivery (immediate, queued, main-actor, actor,
        /// paced, a replay) reports the same way, once per throw. With no
        /// ``PostCenter/diagnostics`` set, the center prints it to standard error instead, once
        /// per call site for the life of the process. `site` has `count` 1 (and `fileID` `"?"`
        /// in the rare case the site is unknown: a program that passed more than 65,535 distinct
        /// computed `fileID:`s). Two reports are equal when their names and sites are, and their
        /// errors have the same type and the same `String(describing:)`. The report holds `error`
        /// (and what it references) as long as the value lives; the center keeps none of it.
        case handlerThrew(name: String, site: SubscriptionSite, error: any Error)

        /// A one-line explanation that names the problem and the usual fix.
        public var description: String {
            switch self {
            case .manySubscriptions(let name, let count, let site):
                return "Subscriptions: \"\(name)\" has \(count) live subscriptions"
                    + (site.map { ", most from \($0.fileID):\($0.line) (\($0.count))" } ?? "") + "; possible leak: "
                    + "keep each Subscription in the object that owns the interest, and let it go with that object."
            case .deepNesting(let name, let depth):
                return "Subscriptions: posts of \"\(name)\" are nested \(depth) deep on one thread; "
                    + "a handler re-posts its own name (directly or through other names). "
                    + "Break the cycle, or post asynchronously with delivery: .queue(_:)."
            case .unheardPost(let name):
                return "Subscriptions: a post of \"\(name)\" reached no handler; check the name's spelling and "
                    + "that its subscriber exists (and is not paused) before the post, or post with retain: true."
            case .droppedPosts(let name, let count):
                return "Subscriptions: a posts(\"\(name)\") sequence discarded \(count) posts its consumer did not "
                    + "take in time; use bufferingPolicy: .unbounded (the default) or a larger limit to keep them."
            case .subscriberGone(let name, let subscriber, let site):
                return "Subscriptions: a post of \"\(name)\" reached a subscription whose \(subscriber) is gone"
                    + (site.map { " (made at \($0.fileID):\($0.line))" } ?? "") + "; its token lives, but nothing "
                    + "reaches it again. Keep the \(subscriber) alive as long as the token (a local let ends at its "
                    + "last use), or cancel the token."
            case .handlerThrew(let name, let site, let error):
                return "Subscriptions: a handler of \"\(name)\" (subscribed at \(site.fileID):\(site.line)) threw "
                    + "\(String(describing: error)); the post went on with the next handler."
            }
        }

        /// Whether two diagnostics say the same: same case and same values; errors (which are
        /// not `Equatable`) compare by type and by `String(describing:)`.
        ///
        /// - Threading: a pure function of its arguments, safe anywhere; it calls an error's
        ///   `description` (user code) for `handlerThrew`.
        public static func == (lhs: Diagnostic, rhs: Diagnostic) -> Bool {
            switch (lhs, rhs) {
            case (.manySubscriptions(let a, let b, let c), .manySubscriptions(let x, let y, let z)):
                return a == x && b == y && c == z
            case (.deepNesting(let a, let b), .deepNesting(let x, let y)): return a == x && b == y
            case (.unheardPost(let a), .unheardPost(let x)): return a == x
            case (.droppedPosts(let a, let b), .droppedPosts(let x, let y)): return a == x && b == y
            case (.subscriberGone(let a, let b, let c), .subscriberGone(let x, let y, let z)):
                return a == x && b == y && c == z
            case (.handlerThrew(let a, let b, let c), .handlerThrew(let x, let y, let z)):
                return a == x && b == y && type(of: c) == type(of: z)
                    && String(describing: c) == String(describing: z)
            default: return false
            }
        }
    }

    /// Thresholds for likely misuses and the closure that hears about them.
    ///
    /// ```swift
    /// center.diagnostics = .init(subscriptionLimit: 100) { issue in logger.warning("\(issue)") }
    /// ```
    ///
    /// - Threading: `report` runs on the thread that subscribed or posted (for
    ///   ``Diagnostic/droppedPosts(name:count:)``, on the task that iterates the sequence),
    ///   synchronously, with no lock of the center held; it may call back into the center.
    /// - Lifetime: the center keeps `report` (and what it captures) until `diagnostics` is set
    ///   again or the center deinitialises, and releases it with no lock held, so a captured
    ///   object's deinit may call back into the center.
    public struct Diagnostics: Sendable {
        /// The number of live subscriptions of one name that triggers
        /// ``Diagnostic/manySubscriptions(name:count:site:)``, like Node's max-listeners warning.
        public var subscriptionLimit: Int
        /// The depth of posts in progress on one thread (across all names) that triggers
        /// ``Diagnostic/deepNesting(name:depth:)``.
        public var nestingLimit: Int
        /// Receives each diagnostic.
        public var report: @Sendable (Diagnostic) -> Void
        /// Whether a post that reaches no handler is reported as ``Diagnostic/unheardPost(name:)``
        /// (retained posts are not: keeping a post for later subscribers is their point).
        public var reportsUnheardPosts: Bool

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - subscriptionLimit: Live subscriptions of one name before a warning; default 1,000.
        ///   - nestingLimit: Depth of posts in progress on one thread, across all names, before a
        ///     warning; default 32 (the hard stop is ``PostCenter/maximumNestingDepth``).
        ///   - reportsUnheardPosts: Whether to report posts that reach no handler; default `false`.
        ///   - report: Called with each diagnostic, outside the center's locks.
        public init(
            subscriptionLimit: Int = 1000, nestingLimit: Int = 32, reportsUnheardPosts: Bool = false,
            report: @escaping @Sendable (Diagnostic) -> Void
        ) {
            // fatalError, not precondition: optimised builds drop a precondition's message.
            if subscriptionLimit <= 0 {
                fatalError("Diagnostics.subscriptionLimit must be positive, not \(subscriptionLimit)")
            }
            if nestingLimit <= 1 { fatalError("Diagnostics.nestingLimit must be at least 2, not \(nestingLimit)") }
            self.subscriptionLimit = subscriptionLimit
            self.nestingLimit = nestingLimit
            self.report = report
            self.reportsUnheardPosts = reportsUnheardPosts
        }
    }

    /// Posts in progress on one thread (of any names, nested through handlers) beyond which
    /// `post` stops the process with a message naming the name, instead of overflowing the stack
    /// later with none. Queued and main-actor handler calls are not posts and do not count.
    public static let maximumNestingDepth = 64

    /// Where the center reports likely misuses; `nil` (the default) checks nothing beyond the
    /// hard ``maximumNestingDepth`` stop.
    ///
    /// - Threading: safe to set and read from any thread; posts and subscriptions that start
    ///   after the assignment returns use the new value. Of assignments racing on several
    ///   threads, the one that takes effect last is the value read afterwards, and it is the one
    ///   that reports.
    /// - Lifetime: the previous value's `report` closure is released after the center's lock is
    ///   released: its captures' deinits may use the center.
    /// - Complexity: with `nil`, diagnostics cost a not-taken branch per post.
    public var diagnostics: Diagnostics? {
        get { _diagnostics.withLock { $0.value } }
        set {
            let previous = _diagnostics.withLock { state -> Diagnostics? in
                // The flag changes under the lock, with the value: of racing setters, the one
                // that locks last leaves both, so a set value is never left silent.
                _diagnosing.store(newValue != nil, ordering: .releasing)
                return state.replace(newValue)
            }
            // The old `report` (and what it captured) is released here, unlocked.
            withExtendedLifetime(previous) {}
        }
    }

    /// Called when a post starts while `outer` other posts are in progress on its thread.
    /// Stops the process past `maximumNestingDepth`, else reports at `nestingLimit`.
    func _checkNesting(_ key: _NameKey, _ outer: Int) {
        let depth = outer + 1
        if depth > PostCenter.maximumNestingDepth {
            // fatalError, not precondition: optimised builds drop a precondition's message.
            fatalError(
                "Subscriptions: a post of \"\(key.name)\" started while \(outer) posts were in progress on one "
                    + "thread: a loop of posts (a handler re-posts its own name, directly or through other names). "
                    + "Break the cycle, or post asynchronously with delivery: .queue(_:).")
        }
        guard _diagnosing.load(ordering: .acquiring), let diagnostics = self.diagnostics,
            depth == diagnostics.nestingLimit
        else { return }
        diagnostics.report(.deepNesting(name: key.name, depth: depth))
    }

    /// A subscription made `key` hold `live` entries: checked only while diagnostics are set
    /// (one relaxed load otherwise).
    @inline(__always)
    func _noteSubscriptionCount(_ key: _NameKey, _ live: Int) {
        if _diagnosing.load(ordering: .relaxed) { _checkCount(key, live) }
    }

    /// Called after a subscription made `name` hold `live` entries.
    ///
    /// Reports at the limit and at each doubling, once per level until the count falls below
    /// half the limit (noticed at the next subscription), so a count that oscillates around the
    /// limit is reported once.
    func _checkCount(_ key: _NameKey, _ live: Int) {
        let report = _diagnostics.withLock { state -> Diagnostics? in
            guard let diagnostics = state.value else { return nil }
            return state.lockedCount(key.name, live, diagnostics.subscriptionLimit) ? diagnostics : nil
        }
        guard let report else { return }
        // `report` is a copy: its closure is released here, unlocked.
        report.report(.manySubscriptions(name: key.name, count: live, site: _subscriptionSites(key).first))
    }

    /// Reports that a post of `key` found the `subscriber` of the subscription made at `site`
    /// gone, if diagnostics are on. Called once per subscription, inside the post, unlocked.
    func _noteSubscriberGone(_ key: _NameKey, _ subscriber: String, site: UInt16) {
        guard _diagnosing.load(ordering: .acquiring), let diagnostics = self.diagnostics else { return }
        let place = _CallSites.shared.site(site).map { SubscriptionSite(fileID: $0.fileID, line: $0.line, count: 1) }
        diagnostics.report(.subscriberGone(name: key.name, subscriber: subscriber, site: place))
    }

    /// Reports that the handler of the subscription made at `site` threw `error` in a post of
    /// `key`: to `diagnostics` when set, else printed once per call site. Runs where the handler
    /// ran, unlocked.
    func _noteHandlerThrew(_ key: _NameKey, site: UInt16, _ error: any Error) {
        guard _diagnosing.load(ordering: .acquiring), let diagnostics = self.diagnostics else {
            _ThrownErrors.printOnce(key.name, site: site, error)
            return
        }
        let place = _CallSites.shared.site(site).map { SubscriptionSite(fileID: $0.fileID, line: $0.line, count: 1) }
        diagnostics.report(
            .handlerThrew(name: key.name, site: place ?? SubscriptionSite(fileID: "?", line: 0, count: 1), error: error)
        )
    }

    /// Reports that a `Posts` sequence of `name` discarded `count` posts, if diagnostics are on.
    func _reportDroppedPosts(_ name: String, _ count: Int) {
        guard _diagnosing.load(ordering: .acquiring), let diagnostics = self.diagnostics else { return }
        diagnostics.report(.droppedPosts(name: name, count: count))
    }
}

/// What `PostCenter.diagnostics` keeps under its lock: the value, and the levels of
/// `manySubscriptions` already reported per name.
struct _DiagnosticsState {
    var value: PostCenter.Diagnostics?
    /// For each name reported as having many subscriptions, the highest count reported.
    /// Forgotten when the name's count falls below half the limit, or with a new `value`.
    var reported: [String: Int] = [:]

    /// Installs `value`, forgets what was reported, and returns the previous value, for the
    /// caller to release after unlocking.
    mutating func replace(_ value: PostCenter.Diagnostics?) -> PostCenter.Diagnostics? {
        let previous = self.value
        self.value = value
        reported = [:]
        return previous
    }

    /// Whether `live` subscriptions of `name` is to be reported now; records it if so.
    ///
    /// A report is due when `live` is the limit or a power-of-two multiple of it, and above what
    /// was reported for `name`. A count that was below half the limit before this subscription
    /// (`live - 1 < limit / 2`) forgets the earlier reports of `name`.
    mutating func lockedCount(_ name: String, _ live: Int, _ limit: Int) -> Bool {
        if (live - 1) * 2 < limit {
            if !reported.isEmpty { reported[name] = nil }
        }
        guard live >= limit, live % limit == 0 else { return false }
        let ratio = live / limit
        guard ratio & (ratio - 1) == 0, live > reported[name, default: 0] else { return false }
        reported[name] = live
        return true
    }
}
