import Dispatch
import Synchronization

/// A coalescing registration on an actor (`subscribe(_:on:coalesced: true)`): the newest payload
/// waits in a slot, and one task at a time hops onto the actor to hand it over; see the comment
/// at the top of this file. The actor is held weakly; a task holds it only while it runs on it.
final class _CoalescingActorEntry<A: Actor, Payload: Sendable>: _Entry, @unchecked Sendable {
    // @unchecked: as `_ActorEntry`: `handler` is written only by `releaseHandler()`, after the
    // canceller's wait, and read only inside a queued-call frame; `actor` is a weak reference
    // written once in `init`; `slot` is locked.

    @exclusivity(unchecked) weak var actor: A?
    @exclusivity(unchecked) var handler: ((isolated A, Payload) throws -> Void)?
    /// The pending payload. It counts with the center's tracker, so that
    /// `waitForPendingDeliveries()` waits for it as for every actor delivery.
    let slot: _PaceSlot<Payload>
    /// The only sender this subscription accepts (its sender filter), held weakly.
    let targets: _WeakTargets
    /// For `replay: true`: the version of the retained post put in the slot when subscribing (0:
    /// none), written before the entry is published; see `_PacedEntry.replayed`.
    @exclusivity(unchecked) var replayed: UInt64 = 0
    /// Whether a post found the actor gone and reported it (`Diagnostic.subscriberGone`).
    let goneNoted = Atomic<Bool>(false)

    init(
        actor: A, tracker: _DeliveryTracker?, sender: AnyObject? = nil,
        handler: @escaping (isolated A, Payload) throws -> Void
    ) {
        self.actor = actor
        self.handler = handler
        self.slot = _PaceSlot(_PacingMachine(interval: 0, debounce: false), tracker: tracker)
        self.targets = _WeakTargets(sender: sender)
    }

    override func deliver(_ post: PostObject, sender postSender: AnyObject?, route: _Route) -> Bool {
        if replayed != 0, let version = _RetainedPost.version(of: postSender), version <= replayed { return false }
        guard targets.admits(postSender) else { return false }
        guard actor != nil else { return noteGone(route) }
        guard let payload = _extract(Payload.self, from: post) else { return false }
        if slot.offer(payload) != nil { start(route) }
        return true
    }

    /// As `_PacedEntry`'s: the envelope path when a sender filter or a replay needs the sender.
    override func deliver(payload: UnsafeRawPointer, of type: Any.Type, route: _Route) -> Bool? {
        guard ObjectIdentifier(type) == ObjectIdentifier(Payload.self), !targets.filtered, replayed == 0 else {
            return nil
        }
        guard actor != nil else { return noteGone(route) }
        if slot.offer(raw: payload) != nil { start(route) }
        return true
    }

    /// A post found the actor gone: reports it once, when the center has diagnostics set.
    /// Returns `false`, the post's answer.
    private func noteGone(_ route: _Route) -> Bool {
        if !goneNoted.exchange(true, ordering: .relaxed) { slot.tracker?.noteGone(route, "actor", site: site) }
        return false
    }

    override func goneTarget(keeping keep: inout [AnyObject]) -> String? {
        guard let actor else { return "actor gone" }
        keep.append(actor)
        return targets.goneTarget(keeping: &keep)
    }

    /// Starts the task of one call. It holds the entry, and the actor only while it runs on it.
    func start(_ route: _Route) {
        let box = _UncheckedSendable((self, route))
        // Detached at one fixed priority, as every actor delivery (`_ActorRunQueue.startTask()`).
        Task.detached(priority: _deliveryTaskPriority) {
            let (entry, route) = box.value
            guard let actor = entry.actor else {
                entry.slot.dropPayload(endingChain: true)
                return
            }
            await entry.run(on: actor, route)
        }
    }

    private func run(on actor: isolated A, _ route: _Route) async {
        // `nil` when the frame was refused; else what the call returned.
        var called: UInt64?? = nil
        if let frame = route._beginQueuedCall(self) {
            called = withUnsafeTemporaryAllocation(of: Payload.self, capacity: 1) { scratch -> UInt64? in
                let payload = scratch.baseAddress.unsafelyUnwrapped
                let (wake, epoch) = slot.take(into: payload)
                guard wake == .call else { return nil }  // coalesced: never `.wait`
                do { try handler?(actor, payload.pointee) } catch { _noteThrew(error, route: route) }
                payload.deinitialize(count: 1)
                return slot.finished(epoch)
            }
            route._endQueuedCall(frame)
        }
        let next: UInt64?
        if let called {
            next = called
        } else {
            let active = state.load(ordering: .relaxed) == _Entry.active && !route.detached.load(ordering: .relaxed)
            next = slot.refused(rearm: active)
        }
        if next != nil { start(route) }
    }

    override func releaseHandler() {
        slot.dropPayload(endingChain: false)
        handler = nil
    }

    override func isReachable(keeping keep: inout [AnyObject]) -> Bool {
        guard targets.isReachable(keeping: &keep), let actor else { return false }
        keep.append(actor)
        return true
    }
}
