import Synchronization

extension PostCenter {
    /// A likely misuse noticed by a center with ``PostCenter/diagnostics`` set.
    public enum Diagnostic: Sendable, Equatable, CustomStringConvertible {
        /// `name` now has `count` live subscriptions, at or past
        /// ``Diagnostics/subscriptionLimit`` (reported at the limit, then at each doubling).
        /// Usually tokens that are created repeatedly and stored somewhere that never lets go.
        case manySubscriptions(name: String, count: Int)
        /// A post of `name` started while `depth - 1` posts of the same name were already in
        /// progress on the same thread: handlers re-posting their own name (directly or through
        /// other names). Reported each time the depth reaches ``Diagnostics/nestingLimit``.
        case deepNesting(name: String, depth: Int)
        /// A post of `name` reached no handler: nobody listens, or every subscription is paused or
        /// takes another payload type. Reported only with ``Diagnostics/reportsUnheardPosts``.
        case unheardPost(name: String)

        /// A one-line explanation that names the problem and the usual fix.
        public var description: String {
            switch self {
            case .manySubscriptions(let name, let count):
                return "Subscriptions: \"\(name)\" has \(count) live subscriptions; possible leak: "
                    + "keep each Subscription in the object that owns the interest, and let it go with that object."
            case .deepNesting(let name, let depth):
                return "Subscriptions: posts of \"\(name)\" are nested \(depth) deep on one thread; "
                    + "a handler re-posts its own name (directly or through other names). "
                    + "Break the cycle, or post asynchronously with delivery: .queue(_:)."
            case .unheardPost(let name):
                return "Subscriptions: a post of \"\(name)\" reached no handler; check the name's spelling and "
                    + "that its subscriber exists (and is not paused) before the post, or post with retain: true."
            }
        }
    }

    /// Thresholds for likely misuses and the closure that hears about them.
    ///
    /// ```swift
    /// center.diagnostics = .init(subscriptionLimit: 100) { issue in logger.warning("\(issue)") }
    /// ```
    ///
    /// - Threading: `report` runs on the thread that subscribed or posted, synchronously, with no
    ///   lock of the center held; it may call back into the center.
    public struct Diagnostics: Sendable {
        /// The number of live subscriptions of one name that triggers
        /// ``Diagnostic/manySubscriptions(name:count:)``, like Node's max-listeners warning.
        public var subscriptionLimit: Int
        /// The re-entrant nesting depth of one name on one thread that triggers
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
        ///   - nestingLimit: Re-entrant depth of one name on one thread before a warning; default 32.
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

    /// Re-entrant posts of one name on one thread beyond which `post` stops the process with a
    /// message naming the name, instead of overflowing the stack later with none.
    public static let maximumNestingDepth = 1024

    /// Where the center reports likely misuses; `nil` (the default) checks nothing beyond the
    /// hard ``maximumNestingDepth`` stop.
    ///
    /// - Threading: safe to set and read from any thread; posts and subscriptions that start
    ///   after the assignment returns use the new value.
    /// - Complexity: with `nil`, diagnostics cost a not-taken branch per post.
    public var diagnostics: Diagnostics? {
        get { _diagnostics.withLock { $0 } }
        set {
            _diagnostics.withLock { $0 = newValue }
            _diagnosing.store(newValue != nil, ordering: .releasing)
        }
    }

    /// Called after a post found `depth` frames of its own thread on its route.
    func _checkNesting(_ key: _NameKey, _ outer: Int) {
        let depth = outer + 1
        if depth > PostCenter.maximumNestingDepth {
            // fatalError, not precondition: optimised builds drop a precondition's message.
            fatalError(
                "Subscriptions: posts of \"\(key.name)\" nested \(depth) deep on one thread: a handler re-posts "
                    + "its own name without end (directly or through other names). Break the cycle, or post "
                    + "asynchronously with delivery: .queue(_:).")
        }
        guard _diagnosing.load(ordering: .acquiring), let diagnostics = self.diagnostics,
            depth == diagnostics.nestingLimit
        else { return }
        diagnostics.report(.deepNesting(name: key.name, depth: depth))
    }

    /// Called after a subscription made `name` hold `live` entries.
    func _checkCount(_ key: _NameKey, _ live: Int) {
        guard let diagnostics = self.diagnostics, live >= diagnostics.subscriptionLimit else { return }
        let ratio = live / diagnostics.subscriptionLimit
        guard live % diagnostics.subscriptionLimit == 0, ratio & (ratio - 1) == 0 else { return }
        diagnostics.report(.manySubscriptions(name: key.name, count: live))
    }
}
