import Dispatch
import Synchronization

/// Counts a center's scheduled deliveries (queued on a dispatch queue) that have not run or been
/// dropped yet, so that `waitForPendingDeliveries()` can wait for them without polling; holds
/// the center's main mailbox and knows its actor subscriptions with deliveries pending, whose
/// mailboxes count their own.
///
/// Deliveries are counted per *epoch*. Each call of `wait` closes the current epoch (the
/// deliveries scheduled so far) and opens the next; it resumes once no delivery of its epoch or
/// an earlier one is pending. Deliveries scheduled after the call fall into a later epoch and do
/// not hold it up, so a steady stream of posts cannot starve a waiter. Epochs only advance when
/// somebody waits, so at most a few have pending deliveries at once.
///
/// - Threading: every method is safe from any thread; waiters are resumed after unlocking.
final class _DeliveryTracker: @unchecked Sendable {
    // @unchecked: `drainingHead` and the links it leads to are touched only under `drainingLock`;
    // the rest is `Sendable`.
    private struct State {
        /// The epoch deliveries scheduled now belong to.
        var epoch: UInt64 = 0
        /// Pending deliveries of each epoch that has any.
        var pending: [UInt64: Int] = [:]
        /// Suspended waiters and the last epoch each waits for.
        var waiters: [(epoch: UInt64, continuation: CheckedContinuation<Void, Never>)] = []

        /// Whether every delivery of `epoch` and the epochs before it has run or been dropped.
        func isSettled(through epoch: UInt64) -> Bool {
            !pending.keys.contains { $0 <= epoch }
        }
    }

    private let state = _PlatformMutex(State())
    /// The center's main-actor deliveries posted off the main actor.
    let main = _QueueMailbox(queue: .main)
    /// The mailboxes of `.queue(q)` subscriptions, one per queue, held weakly (by their
    /// subscriptions and scheduled jobs), keyed by the queue's identity.
    private let queues = _PlatformMutex<(boxes: [ObjectIdentifier: _WeakMailbox], pruneAt: Int)>(([:], 16))
    /// Actor subscriptions whose mailbox is being drained: a doubly linked list through the
    /// mailboxes themselves (`_DrainingEntry.drainingNext` and `drainingPrevious`). Every link,
    /// the head too, is unretained; the list holds exactly one retain of each member, taken by
    /// `register` and handed back by `unregister`. A subscription registers when its drain starts
    /// and unregisters when it ends, both under its mailbox's lock, so it is here exactly while
    /// it has deliveries pending, and at most once. Linking and unlinking cost a few stores and
    /// no allocation, hashing or reference counting: they happen on every burst of every actor
    /// subscription. Guarded by `drainingLock`.
    @exclusivity(unchecked) private nonisolated(unsafe) var drainingHead: Unmanaged<_DrainingEntry>?
    /// A spin lock around the list (sections of a few stores); an atomic, so ThreadSanitizer sees it.
    private let drainingLock = Atomic<Bool>(false)

    /// The center, for `Diagnostic.subscriberGone` (see `GoneTargets.swift`). Written once, by
    /// the center's `init`, before any entry can read it; weak, as the center owns the tracker.
    weak var reporter: (any _EngineReporting)?  // written only in the center's init

    init() {}

    /// The center's mailbox for `queue`, made on first use. Subscriptions hold it strongly.
    func mailbox(for queue: DispatchQueue) -> _QueueMailbox {
        queues.withLock { state in
            let key = ObjectIdentifier(queue)
            if let box = state.boxes[key]?.mailbox, box.queue === queue { return box }
            let box = _QueueMailbox(queue: queue)
            state.boxes[key] = _WeakMailbox(box)
            if state.boxes.count >= state.pruneAt {
                state.boxes = state.boxes.filter { $0.value.mailbox != nil }
                state.pruneAt = max(16, 2 * state.boxes.count)
            }
            return box
        }
    }

