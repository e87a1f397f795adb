import Synchronization

// Pattern subscriptions (`subscribe(matching:)`): each pattern is a route of its own, kept in the
// center's stripes under a key that no name can have (the pattern's spelling, `orders.*` or `*`,
// with its hash salted), so subscribe, cancel, pause, priorities, compaction and every delivery
// are those of a name's route. A post reaches them through `_postPatterns`, called only when
// `_patternState` says some pattern was ever subscribed: a center without patterns pays one
// relaxed load per post. The pattern routes' entries take a `_NamedPost` (the post's name and
// its envelope), so queued, main-actor, actor and paced deliveries carry the name like any
// other `Sendable` payload.

/// What a pattern subscription's entry receives: the post's name and its envelope.
struct _NamedPost: Sendable {
    let name: String
    let post: PostObject
}

extension _NameKey {
    /// The salt that keeps a pattern's key apart from the name spelled like it: the two have the
    /// same `name` and different hashes, and a route is found by both.
    static let _patternSalt: UInt = 0x5A17_E4D3_9C2B_1F07

    /// The key of the route of `pattern`: `*` for `.all` (and `.prefix("")`), `P*` for `.prefix(P)`.
    init(pattern prefix: String) {
        let spelled = prefix + "*"
        self.init(spelled, hash: _canonicalNameHash(spelled) ^ _NameKey._patternSalt)
    }
}

/// Which pattern routes a post must look up, readable without a lock. Bits are only ever set
/// (a pattern whose subscriptions all ended leaves them): a bit set in vain costs a post a
/// route lookup that finds nobody, never a missed delivery.
///
/// `@unchecked Sendable`: every stored property is an atomic or a lock, and `filter` points at
/// atomics allocated in `init` and freed in `deinit`.
final class _PatternIndex: @unchecked Sendable {
    /// Bit 0: `.all` was subscribed; bit 1: some prefix was.
    static let all: UInt = 1
    static let prefixes: UInt = 2
    /// What each pattern subscription adds to the state, above the two flags.
    static let generation: UInt = 4

    /// Bit `n - 1` for prefixes of `n` UTF-8 bytes (1 ≤ n ≤ 63); bit 63 for any longer one.
    let lengths = Atomic<UInt64>(0)

    /// 1,024 bits, one per hash of (length, first eight bytes) of a prefix: a post checks the
    /// bit of each length before it makes a key and looks up a route.
    let filter: UnsafeMutablePointer<Atomic<UInt64>>
    static let filterWords = 16

    /// The lengths of prefixes longer than 63 bytes (read only when bit 63 of `lengths` is set).
    let longLengths = _PlatformMutex<Set<Int>>([])

    init() {
        filter = .allocate(capacity: _PatternIndex.filterWords)
        for i in 0..<_PatternIndex.filterWords { (filter + i).initialize(to: Atomic(0)) }
    }

    deinit {
        filter.deinitialize(count: _PatternIndex.filterWords)
        filter.deallocate()
    }

    /// The first eight bytes of `bytes` (fewer, zero-padded, when it is shorter), little-endian.
    @inline(__always)
    static func head(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        guard let base = bytes.baseAddress else { return 0 }
        if bytes.count >= 8 { return UInt64(littleEndian: UnsafeRawPointer(base).loadUnaligned(as: UInt64.self)) }
        var word: UInt64 = 0
        for i in 0..<bytes.count { word |= UInt64(base[i]) &<< (8 &* UInt64(i)) }
        return word
    }

    /// The filter bit of a prefix of `length` bytes whose first eight bytes are `head` (see
    /// `head(_:)`; bytes past `length` are ignored).
    @inline(__always)
    static func bit(length: Int, head: UInt64) -> (word: Int, mask: UInt64) {
        let kept = length >= 8 ? head : head & ((1 &<< (8 &* UInt64(truncatingIfNeeded: length))) &- 1)
        let h = ((kept ^ (UInt64(truncatingIfNeeded: length) &* 0xC2B2_AE3D_27D4_EB4F)) &* 0x9E37_79B9_7F4A_7C15) &>> 54
        return (Int(h &>> 6), 1 &<< (h & 63))
    }

