import Synchronization

// Retained posts and replay.
//
// **Storage.** A center keeps the latest retained post of each name in `_RetainedTable`, behind
// one lock of its own (retained posts and replaying subscriptions are rare next to posts). Each
// retained post is a `_RetainedPost` record with a version from a center-wide counter.
//
// **Hand-over.** A `replay: true` subscription is an `_OptionsEntry` with a `_Replay`. Under the
// table's lock the subscriber publishes the entry (`_insert`, which takes the route's lock
// inside: the order is always table lock, then route lock) and reads the name's record. A
// retained post stores its record under the same lock *before* it starts delivering. So for
// every retained post R, either
// - R stored before the subscriber's section: R is the record read (or an older one, replaced
//   by the one read). R's walk may still reach the new entry; the entry drops it because R's
//   version is at most the replayed one. R travels as the post's `sender` so that the entry can
//   tell (sender filters compare with the sender R keeps, `_RetainedPost.sender`, read through
//   `_postSender`); or
// - R stored after: R's walk starts after the entry was published, so it reaches the entry and
//   is delivered live.
// Posts without `retain:` need no version: a post made before a retained post R on the same
// thread finished its walk before R stored, so if R is replayed, that post started before the
// entry was published (the publication is inside the section) and never reaches it.
//
// **Order.** Until the replayed post was handed to the handler, the entry parks live posts
// (posters append them to a list and move on; they never wait). The subscribing thread then
// delivers the parked posts in arrival order, skipping retained posts replayed already, and
// switches the entry to live under the list's lock when the list is empty. All of this happens
// before `subscribe` returns, on the subscribing thread, with no lock held while handlers run.

/// One retained post: the envelope every subscriber is handed, the typed payload (held strongly,
/// since the envelope holds an object payload weakly), its sender (held weakly) and its version.
final class _RetainedPost: @unchecked Sendable {
    // @unchecked: immutable after the table's lock published it (`version` is written once,
    // under that lock, before the record is visible to anyone else; `sender` only in `init`).
    // `value` is a payload the poster passed as `Sendable`, or `nil` for envelope posts.
    let envelope: PostObject
    let value: Any?
    /// Who posted it (`from:`), held weakly: a replay to a subscription made `from:` it needs it
    /// alive, and a retained post must not keep its poster alive.
    weak var sender: AnyObject?  // written only in init (an immutable weak property needs Swift 6.3)
    @exclusivity(unchecked) var version: UInt64 = 0

    init<Payload>(_ payload: Payload, sender: AnyObject?) {
        self.sender = sender
        if Payload.self == PostObject.self {
            envelope = unsafeDowncast(payload as AnyObject, to: PostObject.self)
            value = nil
        } else {
            envelope = PostObject(_typed: payload)
            value = payload
        }
    }

    /// The payload as `T`: the typed value, or what the envelope gives for `T`.
    func payload<T>(as type: T.Type) -> T? {
        if let value, T.self != PostObject.self { return value as? T }
        return _extract(T.self, from: envelope)
    }

    /// The version of the retained post a delivery belongs to: `sender` is its record for a
    /// retained post, anything else (`nil`, a real sender) for other posts.
    @inline(__always)
    static func version(of sender: AnyObject?) -> UInt64? {
        guard let sender, ObjectIdentifier(type(of: sender)) == ObjectIdentifier(_RetainedPost.self) else {
            return nil
        }
        return unsafeDowncast(sender, to: _RetainedPost.self).version
    }

    /// Whether a subscription with these targets is to be replayed this post: every subscription
    /// without a sender filter is; a filtered one only when this post was made `from:` the very
    /// object it filters on, both still alive (the record passes as a post's sender does, see
    /// `_postSender`).
    func matches(_ targets: _WeakTargets) -> Bool {
        targets.admits(self)
    }
}

/// The sender a `from:` filter compares with: the post's sender, or for a retained post (whose
/// record travels as the sender, see `_RetainedPost.version(of:)`) the sender it was posted
/// `from:`, if still alive. Only filtered entries and sender taps call it: never a plain post.
@inline(__always)
func _postSender(_ sender: AnyObject?) -> AnyObject? {
    guard let sender, ObjectIdentifier(type(of: sender)) == ObjectIdentifier(_RetainedPost.self) else {
        return sender
    }
    return unsafeDowncast(sender, to: _RetainedPost.self).sender
}

/// The latest retained post of each name. Guarded by `PostCenter._retained`.
struct _RetainedTable {
    var records: [String: _RetainedPost] = [:]
    var lastVersion: UInt64 = 0
    /// The names a relay watches (see `RetainedWatchers.swift`); empty in a center without one.
    var watchers: [String: _RetainedWatcher] = [:]

    /// Stores `record` as the latest of `name`; returns the one it replaces, to be released
    /// after unlocking (its payload's deinit is user code).
    mutating func store(_ record: _RetainedPost, for name: String) -> _RetainedPost? {
        lastVersion += 1
        record.version = lastVersion
        return records.updateValue(record, forKey: name)
    }
}

/// The replay state of one `replay: true` subscription: parked live posts until the subscriber
/// delivered the retained one, then the version below which retained posts are stale.
final class _Replay<Payload>: @unchecked Sendable {
    // @unchecked: `parked` is only touched under its lock; `version` is written before `live`
    // is set (releasing) and read only after `live` was read `true` (acquiring).
    /// Set once the parked posts were delivered: from then on posts are delivered at once.
    private let live = Atomic<Bool>(false)
    /// The version of the replayed post (0: none); retained posts up to it are not delivered.
    private let version = Atomic<UInt64>(0)
    /// Live posts that arrived before the replay finished, in arrival order, with the version of
    /// the retained post each belongs to (0 for other posts).
    /// Boxed: a payload of immediate delivery need not be `Sendable`, and the lock (a `Mutex` on
    /// Apple platforms) takes only sendable state; it is only handed from the posting thread to
    /// the subscribing thread, which delivers it as the poster would have.
    private let parked = _PlatformMutex<[_UncheckedSendable<(Payload, UInt64)>]>([])

