import Dispatch
import Synchronization

/// The newest payload of one paced subscription, with its machine, behind a spin lock.
///
/// The storage is managed by hand (one payload's worth, allocated once): the owner's methods run
/// unspecialised, where an `Optional<Payload>` would ask the runtime for its metadata on every
/// post. No user code runs under the lock: a replaced payload is destroyed after unlocking.
final class _PaceSlot<Payload>: @unchecked Sendable {
    // @unchecked: `machine`, `storage`'s contents and `epoch` are only touched under `locked`;
    // `tracker` is immutable.

    private let locked = Atomic<Bool>(false)
    @exclusivity(unchecked) private var machine: _PacingMachine
    /// One payload's memory; initialised exactly while `machine.full`.
    private let storage = UnsafeMutablePointer<Payload>.allocate(capacity: 1)
    /// The `waitForPendingDeliveries()` epoch of the pending payload (counted when it filled the
    /// slot, ended when it was delivered or dropped).
    @exclusivity(unchecked) private var epoch: UInt64 = 0
    let tracker: _DeliveryTracker?
    /// `machine.needsPostTime`, read without the lock.
    private let needsPostTime: Bool

    init(_ machine: _PacingMachine, tracker: _DeliveryTracker?) {
        self.machine = machine
        self.tracker = tracker
        self.needsPostTime = machine.needsPostTime
    }

    /// Stores the payload at `raw` (a `Payload`) as the newest: `offer(_:)`, with a plain copy of
    /// the bytes when `Payload` is trivial (an `Int`, a `Double`, a struct of them). This code
    /// runs unspecialised, where every copy, move and destruction of a `Payload` is an indirect
    /// call into its value witnesses; a trivial payload needs none of them and has no deinit, so
    /// the replaced one is simply overwritten.
    @inline(__always)
    func offer(raw: UnsafeRawPointer) -> UInt64? {
        guard _isPOD(Payload.self) else { return offer(raw.assumingMemoryBound(to: Payload.self).pointee) }
        let now = needsPostTime ? _pacingNow() : 0
        let size = MemoryLayout<Payload>.size
        lock()
        if size == 8 {
            // One word (an `Int`, a `Double`, a pointer-sized struct): a load and a store, not a
            // call to `memcpy` with a size known only at run time.
            UnsafeMutableRawPointer(storage).storeBytes(of: raw.loadUnaligned(as: UInt64.self), as: UInt64.self)
        } else {
            UnsafeMutableRawPointer(storage).copyMemory(from: raw, byteCount: size)
        }
        let (filled, arm) = machine.posted(at: now)
        if filled, let tracker { epoch = tracker.begin() }
        unlock()
        return arm
    }

    /// Stores `payload` as the newest. Returns the delay of a wake-up to schedule, if none is
    /// armed.
    @inline(__always)
    func offer(_ payload: Payload) -> UInt64? {
        let now = needsPostTime ? _pacingNow() : 0
        lock()
        let replaced = machine.full
        // `payload` stands in for "nothing replaced": destroying a copy of it is harmless.
        let old = replaced ? storage.move() : payload
        storage.initialize(to: payload)
        let (filled, arm) = machine.posted(at: now)
        if filled, let tracker { epoch = tracker.begin() }
        unlock()
        withExtendedLifetime(old) {}  // a replaced payload's deinit is user code: after unlocking
        return arm
    }

    /// A wake-up, inside its call frame: on `.call`, the payload is moved to `out` and its epoch
    /// returned; the caller ends it with `finished(_:)` after the call.
    func take(into out: UnsafeMutablePointer<Payload>) -> (_PacingMachine.Wake, UInt64) {
        let now = _pacingNow()
        lock()
        let wake = machine.woke(at: now)
        if wake == .call { out.moveInitialize(from: storage, count: 1) }
        let epoch = self.epoch
        unlock()
        return (wake, epoch)
    }

    /// The call returned: counts its delivery as done; returns the delay of the next wake-up.
    func finished(_ epoch: UInt64) -> UInt64? {
        let now = _pacingNow()
        lock()
        let next = machine.called(at: now)
        unlock()
        tracker?.end(epoch)
        return next
    }

    /// A wake-up was refused: when `rearm` (the entry is active again), keeps the chain and
    /// returns 0 (wake up again at once); otherwise drops the payload and ends the chain.
    func refused(rearm: Bool) -> UInt64? {
        if rearm { return 0 }
        dropPayload(endingChain: true)
        return nil
    }

    /// Drops the pending payload, if any (destroyed after unlocking), and counts it as done.
    func dropPayload(endingChain: Bool) {
        withUnsafeTemporaryAllocation(of: Payload.self, capacity: 1) { scratch in
            let out = scratch.baseAddress.unsafelyUnwrapped
            lock()
            let had = endingChain ? machine.drop() : machine.empty()
            if had { out.moveInitialize(from: storage, count: 1) }
            let epoch = self.epoch
            unlock()
            if had {
                out.deinitialize(count: 1)
                tracker?.end(epoch)
            }
        }
    }

    @inline(__always)
    private func lock() { _spinLock(locked) }

    @inline(__always)
    private func unlock() { _spinUnlock(locked) }

    deinit {
        if machine.full {
            storage.deinitialize(count: 1)
            tracker?.end(epoch)
        }
        storage.deallocate()
    }
}

