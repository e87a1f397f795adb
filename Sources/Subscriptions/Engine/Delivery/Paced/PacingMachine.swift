import Dispatch
import Synchronization

// Paced delivery: coalesced, throttled and debounced (`Delivery.coalesced` and friends).
//
// **Slot.** A paced entry keeps at most one payload: the newest. A post replaces it under the
// slot's spin lock and returns; only the post that fills an empty slot pays more (it counts the
// delivery for `waitForPendingDeliveries()`), and only one that finds no wake-up armed schedules
// one (a block on the entry's queue, or `asyncAfter` for a later deadline). So while a payload is
// pending, a post allocates nothing.
//
// **One chain of calls.** `armed` stays set from the moment a wake-up is scheduled until the
// chain ends with an empty slot: the wake-up takes the payload and calls the handler, and when the
// handler returns it looks at the slot again and, if a newer payload arrived meanwhile, schedules
// the next wake-up (at once, or when the interval allows). Calls therefore never overlap, even on
// a concurrent queue, no slot is delivered twice, and the last call gets the newest payload.
//
// **Cancellation.** Every wake-up runs inside a queued-call frame (`_Route._beginQueuedCall`,
// which refuses a cancelled or paused entry), so `cancel()` waits for a running call exactly as
// for a queued delivery; the canceller's `releaseHandler()` drops the pending payload. Wake-ups
// hold the entry weakly: a timer keeps neither the entry nor, through it, the handler's captures
// (the subscriber) alive.
//
// The decisions (when to call, when to wait, when to stop) are `_PacingMachine`'s, a plain struct
// whose transitions are tested without threads or clocks.

/// The timing decisions of one paced subscription, with times in nanoseconds of one monotonic
/// clock (`DispatchTime.uptimeNanoseconds`). A value type with no lock: its owner guards it.
struct _PacingMachine {
    /// How calls are spaced: 0 for coalesced (as soon as possible), else the interval.
    let interval: UInt64
    /// Debounced (the interval counts from the last post) rather than throttled (from the end of
    /// the last call).
    let debounce: Bool
    /// A payload waits in the slot.
    private(set) var full = false
    /// A wake-up is scheduled, or a call is running; either will look at the slot again.
    private(set) var armed = false
    /// When the last call returned; `nil` before the first. A throttle counts its interval from
    /// here, not from the call's start: the start the engine can stamp comes before the handler's
    /// first instruction (a preemption can fall between them), while the return it stamps comes
    /// after the handler's last. So the next call starts at least an interval after the previous
    /// one started and ended, also as the handler reads `DispatchTime` at its entry and return.
    private(set) var lastCall: UInt64?
    /// When the last post arrived.
    private(set) var lastPost: UInt64 = 0

    init(interval: UInt64, debounce: Bool) {
        self.interval = interval
        self.debounce = debounce
    }

    /// Whether the machine needs the time of each post: a debounce counts from it, a throttle
    /// may arm a wake-up with it. Coalescing never looks at the clock.
    var needsPostTime: Bool { interval > 0 }

    /// What a wake-up does.
    enum Wake: Equatable {
        /// Take the payload and call the handler.
        case call
        /// Too early: schedule another wake-up after this many nanoseconds.
        case wait(UInt64)
        /// Nothing to deliver: the chain ended.
        case idle
    }

    /// A post stored its payload at `now`. Returns whether it filled an empty slot, and the
    /// delay of the wake-up to schedule (`nil` when one is armed already).
    @inline(__always)
    mutating func posted(at now: UInt64) -> (filled: Bool, arm: UInt64?) {
        let filled = !full
        full = true
        if debounce { lastPost = now }
        if armed { return (filled, nil) }
        armed = true
        return (filled, delay(at: now))
    }

    /// A wake-up ran at `now`.
    mutating func woke(at now: UInt64) -> Wake {
        guard full else {
            armed = false
            return .idle
        }
        let due = self.due
        if now < due { return .wait(due - now) }
        full = false
        return .call
    }

    /// The call that `woke` allowed returned at `now`. Returns the delay of the next wake-up
    /// when a payload arrived meanwhile, or `nil` when the chain ended.
    mutating func called(at now: UInt64) -> UInt64? {
        lastCall = now
        guard full else {
            armed = false
            return nil
        }
        return delay(at: now)
    }

    /// The wake-up was refused (paused or cancelled): the payload is dropped and the chain ends.
    /// Returns whether there was a payload.
    mutating func drop() -> Bool {
        let had = full
        full = false
        armed = false
        return had
    }

    /// The payload is dropped (cancelled), but a scheduled wake-up may still come and end the
    /// chain. Returns whether there was a payload.
    mutating func empty() -> Bool {
        let had = full
        full = false
        return had
    }

    /// The earliest time the next call may start.
    /// Coalescing never waits (and its posts pass no time, see `needsPostTime`).
    private var due: UInt64 {
        if interval == 0 { return 0 }
        if debounce { return lastPost &+ interval }
        guard let lastCall else { return 0 }
        return lastCall &+ interval
    }

    private func delay(at now: UInt64) -> UInt64 {
        let due = self.due
        return due > now ? due - now : 0
    }
}

/// The monotonic clock of paced deliveries, in nanoseconds (the clock `asyncAfter` uses).
@inline(__always)
func _pacingNow() -> UInt64 {
    DispatchTime.now().uptimeNanoseconds
}