    /// Notes that `mailbox` has deliveries pending (an actor subscription's drain starts). Called
    /// under the mailbox's lock, once per burst; the list takes a retain of the mailbox.
    func register(_ mailbox: _DrainingEntry) {
        let member = Unmanaged.passRetained(mailbox)
        _spinLock(drainingLock)
        precondition(!isListed(mailbox), "an actor subscription registered twice as draining")
        mailbox.drainingPrevious = nil
        mailbox.drainingNext = drainingHead
        drainingHead?.takeUnretainedValue().drainingPrevious = member
        drainingHead = member
        _spinUnlock(drainingLock)
    }

    /// Notes that `mailbox` has no deliveries pending any more (its drain ended). Called under the
    /// mailbox's lock; returns the list's retain, to be released after the caller unlocked, or
    /// `nil` when the mailbox was not in the list.
    func unregister(_ mailbox: _DrainingEntry) -> Unmanaged<_DrainingEntry>? {
        _spinLock(drainingLock)
        guard isListed(mailbox) else {
            _spinUnlock(drainingLock)
            return nil
        }
        let next = mailbox.drainingNext
        if let previous = mailbox.drainingPrevious {
            previous.takeUnretainedValue().drainingNext = next
        } else {
            drainingHead = next
        }
        next?.takeUnretainedValue().drainingPrevious = mailbox.drainingPrevious
        mailbox.drainingNext = nil
        mailbox.drainingPrevious = nil
        _spinUnlock(drainingLock)
        return Unmanaged.passUnretained(mailbox)
    }

    /// Whether `mailbox` is in the list: it has a predecessor, or it is the head. Under the lock.
    @inline(__always)
    private func isListed(_ mailbox: _DrainingEntry) -> Bool {
        mailbox.drainingPrevious != nil || drainingHead?.toOpaque() == Unmanaged.passUnretained(mailbox).toOpaque()
    }

    /// The mailboxes being drained now.
    private func drainingMailboxes() -> [any _PendingWork] {
        var mailboxes: [any _PendingWork] = []
        _spinLock(drainingLock)
        var next = drainingHead
        while let mailbox = next?.takeUnretainedValue() {
            mailboxes.append(mailbox)
            next = mailbox.drainingNext
        }
        _spinUnlock(drainingLock)
        return mailboxes
    }

    /// Counts a delivery being scheduled; pass the result to `end` when it ran or was dropped.
    /// - Complexity: O(1), one lock acquisition.
    func begin() -> UInt64 {
        state.withLock { state in
            state.pending[state.epoch, default: 0] += 1
            return state.epoch
        }
    }

    /// Counts a delivery of `epoch` as done, and resumes the waiters it was the last one for.
    func end(_ epoch: UInt64) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            let left = (state.pending[epoch] ?? 1) - 1
            state.pending[epoch] = left == 0 ? nil : left
            guard left == 0, !state.waiters.isEmpty else { return [] }
            var ready: [CheckedContinuation<Void, Never>] = []
            var waiting: [(epoch: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
            for waiter in state.waiters {
                if state.isSettled(through: waiter.epoch) {
                    ready.append(waiter.continuation)
                } else {
                    waiting.append(waiter)
                }
            }
            state.waiters = waiting
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Returns once every delivery counted by `begin` before this call ended, and every delivery
    /// the main mailbox and the actor subscriptions of the center held when it was called.
    func wait() async {
        // Marks first, all at once: deliveries appended later are not waited for.
        let works =
            [main as any _PendingWork] + drainingMailboxes()
            + queues.withLock { $0.boxes.values.compactMap(\.mailbox) }
        let marks = works.compactMap { work in work.mark().map { (work, $0) } }
        await waitForCounted()
        for (work, mark) in marks {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let kept = work.resume(continuation, after: mark)
                if !kept { continuation.resume() }
                #if DEBUG
                    if kept { _waitHook.withLock { $0 }?() }
                #endif
            }
        }
    }

    #if DEBUG
        /// For tests, in debug builds only: run each time `wait()` is left waiting, for counted
        /// deliveries (its epoch is not settled) or for those a mailbox held when it was called
        /// (the mailbox kept its continuation), so that a test can let those deliveries run only
        /// once the wait is known to wait for them, and tell a wait that forgot them (it returns
        /// without ever running this) from one that did not (it runs this first) without timing
        /// anything.
        let _waitHook = _PlatformMutex<(@Sendable () -> Void)?>(nil)
    #endif

    /// Returns once every delivery counted by `begin` before this call ended.
    private func waitForCounted() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let settled = state.withLock { state -> Bool in
                let epoch = state.epoch
                state.epoch += 1
                if state.isSettled(through: epoch) { return true }
                state.waiters.append((epoch, continuation))
                return false
            }
            if settled { continuation.resume() }
            #if DEBUG
                if !settled { _waitHook.withLock { $0 }?() }
            #endif
        }
    }
}

