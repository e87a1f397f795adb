/// A place in the source that made live subscriptions of a name, and how many.
///
/// ```swift
/// for site in center.subscriptionSites(for: "login") { print(site) }
/// // App/Screen.swift:12 (998 subscriptions)
/// // App/Login.swift:40 (1 subscription)
/// ```
///
/// Every subscribing and registering method records its caller's `#fileID` and `#line`
/// (through its defaulted `fileID:` and `line:` parameters), so a leak points at its line.
///
/// - Threading: an immutable value, safe to share across threads.
public struct SubscriptionSite: Sendable, Hashable, CustomStringConvertible {
    /// The file, as `#fileID` spells it: `Module/File.swift`.
    public let fileID: String
    /// The line of the call that subscribed.
    public let line: Int
    /// How many live subscriptions of the name this call site holds.
    public let count: Int

    /// Creates a site; ``PostCenter/subscriptionSites(for:)`` makes them for you.
    ///
    /// - Parameters:
    ///   - fileID: The file, as `#fileID` spells it.
    ///   - line: The line.
    ///   - count: How many live subscriptions it holds.
    public init(fileID: String, line: Int, count: Int) {
        self.fileID = fileID
        self.line = line
        self.count = count
    }

    /// `Module/File.swift:12 (3 subscriptions)`.
    public var description: String {
        "\(fileID):\(line) (\(count) subscription\(count == 1 ? "" : "s"))"
    }
}

extension PostCenter {
    /// Where the live subscriptions of `name` were made: one element per call site, the site
    /// with the most subscriptions first (ties in file and line order).
    ///
    /// Counts subscriptions of the name and of every topic with that name, paused ones included;
    /// cancelled ones, fired one-shots and registrations whose observer or sender deallocated
    /// are left out. The subscription behind a `posts(_:)` sequence reports the line that
    /// called `posts`.
    ///
    /// - Parameter name: The name, as passed to `subscribe` (a topic's ``Topic/name``).
    /// - Returns: The call sites, busiest first; empty when nobody listens.
    /// - Threading: safe from any thread; the answer can be stale as soon as it is returned.
    /// - Complexity: O(subscriptions of the name), under the name's lock.
    public func subscriptionSites(for name: String) -> [SubscriptionSite] {
        _subscriptionSites(_NameKey(name))
    }

    func _subscriptionSites(_ key: _NameKey) -> [SubscriptionSite] {
        var keep: [AnyObject] = []
        let counts = _stripes[key.hash]._withUnsafeGuaranteedRef { stripe in
            stripe.mutex.withLock { state -> [UInt16: Int] in
                guard let route = state.table.find(key) else { return [:] }
                return route._withUnsafeGuaranteedRef { $0.lockedSiteCounts(keeping: &keep) }
            }
        }
        withExtendedLifetime(keep) {}
        return counts.map { id, count in
            let site = _CallSites.shared.site(id) ?? (fileID: "<unknown>", line: 0)
            return SubscriptionSite(fileID: site.fileID, line: site.line, count: count)
        }.sorted {
            ($1.count, $0.fileID, $0.line) < ($0.count, $1.fileID, $1.line)
        }
    }
}

extension _Route {
    /// Live subscriptions per call-site id. Loaded observers and senders go to `keep`.
    func lockedSiteCounts(keeping keep: inout [AnyObject]) -> [UInt16: Int] {
        var counts: [UInt16: Int] = [:]
        for i in 0..<buffer.count {
            let bits = buffer.slot(i)
            guard bits != 0 else { continue }
            _SlotBuffer.entry(bits)._withUnsafeGuaranteedRef { entry in
                let state = entry.state.load(ordering: .relaxed)
                guard state == _Entry.active || state == _Entry.paused, entry.isReachable(keeping: &keep) else {
                    return
                }
                counts[entry.site, default: 0] += 1
            }
        }
        return counts
    }
}

extension Subscription: CustomDebugStringConvertible {
    /// What the token is for, where it was made and its state:
    /// `Subscription("login", App/Screen.swift:12, active)`.
    ///
    /// The state is `active`, `paused` or `cancelled` (also for a fired one-shot, a registration
    /// whose observer or sender deallocated, and a token whose center deinitialised). A cancelled
    /// token no longer knows its call site. Protocol observers read
    /// `Subscription(UserObserver, App/Screen.swift:12, active)`.
    ///
    /// - Threading: safe from any thread; takes the registration's lock briefly.
    public var debugDescription: String {
        let (name, site, state) = _describe()
        let place = _CallSites.shared.site(site).map { ", \($0.fileID):\($0.line)" } ?? ""
        return "Subscription(\(name)\(place), \(state))"
    }

    private func _describe() -> (name: String, site: UInt16, state: String) {
        if let route = _home as? _Route {
            var keep: [AnyObject] = []
            let (site, state) = route.stripe.mutex.withLock { _ -> (UInt16, String) in
                guard let entry = _entry else { return (0, "cancelled") }
                let state = entry.state.load(ordering: .relaxed)
                if route.detached.load(ordering: .relaxed) || (state != _Entry.active && state != _Entry.paused)
                    || !entry.isReachable(keeping: &keep)
                {
                    return (entry.site, "cancelled")
                }
                return (entry.site, state == _Entry.paused ? "paused" : "active")
            }
            withExtendedLifetime(keep) {}
            return (route.key.name.debugDescription, site, state)
        }
        if let home = _home as? _ProtocolHome {
            let entry = home.entry
            let raw = entry.state.load(ordering: .acquiring)
            let state: String
            if home.registry == nil || raw == _ProtocolEntry.removed || entry.object == nil {
                state = "cancelled"
            } else {
                state = raw == _ProtocolEntry.paused ? "paused" : "active"
            }
            return (String(describing: entry.protocolType), entry.site, state)
        }
        if let home = _home as? _ExternalHome {
            let registration = home.registration
            return (registration.debugName, 0, registration.isActive ? "active" : "cancelled")
        }
        return ("?", 0, isActive ? "active" : "cancelled")
    }
}
