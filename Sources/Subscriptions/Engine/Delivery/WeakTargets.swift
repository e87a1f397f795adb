/// The objects a registration holds weakly and depends on, other than an actor: the observer of
/// a selector registration (`observed`) and the one sender a subscription made with `from:`
/// accepts (`filtered`). Stored inline (a `let`) by every entry that has either: options,
/// paced, actor and coalescing actor entries, which differ in what they run, not in how they
/// filter or tell that a target is gone.
///
/// Written only in the entry's `init`; read from any thread (a weak load retains what it
/// returns, so a target read alive stays alive while the reader holds it).
struct _WeakTargets {
    /// The observer of a selector registration (`observed`), held weakly.
    weak var observer: AnyObject?  // written only in init (an immutable weak property needs Swift 6.3)
    /// Whether the registration has an observer (so a `nil` one is gone).
    let observed: Bool
    /// The observer's identity at registration, for `removeObserver(_:)`, which must find the
    /// registrations without loading (retaining) any observer. An address can be reused after the
    /// observer died, so a match means "this observer or a dead one".
    let observerID: ObjectIdentifier?
    /// The only sender this subscription accepts (`filtered`), held weakly.
    weak var sender: AnyObject?  // written only in init (an immutable weak property needs Swift 6.3)
    /// Whether the subscription was made with a sender (so a `nil` one is gone).
    let filtered: Bool

    init(observer: AnyObject? = nil, sender: AnyObject?) {
        self.observer = observer
        self.observed = observer != nil
        self.observerID = observer.map(ObjectIdentifier.init)
        self.sender = sender
        self.filtered = sender != nil
    }

    /// Whether a post made `from:` `postSender` passes the sender filter: every post without a
    /// filter; with one, only a post whose sender (a retained post's: see `_postSender`) is the
    /// filter's sender, still alive.
    @inline(__always)
    func admits(_ postSender: AnyObject?) -> Bool {
        guard filtered else { return true }
        guard let sender, let postSender = _postSender(postSender) else { return false }
        return sender === postSender
    }

    /// Whether a selector registration's observer is gone (never for a plain handler).
    @inline(__always)
    var observerGone: Bool { observed && observer == nil }

    /// The observer to call the selector on, loaded once: `alive` is `false` when a selector
    /// registration's observer is gone; `observer` is `nil` for plain handlers.
    @inline(__always)
    func target() -> (alive: Bool, observer: AnyObject?) {
        guard observed else { return (true, nil) }
        let observer = self.observer
        return (observer != nil, observer)
    }

    /// Whether every target this registration has is alive; appends each one to `keep`, so that
    /// the caller releases them after its lock (a target's deinit may cancel a subscription).
    func isReachable(keeping keep: inout [AnyObject]) -> Bool {
        goneTarget(keeping: &keep) == nil
    }

    /// What went: `"observer gone"` or `"sender gone"` (the observer asked first), or `nil` when
    /// every target is alive (each appended to `keep`, as in `isReachable(keeping:)`).
    func goneTarget(keeping keep: inout [AnyObject]) -> String? {
        if observed {
            guard let observer else { return "observer gone" }
            keep.append(observer)
        }
        if filtered {
            guard let sender else { return "sender gone" }
            keep.append(sender)
        }
        return nil
    }
}