/// A paced registration (`.queue(q).coalesced`, `.mainActor.throttled(…)`, …): its handler runs
/// on `queue` (the main queue for main-actor delivery) in one chain of calls, with the newest
/// payload; see the comment at the top of this file.
final class _PacedEntry<Payload>: _Entry, @unchecked Sendable {
    // @unchecked: `invoke` is written only by `releaseHandler()`, after the canceller's wait, and
    // read only inside a queued-call frame after checking the state; the weak references are
    // written only in `init`; `slot` is locked.

    @exclusivity(unchecked) var invoke: ((AnyObject?, Payload) throws -> Bool)?
    let queue: DispatchQueue
    let slot: _PaceSlot<Payload>
    /// The observer of a selector registration and the sender filter, held weakly.
    let targets: _WeakTargets
    /// For `replay: true`: the version of the retained post put in the slot when subscribing (0:
    /// none). Written before the entry is published; that retained post reaching the entry live
    /// (or an older one) is dropped.
    @exclusivity(unchecked) var replayed: UInt64 = 0
    /// Whether a post found the observer gone and reported it (`Diagnostic.subscriberGone`).
    let goneNoted = Atomic<Bool>(false)

    init(
        queue: DispatchQueue, machine: _PacingMachine, observer: AnyObject?, sender: AnyObject?,
        tracker: _DeliveryTracker?, invoke: @escaping (AnyObject?, Payload) throws -> Bool
    ) {
        self.invoke = invoke
        self.queue = queue
        self.slot = _PaceSlot(machine, tracker: tracker)
        self.targets = _WeakTargets(observer: observer, sender: sender)
    }

    override func deliver(_ post: PostObject, sender postSender: AnyObject?, route: _Route) -> Bool {
        if replayed != 0, let version = _RetainedPost.version(of: postSender), version <= replayed { return false }
        guard targets.admits(postSender) else { return false }
        if targets.observerGone { return noteGone(route) }
        guard let payload = _extract(Payload.self, from: post) else { return false }
        offer(payload, route)
        return true
    }

    /// A typed post of exactly `Payload` hands the value over without an envelope, unless a
    /// sender filter or a replay's version check needs the post's sender (the envelope path has
    /// it; a pattern's posts are typed).
    override func deliver(payload: UnsafeRawPointer, of type: Any.Type, route: _Route) -> Bool? {
        guard ObjectIdentifier(type) == ObjectIdentifier(Payload.self), !targets.filtered, replayed == 0 else {
            return nil
        }
        if targets.observerGone { return noteGone(route) }
        if let delay = slot.offer(raw: payload) { arm(delay, route) }
        return true
    }

    /// A post found the observer gone: reports it once, when the center has diagnostics set.
    /// Returns `false`, the post's answer.
    private func noteGone(_ route: _Route) -> Bool {
        if !goneNoted.exchange(true, ordering: .relaxed) { slot.tracker?.noteGone(route, "observer", site: site) }
        return false
    }

    override func goneTarget(keeping keep: inout [AnyObject]) -> String? {
        targets.goneTarget(keeping: &keep)
    }

    @inline(__always)
    private func offer(_ payload: Payload, _ route: _Route) {
        if let delay = slot.offer(payload) { arm(delay, route) }
    }

    /// Schedules a wake-up on the queue after `delay` nanoseconds. It holds the entry weakly.
    func arm(_ delay: UInt64, _ route: _Route) {
        let box = _UncheckedSendable(route)
        let wake: @Sendable () -> Void = { [weak self] in
            // One wake-up: takes the payload and calls the handler, or waits longer, or ends
            // the chain.
            box.value._runQueuedCall(self, call: { $0.call(box.value) }, refused: { $0?.refused(box.value) })
        }
        if delay == 0 {
            queue.async(execute: wake)
        } else {
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: delay)), execute: wake)
        }
    }

    private func call(_ route: _Route) {
        let next = withUnsafeTemporaryAllocation(of: Payload.self, capacity: 1) { scratch -> UInt64? in
            let payload = scratch.baseAddress.unsafelyUnwrapped
            let (wake, epoch) = slot.take(into: payload)
            switch wake {
            case .idle: return nil
            case .wait(let delay): return delay
            case .call:
                let target = targets.target()
                if target.alive {
                    do { _ = try invoke?(target.observer, payload.pointee) } catch { _noteThrew(error, route: route) }
                }
                payload.deinitialize(count: 1)  // inside the frame: a waiting `cancel()` returns after it
                return slot.finished(epoch)
            }
        }
        if let next { arm(next, route) }
    }

    /// The wake-up was refused: paused, cancelled or detached. Active again already (resumed in
    /// between), it tries again; otherwise the pending payload is dropped.
    private func refused(_ route: _Route) {
        let active = state.load(ordering: .relaxed) == _Entry.active && !route.detached.load(ordering: .relaxed)
        if let next = slot.refused(rearm: active) { arm(next, route) }
    }

    override func releaseHandler() {
        slot.dropPayload(endingChain: false)
        invoke = nil
    }

    override func isReachable(keeping keep: inout [AnyObject]) -> Bool {
        targets.isReachable(keeping: &keep)
    }
}

extension _PacedEntry: _ObserverHolding {
    var _observerID: ObjectIdentifier? { targets.observerID }
}