    /// Notes `prefix` (non-empty) before its first subscription is inserted, so that every post
    /// that starts after that subscribe returns looks its route up.
    func note(prefix: String) {
        var copy = prefix
        copy.withUTF8 { bytes in
            let n = bytes.count
            if n < 64 {
                lengths.bitwiseOr(1 &<< UInt64(n &- 1), ordering: .sequentiallyConsistent)
            } else {
                longLengths.withLock { _ = $0.insert(n) }
                lengths.bitwiseOr(1 &<< 63, ordering: .sequentiallyConsistent)
            }
            let (word, mask) = _PatternIndex.bit(length: n, head: _PatternIndex.head(bytes))
            filter[word].bitwiseOr(mask, ordering: .sequentiallyConsistent)
        }
    }

    /// Calls `body` with every prefix length that may match a name of `bytes`, shortest first.
    @inline(__always)
    func forEachCandidate(_ bytes: UnsafeBufferPointer<UInt8>, _ body: (Int) -> Void) {
        var mask = lengths.load(ordering: .relaxed)
        let count = bytes.count
        var long: [Int] = []
        if mask & (1 &<< 63) != 0 {
            mask &= ~(1 &<< 63)
            long = longLengths.withLock { $0.filter { $0 <= count }.sorted() }
        }
        let head = _PatternIndex.head(bytes)
        while mask != 0 {
            let n = mask.trailingZeroBitCount &+ 1
            if n > count { break }
            mask &= mask &- 1
            let (word, bit) = _PatternIndex.bit(length: n, head: head)
            if filter[word].load(ordering: .relaxed) & bit != 0 { body(n) }
        }
        for n in long { body(n) }
    }
}

extension PostCenter {
    /// The key of `pattern`'s route, noted in the index before the caller inserts an entry.
    func _notePattern(_ pattern: NamePattern) -> _NameKey {
        switch pattern {
        case .all, .prefix(""):
            _advancePatternState(_PatternIndex.all)
            return _NameKey(pattern: "")
        case .prefix(let prefix):
            _patternIndex.note(prefix: prefix)
            _advancePatternState(_PatternIndex.prefixes)
            return _NameKey(pattern: prefix)
        }
    }

    /// Sets `flag` in the pattern state and counts one more pattern subscription in its upper
    /// bits, so that every route's `patternMiss` goes stale (it compares the whole word).
    private func _advancePatternState(_ flag: UInt) {
        var old = _patternState.load(ordering: .relaxed)
        while true {
            let new = (old | flag) &+ _PatternIndex.generation
            let (exchanged, current) = _patternState.compareExchange(
                expected: old, desired: new, ordering: .sequentiallyConsistent)
            if exchanged { return }
            old = current
        }
    }

    /// Calls `body` with the key of every pattern route that may match `name` under pattern
    /// state `state`: `.all` first, then prefixes from the shortest.
    @inline(__always)
    func _forEachPatternKey(_ name: String, _ state: UInt, _ body: (_NameKey) -> Void) {
        if state & _PatternIndex.all != 0 { body(_NameKey(pattern: "")) }
        guard state & _PatternIndex.prefixes != 0 else { return }
        var name = name
        name.withUTF8 { bytes in
            _patternIndex.forEachCandidate(bytes) { n in
                body(_NameKey(pattern: String(decoding: UnsafeBufferPointer(rebasing: bytes[..<n]), as: UTF8.self)))
            }
        }
    }

    /// Whether some pattern route may match `name` under `state`: the filter, then, for each key
    /// it lets through, a locked lookup of the route, so that a bit the filter shares with other
    /// prefixes does not keep the name from remembering its miss. Runs at most once per name's
    /// route and pattern subscription (see `_skipsPatterns`).
    @inline(never)
    func _mayMatchPatterns(_ name: String, _ state: UInt) -> Bool {
        var any = false
        _forEachPatternKey(name, state) { key in
            if !any && _route(key) != nil { any = true }
        }
        return any
    }

    /// Inside a post's frame, on its name's route, whose remembered miss is not `state`: whether
    /// no pattern can match `name`, remembered in the route when none can (see
    /// `_Stripes._skipsPatterns`). Out of line: it runs at most once per name's route and
    /// pattern subscription while nothing matches.
    @inline(never)
    func _noPatternMatches(_ route: Unmanaged<_Route>, _ name: String, _ state: UInt) -> Bool {
        if _mayMatchPatterns(name, state) { return false }
        route._withUnsafeGuaranteedRef { $0.patternMiss.store(state, ordering: .relaxed) }
        return true
    }

