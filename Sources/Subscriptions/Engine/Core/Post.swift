import Synchronization
internal import _SubscriptionsShims

/// Where a post runs, as far as its plain main-actor entries care: not asked yet (`unknown`),
/// off the main actor (`elsewhere`: they are scheduled), or on it (`onMainActor(kind)`: entries
/// of class `kind` are called in place, like `direct` ones). One word, the class's address once
/// on the main actor, so that recognising such an entry costs the walk one comparison (a
/// three-case enum, with the class compared apart, cost typed posts 3% with one subscriber and
/// 11% with ten: the Performance article, "The post's walk").
struct _MainHere: Equatable {
    private var bits: UInt

    /// Not asked yet.
    static var unknown: _MainHere { _MainHere(bits: 0) }
    /// Off the main actor.
    static var elsewhere: _MainHere { _MainHere(bits: 1) }
    /// On the main actor, where the entries of class `kind` are called in place.
    static func onMainActor(_ kind: ObjectIdentifier) -> _MainHere { _MainHere(bits: UInt(bitPattern: kind)) }

    /// Whether an entry of class `kind` is called in place: the post runs on the main actor and
    /// `kind` is its plain main-actor class (no class lives at address 0 or 1).
    @inline(__always)
    func calls(_ kind: ObjectIdentifier) -> Bool { UInt(bitPattern: kind) == bits }
}

/// What a post walks: the route it found, the slot buffer it published in its frame, and its
/// frame in the thread's record.
struct _PostStart {
    /// Kept alive by the name table the frame holds (a table releases its routes only once no
    /// frame holds it).
    let route: Unmanaged<_Route>
    let buffer: _SlotBuffer
    let record: _ThreadRecord
    let frame: Int
}

/// The post path. Not an extension of the center: it knows the center only as the reporter of a
/// nested post (`Reporter`, the seam of `Reporting.swift`), and the center calls it through
/// `PostCenter+Engine.swift`.
extension _Stripes {
    /// How many slots ahead `_walk` hints the processor to load an entry (at most
    /// `_SlotBuffer.walkPadding`, which lets it read that far past the last slot). A measured value, not a
    /// derived one: with four, typed posts to 100 and 1000 subscribers run 12% and 6% faster than
    /// with no hint, and two or eight gain nothing; measure again before changing it.
    @inline(__always)
    var _walkPrefetchDistance: Int { 4 }

    /// Walks the slots the post published, without any lock.
    ///
    /// Each step hints the processor to load the entry `_walkPrefetchDistance` slots ahead: a
    /// long route's entries are separate heap blocks, and without the hint every handler waits
    /// for its entry's cache line. The hint is only a prefetch (it never faults), so it may name
    /// an entry that a canceller is about to free.
    ///
    /// For each slot: publish the entry in the frame (`at`), fence, re-read the slot; only if it
    /// still holds the entry is the entry alive and not cancelled before the fence, and then a
    /// canceller that cancels it later sees `at` and waits (see DESIGN.md, "Post").
    ///
    /// The calls are closures rather than one visitor type: in the library's unspecialised typed
    /// post, a generic visitor cost 3.5% (one subscriber) to 8% (ten) more instructions (the
    /// Performance article, "The post's walk").
    ///
    /// Entries whose class is `direct` (an immediate handler of exactly the posted payload type)
    /// are called through `call`: no cast, no virtual call, no reference counting. Entries whose
    /// class is `main()` (a plain main-actor handler of exactly the posted payload type; `main` is
    /// evaluated only for entries of neither fast class) go to `takeMain`, with whether the post
    /// runs on the main actor, asked by the first one (`_isOnMainActor()`: at most once per post,
    /// never for a post without one); `takeMain` returns whether it called the handler there.
    /// Once one did, the others are called like `direct` ones, through `callMain`: one more
    /// comparison than a `direct` entry. Every other entry goes to `other`, which returns whether
    /// its handler ran or was scheduled.
    @inline(__always)
    func _walk(
        _ start: _PostStart, direct: ObjectIdentifier, call: (_Entry) throws -> Void, main: () -> ObjectIdentifier,
        callMain: (_Entry) throws -> Void, takeMain: (_Entry, _ onMainActor: Bool) -> Bool, other: (_Entry) -> Bool
    ) -> Int {
        var delivered = 0
        // A pointer walk: the slot pointer, its end and the frame's `at` word are the only values
        // the loop keeps across a handler's call, so they stay in callee-saved registers.
        let buffer = start.buffer
        let atWord = start.record.atWord(start.frame)
        var slot = buffer.slots
        let end = slot + buffer.count
        var mainHere = _MainHere.unknown
        while slot < end {
            // Within the buffer's `walkPadding` past its last slot: no bounds check.
            _subscriptions_prefetch(
                UnsafeRawPointer(bitPattern: slot[_walkPrefetchDistance].load(ordering: .relaxed)))
            let bits = slot[0].load(ordering: .relaxed)
            let here = slot
            slot += 1
            if bits == 0 { continue }
            atWord[0].store(bits, ordering: .releasing)
            _Fence.light()
            if here[0].load(ordering: .relaxed) != bits { continue }
            _SlotBuffer.entry(bits)._withUnsafeGuaranteedRef { entry in
                guard entry.state.load(ordering: .relaxed) == _Entry.active else { return }
                let kind = ObjectIdentifier(type(of: entry))
                if kind == direct {
                    do { try call(entry) } catch { _noteThrew(error, start) }
                    delivered &+= 1
                } else if mainHere.calls(kind) {
                    do { try callMain(entry) } catch { _noteThrew(error, start) }
                    delivered &+= 1
                } else if kind == main() {
                    let ask = mainHere == .unknown
                    let ranHere = takeMain(entry, ask && _isOnMainActor())
                    if ask { mainHere = ranHere ? .onMainActor(kind) : .elsewhere }
                    delivered &+= 1
                } else if other(entry) {
                    delivered &+= 1
                }
            }
        }
        return delivered
    }