/// A weak reference to a queue's mailbox.
struct _WeakMailbox: @unchecked Sendable {
    // @unchecked: only touched under the tracker's lock.
    weak var mailbox: _QueueMailbox?
    init(_ mailbox: _QueueMailbox) { self.mailbox = mailbox }
}

/// An actor subscription's mailbox as its center's `_DeliveryTracker` knows it while it is
/// being drained: the links of the tracker's list live here, so that registering costs no
/// allocation. `mark()` and `resume(_:after:)` are the subclass's.
class _DrainingEntry: _Entry, _PendingWork, @unchecked Sendable {
    // @unchecked: the links are touched only under the tracker's lock.
    @exclusivity(unchecked) final var drainingNext: Unmanaged<_DrainingEntry>?
    @exclusivity(unchecked) final var drainingPrevious: Unmanaged<_DrainingEntry>?

    func mark() -> UInt64? { fatalError("abstract") }

    func resume(_ continuation: CheckedContinuation<Void, Never>, after mark: UInt64) -> Bool { fatalError("abstract") }
}

/// What a center's `waitForPendingDeliveries()` waits for besides counted deliveries: a FIFO
/// of deliveries (the main mailbox, an actor subscription's mailbox) that can say how many it
/// took so far and wake a waiter once those are handled or dropped.
protocol _PendingWork: AnyObject, Sendable {
    /// How many deliveries were appended so far, or `nil` when all of them are done already.
    func mark() -> UInt64?
    /// Resumes `continuation` once the first `mark` deliveries are done; returns `false` (and
    /// does not keep it) when they are done already.
    func resume(_ continuation: CheckedContinuation<Void, Never>, after mark: UInt64) -> Bool
}

/// The progress of a mailbox, kept under its lock: deliveries appended and done (handled or
/// dropped), and the waiters of `waitForPendingDeliveries()`.
struct _DeliveryProgress {
    var appended: UInt64 = 0
    var done: UInt64 = 0
    var waiters: [(mark: UInt64, continuation: CheckedContinuation<Void, Never>)] = []

    /// Counts `n` deliveries done; returns the waiters to resume (after unlocking).
    mutating func finish(_ n: Int) -> [CheckedContinuation<Void, Never>] {
        done &+= UInt64(n)
        guard !waiters.isEmpty else { return [] }
        var ready: [CheckedContinuation<Void, Never>] = []
        waiters.removeAll { waiter in
            guard waiter.mark <= done else { return false }
            ready.append(waiter.continuation)
            return true
        }
        return ready
    }

    /// `appended`, or `nil` when everything appended is done.
    func mark() -> UInt64? { done >= appended ? nil : appended }

    /// Keeps `continuation` until `mark` deliveries are done; `false` when they are.
    mutating func keep(_ continuation: CheckedContinuation<Void, Never>, after mark: UInt64) -> Bool {
        if done >= mark { return false }
        waiters.append((mark, continuation))
        return true
    }
}