    /// Delivers a post of `name` to the pattern subscriptions that match it under `state`,
    /// pattern by pattern (see `_forEachPatternKey`), each pattern's entries in their route's
    /// order. `envelope` runs once, when the first pattern route may match. Returns how many
    /// handlers ran or were scheduled. Out of line: only centers with patterns get here.
    @inline(never)
    func _postPatterns(_ name: String, _ state: UInt, sender: AnyObject?, _ envelope: () -> PostObject) -> Int {
        var named: _NamedPost?
        var delivered = 0
        _forEachPatternKey(name, state) { key in
            let post = named ?? _NamedPost(name: name, post: envelope())
            named = post
            delivered &+= _post(
                key, post, direct: ObjectIdentifier(_Handler<_NamedPost>.self),
                main: ObjectIdentifier(_MainHandler<_NamedPost>.self), envelope: false, sender: sender)
        }
        return delivered
    }

    /// A plain post on a center that has pattern subscriptions, pattern state `state` read when
    /// the post started: the name's own subscriptions, then the patterns', which share the
    /// envelope. Inlined into each plain `post`, behind its branch on the pattern state, like the
    /// typed one (plain post beside 1,000 prefixes of other names, `plainpatterns1`: 747
    /// instructions, 930 out of line, against 715 for `plain1`). The envelope the name's own walk
    /// made is kept for the patterns only when they may match (`envelope:`), so that a post that
    /// skips them retains nothing more.
    @inline(__always)
    func _postWithPatterns(_ key: _NameKey, _ state: UInt, sender: AnyObject?, _ makeEnvelope: () -> PostObject)
        -> Int
    {
        var made: PostObject?
        var skip = false
        let own = _post(
            key, sender: sender, patterns: state, skipsPatterns: &skip, envelope: &made, makeEnvelope: makeEnvelope)
        if skip { return _heard(own, key) }
        return _heard(own &+ _postPatterns(key.name, state, sender: sender) { made ?? makeEnvelope() }, key)
    }

    /// A typed post on a center that has pattern subscriptions (see the plain one). Pattern
    /// subscriptions get an envelope of their own: the payload itself when it is a `PostObject`,
    /// otherwise one that withholds a payload not posted as `Sendable`. Inlined into each typed
    /// `post`, behind its branch on the pattern state; a `Topic<PostObject>` takes the plain
    /// path, out of line (`_postWithPatternsOutOfLine`). Shapes measured in callgrind
    /// (`typed1`, `typed10`, `typedpatterns1`): out of line, the walk's closure was not inlined
    /// into this function (199, 559, 288 instructions); with the plain path inlined into this
    /// one, or with the envelope left to the engine's branch, the post without patterns grew
    /// (201, 561); this shape: 199, 550, 215.
    @inline(__always)
    func _postWithPatterns<Payload>(
        _ topic: Topic<Payload>, _ payload: Payload, sendable: Bool, _ state: UInt, sender: AnyObject?
    ) -> Int {
        let key = topic._key
        if topic._envelope {
            let object = unsafeDowncast(payload as AnyObject, to: PostObject.self)
            return _postWithPatternsOutOfLine(key, state, sender: sender) { object }
        }
        var skip = false
        let own = _post(
            key, payload, direct: topic._direct, main: topic._mainDirect, envelope: false, sendable: sendable,
            sender: sender, patterns: state, skipsPatterns: &skip)
        if skip { return _heard(own, key) }
        let patterns = _postPatterns(key.name, state, sender: sender) {
            PostObject(_typed: payload, sendable: sendable)
        }
        return _heard(own &+ patterns, key)
    }

    /// The plain post on a center that has pattern subscriptions, out of line: for the typed
    /// post of a `Topic<PostObject>` (see the typed `_postWithPatterns`).
    @inline(never)
    func _postWithPatternsOutOfLine(
        _ key: _NameKey, _ state: UInt, sender: AnyObject?, _ makeEnvelope: () -> PostObject
    ) -> Int {
        _postWithPatterns(key, state, sender: sender, makeEnvelope)
    }

    /// How many pattern subscriptions the next post of `name` would reach.
    func _patternReachableCount(_ name: String) -> Int {
        var count = 0
        _forEachPatternKey(name, _patternState.load(ordering: .relaxed)) { count &+= _reachableCount($0) }
        return count
    }
}
