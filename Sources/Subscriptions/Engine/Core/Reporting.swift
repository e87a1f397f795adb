/// What the engine tells the layer above it while a center runs: the events its diagnostics
/// watch. The engine calls only these requirements, and `PostCenter` meets them in
/// `Diagnostics.swift`, so that the engine never reads the diagnostics' configuration or state
/// and a change to what is reported (or how) stays out of `Engine/`.
///
/// Each runs on the thread that subscribed, posted or ran the handler, with no lock of the engine held: they may
/// call user code (`Diagnostics.report`) and back into the center.
protocol _EngineReporting: AnyObject {
    /// A subscription just made `key` hold `live` live subscriptions. Called on every subscribe,
    /// so it must cost next to nothing while no diagnostics are set.
    func _noteSubscriptionCount(_ key: _NameKey, _ live: Int)

    /// A post of `key` started while `outer` (at least 1) other posts were in progress on this
    /// thread. It may stop the process: past `PostCenter.maximumNestingDepth` the posts loop.
    func _checkNesting(_ key: _NameKey, _ outer: Int)

    /// A post of `key` reached a live subscription (made at call site `site`) whose `subscriber`
    /// (`"actor"` or `"observer"`) deallocated; called once per subscription, inside the post.
    func _noteSubscriberGone(_ key: _NameKey, _ subscriber: String, site: UInt16)

    /// The handler of the subscription made at call site `site`, called for a post of `key`,
    /// threw `error`. Called on the thread or actor that ran the handler, right after it threw,
    /// before the next handler of the post runs.
    func _noteHandlerThrew(_ key: _NameKey, site: UInt16, _ error: any Error)

    /// Inside a post of `name` under pattern state `state` (not 0), on the name's `route`, whose
    /// remembered miss is another state: whether no pattern subscription can match `name`; when
    /// none can, the route remembers `state` as its miss.
    func _noPatternMatches(_ route: Unmanaged<_Route>, _ name: String, _ state: UInt) -> Bool
}
