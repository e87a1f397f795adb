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
        _siteCounts(key).map { id, count in
            let site = _CallSites.shared.site(id) ?? (fileID: "<unknown>", line: 0)
            return SubscriptionSite(fileID: site.fileID, line: site.line, count: count)
        }.sorted {
            ($1.count, $0.fileID, $0.line) < ($0.count, $1.fileID, $1.line)
        }
    }
}

extension Subscription: CustomDebugStringConvertible {
    /// What the token is for, where it was made and its state:
    /// `Subscription("login", App/Screen.swift:12, active)`.
    ///
    /// The state is `active`, `paused`, `cancelled` (also for a fired one-shot and a token whose
    /// center deinitialised), or, for a registration that is still in place but can never be
    /// reached again because what it holds weakly deallocated, `actor gone`, `observer gone` or
    /// `sender gone`:
    ///
    /// ```swift
    /// func watch() -> Subscription {
    ///     let cache = Cache()
    ///     return center.subscribe(.reading, on: cache) { cache, value in cache.values.append(value) }
    /// }   // `cache` deallocates here: watch().debugDescription ends in "actor gone)"
    /// ```
    ///
    /// A cancelled token no longer knows its call site. Protocol observers read
    /// `Subscription(UserObserver, App/Screen.swift:12, active)` (`observer gone` once the
    /// observer deallocated). String interpolation (`"\(token)"`) prints the same text.
    ///
    /// - Threading: safe from any thread; takes the registration's lock briefly.
    public var debugDescription: String {
        var (name, site, state) = _home._describe(self)
        if state == "cancelled", let route = _home as? _Route, let gone = route._goneTarget(self) {
            state = gone
        }
        let place = _CallSites.shared.site(site).map { ", \($0.fileID):\($0.line)" } ?? ""
        return "Subscription(\(name)\(place), \(state))"
    }
}