    /// Runs `body` inside a post's frame on the route of `key`: opens a frame in the thread's
    /// record, publishes the name table and the route's slot buffer it reads, lets `body` walk
    /// the slots, closes the frame. Returns 0 without calling `body` when nobody listens.
    @inline(__always)
    func _inPostFrame<Reporter: _EngineReporting>(
        _ key: _NameKey, _ reporter: Reporter, _ body: (_PostStart) -> Int
    ) -> Int {
        let record = _ThreadRecord.current
        let f = record.push()
        // The outermost frame is the only post in progress (no frame, no post before it).
        let posts = f == 0 ? 1 : record.posts &+ 1
        record.posts = posts
        if posts > 1 { reporter._checkNesting(key, posts &- 1) }
        var delivered = 0
        let stripe = self[key.hash]
        let tableBits = _publishStable(
            { stripe._withUnsafeGuaranteedRef { $0.table.load(ordering: .acquiring) } }, { record.setTable(f, $0) })
        if let route = _NameTable(bits: tableBits).find(key) {
            // Before the fence of the buffer's publication, so before any `at` of this frame.
            record.announce(f, route: UInt(bitPattern: route.toOpaque()))
            let bufferBits = _publishStable(
                { route._withUnsafeGuaranteedRef { $0.published.load(ordering: .acquiring) } },
                { record.setBuffer(f, $0) })
            delivered = body(_PostStart(route: route, buffer: _SlotBuffer(bits: bufferBits), record: record, frame: f))
        }
        record.posts = posts &- 1
        record.pop(f)
        if record.deferredStarts != 0 { _DeferredStart.startAll(record) }
        return delivered
    }

    /// Reads a published word (`load`: the stripe's name table, a route's slot buffer), publishes
    /// it in the post's frame (`publish`), fences, and reads it again until the two agree. Once
    /// they do, a writer that replaces the word afterwards and then scans the thread records sees
    /// it published, and keeps it alive (see DESIGN.md, "Grace periods").
    @inline(__always)
    func _publishStable(_ load: () -> UInt, _ publish: (UInt) -> Void) -> UInt {
        var bits = load()
        #if DEBUG
            if _PostPause.armed.load(ordering: .relaxed) { _PostPause.fire() }
        #endif
        while true {
            publish(bits)
            _Fence.light()
            let again = load()
            if again == bits { return bits }
            bits = again
        }
    }