    init() {}

    /// A post reached the entry (on the posting thread, inside its frame): deliver it, park it,
    /// or drop it when it is a retained post the subscriber was handed already.
    @inline(__always)
    func admit(
        _ payload: Payload, sender: AnyObject?, entry: _OptionsEntry<Payload>,
        target: (alive: Bool, observer: AnyObject?), route: _Route
    ) -> Bool {
        let retained = _RetainedPost.version(of: sender) ?? 0
        if !live.load(ordering: .acquiring) {
            let item = _UncheckedSendable((payload, retained))
            let kept = parked.withLock { list -> Bool in
                if live.load(ordering: .acquiring) { return false }
                list.append(item)
                return true
            }
            if kept { return true }
        }
        if retained != 0 && retained <= version.load(ordering: .relaxed) { return false }
        return entry.run(payload, target: target, route: route)
    }

    /// Called by the subscribing thread once the entry is published: delivers `record` (the
    /// retained post read in the same section, if any), then the parked posts, then goes live.
    func finish(_ record: _RetainedPost?, entry: _OptionsEntry<Payload>, route: _Route) {
        var payloads: [Payload] = []
        if let record, record.matches(entry.targets),
            let payload = record.payload(as: Payload.self)
        {
            payloads.append(payload)
        }
        finish(replaying: payloads, upTo: record?.version ?? 0, entry: entry, route: route)
    }

    /// `finish` for several retained posts (a pattern subscription's, in the order they were
    /// retained): hands `payloads` over, then the parked posts, dropping retained posts of a
    /// version up to `replayed` (the last version stored when the entry was published).
    func finish(replaying payloads: [Payload], upTo replayed: UInt64, entry: _OptionsEntry<Payload>, route: _Route) {
        version.store(replayed, ordering: .relaxed)
        for payload in payloads { handOver(payload, entry: entry, route: route) }
        while true {
            let batch = parked.withLock { list -> [_UncheckedSendable<(Payload, UInt64)>] in
                if list.isEmpty { live.store(true, ordering: .releasing) }
                defer { list = [] }
                return list
            }
            if batch.isEmpty { return }
            for item in batch where item.value.1 == 0 || item.value.1 > replayed {
                handOver(item.value.0, entry: entry, route: route)
            }
        }
    }

    /// One call of the hand-over, made the way a queued call is: inside a frame that publishes
    /// the entry (so that a `cancel()` on another thread waits for it, and one inside it returns
    /// at once), and only if the entry is still active after the frame's fence (so that nothing
    /// parked runs after `cancel()` or `removeObserver(_:)` returned, or while paused).
    private func handOver(_ payload: Payload, entry: _OptionsEntry<Payload>, route: _Route) {
        guard let frame = route._beginQueuedCall(entry) else { return }
        let target = entry.target()
        if target.alive { _ = entry.run(payload, target: target, route: route) }
        route._endQueuedCall(frame)
    }
}

extension PostCenter {
    /// Stores `record` as the latest retained post of `key`, then posts it. The record travels as
    /// the post's sender, so that replaying subscriptions can tell it from later posts.
    /// A watcher of the name (a relay) wraps the delivery to the name's own subscribers; the
    /// matching pattern subscriptions, if any, get the post after it.
    func _postRetained(_ key: _NameKey, _ record: _RetainedPost) -> Int {
        let (replaced, watcher) = _retained.withLock { table in
            (table.store(record, for: key.name), table.watchers.isEmpty ? nil : table.watchers[key.name])
        }
        withExtendedLifetime(replaced) {}  // released here, after unlocking
        let patterns = _patternState.load(ordering: .relaxed)  // read when the post starts
        let delivered =
            if let watcher {
                watcher.posting { _post(key, sender: record) { record.envelope } }
            } else {
                _post(key, sender: record) { record.envelope }
            }
        guard patterns != 0 else { return delivered }
        // After the watcher's delivery: a relay watches the name's own subscribers only.
        return delivered &+ _postPatterns(key.name, patterns, sender: record) { record.envelope }
    }

    /// The latest retained post of `name`, if any.
    func _retainedRecord(_ name: String) -> _RetainedPost? {
        _retained.withLock { $0.records[name] }
    }

    /// Forgets the retained post of `name`, releasing it after unlocking; then tells the name's
    /// watcher (a relay), if any.
    func _clearRetained(_ name: String) {
        let (removed, watcher) = _retained.withLock { table in
            (table.records.removeValue(forKey: name), table.watchers.isEmpty ? nil : table.watchers[name])
        }
        withExtendedLifetime(removed) {}
        watcher?.cleared()
    }

    /// A handler entry that can replay: always an `_OptionsEntry`, never the direct-call `_Handler`.
    func _replayableEntry<Payload>(
        _ executor: _Executor, once: Bool = false, sender: AnyObject? = nil,
        _ handler: @escaping (Payload) throws -> Void
    ) -> _OptionsEntry<Payload> {
        let tracker = _tracker(executor)
        return _OptionsEntry(executor: executor, once: once, observer: nil, sender: sender, tracker: tracker) {
            _, value in
            try handler(value)
            return true
        }
    }
}
