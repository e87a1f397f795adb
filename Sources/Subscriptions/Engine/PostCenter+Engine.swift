/// The center's side of the seam: the center calls the engine's post path and its routes through
/// these, which forward to its stripes (`Core/Post.swift`, `Core/Stripes.swift`) with the center
/// as the reporter of what the engine reports upward (`_EngineReporting`). Inlined: a post costs
/// what it cost when the post path was an extension of the center.
extension PostCenter {
    /// A typed post; see
    /// `_Stripes._post(_:_:direct:main:envelope:sendable:sender:patterns:skipsPatterns:reporter:)`.
    @inline(__always)
    func _post<Payload>(
        _ key: _NameKey, _ payload: Payload, direct: ObjectIdentifier, main: ObjectIdentifier, envelope: Bool,
        sendable: Bool = true, sender: AnyObject?, patterns: UInt, skipsPatterns skip: inout Bool
    ) -> Int {
        _stripes._post(
            key, payload, direct: direct, main: main, envelope: envelope, sendable: sendable, sender: sender,
            patterns: patterns, skipsPatterns: &skip, reporter: self)
    }

    /// A typed post to the name's own subscriptions only: on a center without patterns, and a
    /// pattern route's post, whose name no pattern is matched against.
    @inline(__always)
    func _post<Payload>(
        _ key: _NameKey, _ payload: Payload, direct: ObjectIdentifier, main: ObjectIdentifier, envelope: Bool,
        sendable: Bool = true, sender: AnyObject?
    ) -> Int {
        var skip = true
        return _post(
            key, payload, direct: direct, main: main, envelope: envelope, sendable: sendable, sender: sender,
            patterns: 0, skipsPatterns: &skip)
    }

    /// A plain post; see
    /// `_Stripes._post(_:sender:patterns:skipsPatterns:envelope:reporter:makeEnvelope:)`.
    @inline(__always)
    func _post(
        _ key: _NameKey, sender: AnyObject?, patterns: UInt, skipsPatterns skip: inout Bool,
        envelope made: inout PostObject?, makeEnvelope: () -> PostObject
    ) -> Int {
        _stripes._post(
            key, sender: sender, patterns: patterns, skipsPatterns: &skip, envelope: &made, reporter: self,
            makeEnvelope: makeEnvelope)
    }

    /// A plain post to the name's own subscriptions only: on a center without patterns, and the
    /// retained post's, which posts to the patterns itself.
    @inline(__always)
    func _post(_ key: _NameKey, sender: AnyObject?, makeEnvelope: () -> PostObject) -> Int {
        var skip = true
        var made: PostObject?
        return _post(
            key, sender: sender, patterns: 0, skipsPatterns: &skip, envelope: &made, makeEnvelope: makeEnvelope)
    }

    /// The route of `key`, for tests: `nil` when the name has none.
    func _route(_ key: _NameKey) -> _Route? { _stripes._route(key) }

    /// How many subscriptions the next post of `key` would reach.
    func _reachableCount(_ key: _NameKey) -> Int { _stripes._reachableCount(key) }

    /// Live subscriptions of `key` per call-site id.
    func _siteCounts(_ key: _NameKey) -> [UInt16: Int] { _stripes._siteCounts(key) }

    /// Detaches every route: tokens that outlive the center become inactive and harmless.
    func _detachAll() { _stripes._detachAll() }
}