    /// A typed post. Plain subscribers get an envelope made once, when the first one is reached.
    /// `envelope` tells whether `Payload` is `PostObject` (the topic's `_envelope`); `sendable`
    /// whether the poster posted `Payload` as `Sendable` (the envelope withholds it otherwise).
    /// `patterns` is the center's pattern state, read when the post started; when it is not 0
    /// and the name has a route, `skipsPatterns` is set to whether the post may skip the pattern
    /// subscriptions (see `_skipsPatterns`); the caller sets it beforehand for the other cases.
    @inline(__always)
    func _post<Payload, Reporter: _EngineReporting>(
        _ key: _NameKey, _ payload: Payload, direct: ObjectIdentifier, main: ObjectIdentifier, envelope: Bool,
        sendable: Bool = true, sender: AnyObject?, patterns: UInt, skipsPatterns skip: inout Bool,
        reporter: Reporter
    ) -> Int {
        if envelope {
            // The caller hands the same object to the patterns: no envelope to keep for them.
            let object = unsafeDowncast(payload as AnyObject, to: PostObject.self)
            return _inPostFrame(key, reporter) { start in
                if patterns != 0 { skip = _skipsPatterns(start, key.name, patterns, reporter) }
                return _walkEnvelope(start, object, sender: sender)
            }
        }
        return _inPostFrame(key, reporter) { start in
            if patterns != 0 { skip = _skipsPatterns(start, key.name, patterns, reporter) }
            var made: PostObject?
            return _walkTyped(
                start, payload, direct: direct, main: { main }, sendable: sendable, sender: sender, envelope: &made)
        }
    }

    /// Inside a post's frame, with pattern state `state` (not 0): whether the post may skip the
    /// pattern subscriptions. A route remembers the state at which no pattern could match its
    /// name (`patternMiss`), so a post beside many patterns of other prefixes pays one
    /// comparison; otherwise the center looks (`_noPatternMatches`, once per name's route and
    /// pattern subscription at most while nothing matches).
    @inline(__always)
    func _skipsPatterns<Reporter: _EngineReporting>(
        _ start: _PostStart, _ name: String, _ state: UInt, _ reporter: Reporter
    ) -> Bool {
        start.route._withUnsafeGuaranteedRef { $0.patternMiss.load(ordering: .relaxed) == state }
            || reporter._noPatternMatches(start.route, name, state)
    }

    /// The walk of a typed post (`_walk` with the calls for `Payload`), shared by the post with
    /// and without pattern subscriptions. `made` is the envelope plain subscribers share, made
    /// when the first one is reached.
    @inline(__always)
    func _walkTyped<Payload>(
        _ start: _PostStart, _ payload: Payload, direct: ObjectIdentifier, main: () -> ObjectIdentifier,
        sendable: Bool, sender: AnyObject?, envelope made: inout PostObject?
    ) -> Int {
        _walk(
            start, direct: direct,
            call: { try unsafeDowncast($0, to: _Handler<Payload>.self).handler(payload) },
            main: main,
            callMain: { try unsafeDowncast($0, to: _MainHandler<Payload>.self).call(payload) },
            takeMain: { entry, onMainActor in
                unsafeDowncast(entry, to: _MainHandler<Payload>.self).take(
                    payload, onMainActor: onMainActor, route: start.route)
            },
            other: {
                // The withheld form makes an envelope per entry (no `made`): the two forms of
                // `post` then differ in shape, not in a constant only. The compiler merges
                // functions that differ in constants into one that takes them as parameters,
                // which cost the common, `Sendable` form a call and a parameter per post.
                sendable
                    ? _deliverTyped(payload, to: $0, route: start.route, sender: sender, envelope: &made)
                    : _deliverWithheld(payload, to: $0, route: start.route, sender: sender)
            })
    }

    /// The walk of a plain post (`_walk` with the calls for the envelope `object`), shared by
    /// the post with and without pattern subscriptions.
    @inline(__always)
    func _walkEnvelope(_ start: _PostStart, _ object: PostObject, sender: AnyObject?) -> Int {
        _walk(
            start, direct: ObjectIdentifier(_EnvelopeHandler.self),
            call: { try unsafeDowncast($0, to: _EnvelopeHandler.self).handler(object) },
            main: { ObjectIdentifier(_MainHandler<PostObject>.self) },
            callMain: { try unsafeDowncast($0, to: _MainHandler<PostObject>.self).call(object) },
            takeMain: { entry, onMainActor in
                unsafeDowncast(entry, to: _MainHandler<PostObject>.self).take(
                    object, onMainActor: onMainActor, route: start.route)
            },
            other: { entry in
                // Borrowed, not retained: the post's frame keeps the route alive.
                start.route._withUnsafeGuaranteedRef { entry.deliver(object, sender: sender, route: $0) }
            })
    }

