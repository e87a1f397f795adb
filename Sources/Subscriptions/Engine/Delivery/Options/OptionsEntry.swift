import Dispatch
import Synchronization

/// How an `_OptionsEntry` runs its handler.
enum _Executor {
    /// On the posting thread.
    case immediate
    /// Asynchronously on a queue.
    case queue(DispatchQueue)
    /// On the main actor: synchronously when posted on the main thread, else via the main queue.
    case mainActor
}

/// Every registration with an option: queued or main-actor delivery, one-shot, a sender filter,
/// or a weakly held observer (selector style). Bigger than `_Handler` and reached through a
/// virtual call, which is fine: the option's own cost (a dispatch, a weak load) dominates.
final class _OptionsEntry<Payload>: _Entry, @unchecked Sendable {
    /// Calls the user's handler, or the selector on the observer passed in (loaded by the entry,
    /// which is the one place that holds it: the closure captures no second weak reference).
    /// Returns `false` when it did not run. Cleared by `releaseHandler()` once cancelled: read
    /// only inside a frame after checking the state, written only after the canceller's wait, so
    /// the two never overlap.
    @exclusivity(unchecked) var invoke: ((AnyObject?, Payload) throws -> Bool)?
    let executor: _Executor
    let once: Bool
    /// The observer of a selector registration and the sender filter, held weakly.
    let targets: _WeakTargets
    /// Counts the deliveries this entry schedules, for `PostCenter.waitForPendingDeliveries()`;
    /// `nil` for immediate entries, which schedule nothing.
    let tracker: _DeliveryTracker?
    /// Set (before the entry is published) for a `replay: true` subscription: holds live posts
    /// back until the retained one was delivered (see `Retained.swift`).
    @exclusivity(unchecked) var replay: _Replay<Payload>?
    /// Whether a post found the observer gone and reported it (`Diagnostic.subscriberGone`).
    let goneNoted = Atomic<Bool>(false)
    /// Where queued and main-actor deliveries go (the center's mailbox of the queue, or its main
    /// mailbox); `nil` for immediate entries, and for entries without a tracker.
    let mailbox: _QueueMailbox?

    init(
        executor: _Executor, once: Bool, observer: AnyObject?, sender: AnyObject?, tracker: _DeliveryTracker?,
        invoke: @escaping (AnyObject?, Payload) throws -> Bool
    ) {
        self.invoke = invoke
        self.tracker = tracker
        switch executor {
        case .immediate: self.mailbox = nil
        case .queue(let queue): self.mailbox = tracker?.mailbox(for: queue)
        case .mainActor: self.mailbox = tracker?.main
        }
        self.executor = executor
        self.once = once
        self.targets = _WeakTargets(observer: observer, sender: sender)
    }

    override func deliver(_ post: PostObject, sender postSender: AnyObject?, route: _Route) -> Bool {
        guard targets.admits(postSender) else { return false }
        let target = target()
        guard target.alive else { return noteGone(route) }
        guard let payload = _extract(Payload.self, from: post) else { return false }
        if let replay { return replay.admit(payload, sender: postSender, entry: self, target: target, route: route) }
        return run(payload, target: target, route: route)
    }

    /// A typed post of exactly `Payload` to an entry without a sender filter or replay hands the
    /// value over without an envelope (an allocation per post) or a cast.
    override func deliver(payload: UnsafeRawPointer, of type: Any.Type, route: _Route) -> Bool? {
        guard !targets.filtered, replay == nil, ObjectIdentifier(type) == ObjectIdentifier(Payload.self) else {
            return nil
        }
        let target = target()
        guard target.alive else { return noteGone(route) }
        return run(payload.assumingMemoryBound(to: Payload.self).pointee, target: target, route: route)
    }

    /// Delivers an extracted payload: claims a one-shot, then calls or schedules the handler.
    func run(_ payload: Payload, target: (alive: Bool, observer: AnyObject?), route: _Route) -> Bool {
        if once {
            // Exactly one post wins, even when several threads post at once.
            guard
                state.compareExchange(expected: _Entry.active, desired: _Entry.spent, ordering: .acquiringAndReleasing)
                    .exchanged
            else { return false }
            route._detach(self)
        }
        switch executor {
        case .immediate:
            return call(target.observer, payload, route: route)
        case .mainActor where _isOnMainActor():
            return call(target.observer, payload, route: route)
        case .mainActor:
            if let mailbox {
                mailbox.append(payload, entry: self, route: route)
            } else {
                schedule(payload, on: .main, route: route)
            }
            return true
        case .queue(let queue):
            if let mailbox {
                mailbox.append(payload, entry: self, route: route)
            } else {
                schedule(payload, on: queue, route: route)
            }
            return true
        }
    }

    /// Runs the handler later on `queue`, inside a frame of its own so that `cancel()` waits for
    /// it; dropped if the subscription was cancelled or paused meanwhile, or the entry is gone.
    private func schedule(_ payload: Payload, on queue: DispatchQueue, route: _Route) {
        let box = _UncheckedSendable((payload, route))
        let pending = tracker?.begin()
        queue.async { [weak self, tracker] in
            defer { if let pending { tracker?.end(pending) } }
            box.value.1._runQueuedCall(
                self,
                call: { entry in
                    let target = entry.target()
                    if target.alive { _ = entry.call(target.observer, box.value.0, route: box.value.1) }
                }, refused: { _ in })
        }
    }

    /// A queued or main-actor delivery that a mailbox of the center held (see `_QueueMailbox`).
    override func runQueued(_ payload: UnsafeMutableRawPointer, route: _Route) {
        let value = _RecordBuffer.takePayload(Payload.self, payload)
        guard let frame = route._beginQueuedCall(self) else { return }
        let target = target()
        if target.alive { _ = call(target.observer, value, route: route) }
        route._endQueuedCall(frame)
    }

    /// Calls `invoke` (inside a frame, the state checked); an error it throws is reported
    /// (`Diagnostic.handlerThrew`) and the call counts as run. Returns whether it ran: `false`
    /// when the entry was released or the selector's observer is gone.
    @inline(__always)
    func call(_ observer: AnyObject?, _ payload: Payload, route: _Route) -> Bool {
        do {
            return try invoke?(observer, payload) ?? false
        } catch {
            route.noteThrew(error, site: site)
            return true
        }
    }

    override func dropQueued(_ payload: UnsafeMutableRawPointer) {
        _ = _RecordBuffer.takePayload(Payload.self, payload)
    }

    /// The observer to call the selector on, loaded once (see `_WeakTargets.target()`).
    @inline(__always)
    func target() -> (alive: Bool, observer: AnyObject?) { targets.target() }

    override func releaseHandler() {
        invoke = nil
    }

    /// A post found the observer gone: reports it once, when the center has diagnostics set.
    /// Returns `false`, the post's answer.
    private func noteGone(_ route: _Route) -> Bool {
        if !goneNoted.exchange(true, ordering: .relaxed) { tracker?.noteGone(route, "observer", site: site) }
        return false
    }

    override func goneTarget(keeping keep: inout [AnyObject]) -> String? {
        targets.goneTarget(keeping: &keep)
    }

    override func isReachable(keeping keep: inout [AnyObject]) -> Bool {
        targets.isReachable(keeping: &keep)
    }
}
