/// The center's side of the seam: the center calls the engine's post path and its routes through
/// these, which forward to its stripes (`Core/Post.swift`, `Core/Stripes.swift`) with the center
/// as the reporter of what the engine reports upward (`_EngineReporting`). Inlined: a post costs
/// what it cost when the post path was an extension of the center.
extension PostCenter {
    /// A typed post; see `_Stripes._post(_:_:direct:main:envelope:sendable:sender:reporter:)`.
    @inline(__always)
    func _post<Payload>(
        _ key: _NameKey, _ payload: Payload, direct: ObjectIdentifier, main: ObjectIdentifier, envelope: Bool,
        sendable: Bool = true, sender: AnyObject?
    ) -> Int {
        _stripes._post(
            key, payload, direct: direct, main: main, envelope: envelope, sendable: sendable, sender: sender,
            reporter: self)
    }

    /// A plain post; see `_Stripes._post(_:sender:reporter:makeEnvelope:)`.
    @inline(__always)
    func _post(_ key: _NameKey, sender: AnyObject?, makeEnvelope: () -> PostObject) -> Int {
        _stripes._post(key, sender: sender, reporter: self, makeEnvelope: makeEnvelope)
    }

    /// Runs `body` inside a post's frame on the route of `key`; see `_Stripes._inPostFrame`.
    @inline(__always)
    func _inPostFrame(_ key: _NameKey, _ body: (_PostStart) -> Int) -> Int {
        _stripes._inPostFrame(key, self, body)
    }

    /// Walks the slots a typed post published; see `_Stripes._walkTyped`.
    @inline(__always)
    func _walkTyped<Payload>(
        _ start: _PostStart, _ payload: Payload, direct: ObjectIdentifier, main: () -> ObjectIdentifier,
        sendable: Bool, sender: AnyObject?, envelope made: inout PostObject?
    ) -> Int {
        _stripes._walkTyped(
            start, payload, direct: direct, main: main, sendable: sendable, sender: sender, envelope: &made)
    }

    /// Walks the slots a plain post published; see `_Stripes._walkEnvelope`.
    @inline(__always)
    func _walkEnvelope(_ start: _PostStart, _ object: PostObject, sender: AnyObject?) -> Int {
        _stripes._walkEnvelope(start, object, sender: sender)
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