    /// A handler that the walk called directly threw: reports it (see `ThrownErrors.swift`). Out
    /// of line, so that the walk's loop keeps only the test of the error register; the entry is
    /// the one the post's frame calls (`at`), so the loop need not keep it across the call.
    @inline(never)
    func _noteThrew(_ error: any Error, _ start: _PostStart) {
        let entry = _SlotBuffer.entry(start.record.at(start.frame))
        // Borrowed, not retained: the post's frame keeps the route and the entry alive.
        entry._withUnsafeGuaranteedRef { entry in
            start.route._withUnsafeGuaranteedRef { $0.noteThrew(error, site: entry.site) }
        }
    }

    /// A typed post's slow path, out of line so that the walk's loop stays small: offers the
    /// payload itself to `entry` (`deliver(payload:of:route:)`, for entries that take it without
    /// an envelope), and otherwise hands it the envelope, made once per post in `envelope`.
    @inline(never)
    func _deliverTyped<Payload>(
        _ payload: Payload, to entry: _Entry, route: Unmanaged<_Route>, sender: AnyObject?,
        envelope made: inout PostObject?
    ) -> Bool {
        _deliverTyped(payload, to: entry, route: route, sender: sender, sendable: true, envelope: &made)
    }

    /// `_deliverTyped` for a payload posted as not `Sendable`: the envelope withholds it, and is
    /// made for this entry alone.
    @inline(never)
    func _deliverWithheld<Payload>(
        _ payload: Payload, to entry: _Entry, route: Unmanaged<_Route>, sender: AnyObject?
    ) -> Bool {
        var made: PostObject?
        return _deliverTyped(payload, to: entry, route: route, sender: sender, sendable: false, envelope: &made)
    }

    @inline(__always)
    private func _deliverTyped<Payload>(
        _ payload: Payload, to entry: _Entry, route: Unmanaged<_Route>, sender: AnyObject?, sendable: Bool,
        envelope made: inout PostObject?
    ) -> Bool {
        // Borrowed, not retained: the post's frame keeps the route alive.
        route._withUnsafeGuaranteedRef { route in
            if let taken = withUnsafePointer(
                to: payload, { entry.deliver(payload: $0, of: Payload.self, route: route) })
            {
                return taken
            }
            let object = made ?? PostObject(_typed: payload, sendable: sendable)
            made = object
            return entry.deliver(object, sender: sender, route: route)
        }
    }

    /// A plain post. `makeEnvelope` runs only when somebody listens to the name. `patterns` and
    /// `skipsPatterns` as for the typed post; when the post may not skip the patterns, `made` is
    /// set to the envelope it made, for the pattern subscriptions to share.
    @inline(__always)
    func _post<Reporter: _EngineReporting>(
        _ key: _NameKey, sender: AnyObject?, patterns: UInt, skipsPatterns skip: inout Bool,
        envelope made: inout PostObject?, reporter: Reporter, makeEnvelope: () -> PostObject
    ) -> Int {
        _inPostFrame(key, reporter) { start in
            if patterns != 0 { skip = _skipsPatterns(start, key.name, patterns, reporter) }
            let object = makeEnvelope()
            if !skip { made = object }
            return _walkEnvelope(start, object, sender: sender)
        }
    }
}

#if DEBUG
    /// For tests, in debug builds only: a pause that one thread takes in its next `_publishStable`,
    /// right after its first read of the published word and before it publishes it, so that a test
    /// can replace and free that word's table or buffer in the window the re-read exists for.
    enum _PostPause {
        /// Whether some thread armed a pause (read by every `_publishStable` of a debug build).
        static let armed = Atomic<Bool>(false)

        /// The armed thread's record and what it runs.
        private static let pending = _PlatformMutex<_UncheckedSendable<(thread: UInt, body: () -> Void)?>>(
            _UncheckedSendable(nil))

        /// Arms `body` for the calling thread's next `_publishStable`; it runs once.
        static func arm(_ body: @escaping () -> Void) {
            let me = _ThreadRecord.current.bits
            pending.withLock { $0 = _UncheckedSendable((me, body)) }
            armed.store(true, ordering: .sequentiallyConsistent)
        }

        /// Runs the armed body if the calling thread armed it.
        static func fire() {
            let me = _ThreadRecord.current.bits
            let body = pending.withLock { box -> (() -> Void)? in
                guard let armed = box.value, armed.thread == me else { return nil }
                box = _UncheckedSendable(nil)
                return armed.body
            }
            guard let body else { return }
            armed.store(false, ordering: .sequentiallyConsistent)
            body()
        }
    }
#endif
