import Dispatch
import Synchronization
internal import _SubscriptionsShims

/// The post/cancel handshake's fences (see Engine/DESIGN.md, "Fence mode selection").
///
/// Both sides of the handshake are a store followed by a load of another word: a post stores the
/// entry it is about to call into its thread record and then re-reads the slot; a canceller
/// zeroes the slot and then reads every record. Some fence between each store and its load must
/// keep them in order.
///
/// - **Asymmetric** (Linux with `membarrier`, while no thread cancels beside a posting thread):
///   posts emit only a compiler fence; heavy fences run `membarrier`, which executes a full
///   barrier on every thread of the process.
/// - **Symmetric** (everywhere else, with `SUBSCRIPTIONS_PROCESS_FENCE=off`, under
///   ThreadSanitizer, and on Linux for a while after a heavy fence interrupted another thread):
///   posts pay a full fence themselves, and a heavy fence is a full fence of the caller's own.
///
/// On Linux the process moves between the two (the shim's `_subscriptions_fence_state`): a heavy
/// fence that has to interrupt another thread switches to symmetric on the way, and a job
/// switches back once `decayInterval` passed without a heavy fence that used the symmetric path.
/// `SUBSCRIPTIONS_PROCESS_FENCE=asymmetric` keeps the asymmetric form for good.
enum _Fence {
    /// How long the symmetric form lasts after the last heavy fence that used it.
    static let decayInterval = DispatchTimeInterval.milliseconds(10)

    /// Whether posts pay the full fence themselves now. For choosing between paths that are
    /// correct in every state (a stale answer costs only speed).
    @inline(__always)
    static var symmetric: Bool { _subscriptions_fence_state_now() != 0 }

    /// The post side: orders the caller's earlier stores before its later loads, in the form the
    /// current state needs.
    @inline(__always)
    static func light() {
        if _subscriptions_posts_fence() != 0 {
            atomicMemoryFence(ordering: .sequentiallyConsistent)
        } else {
            _subscriptions_compiler_fence()
        }
    }

    /// The canceller's side, "HEAVY FENCE {": after it returns, every thread's later loads see
    /// the caller's earlier stores, and the caller sees every store that other threads made
    /// before their last `light()`. The caller then reads the thread records (and decides what
    /// to free or wait for), with no lock of this type held and without waiting for other
    /// threads, and closes with `endHeavy(_:)`, passing what this returned: whether a fence
    /// section is open.
    ///
    /// With `onlyThread` (no other thread holds a record), no other thread can be inside a post,
    /// and a full fence of the caller's own is enough: `onlyThread` must be the answer of
    /// `_ThreadRecord.onlyThread` read after the stores the fence must order, and a `true` answer
    /// comes with that full fence (see `_subscriptions_owns_only_record`), so none is run here.
    /// In the symmetric state, a full fence inside a section is enough too: the section keeps
    /// the state from moving back to asymmetric until `endHeavy(_:)`.
    ///
    /// A pair rather than a function taking the scan as a closure, so that a cancel's walk
    /// enters this file and returns, instead of coming back into its caller's file from here.
    @inline(__always)
    static func beginHeavy(onlyThread: Bool = false) -> Bool {
        if onlyThread { return false }
        if _subscriptions_section_begin() != 0 { return true }
        if _subscriptions_heavy_fence() != 0 { scheduleDecay() }
        return false
    }

    /// "}": closes the heavy fence `beginHeavy(onlyThread:)` opened (`section` is what it
    /// returned); after it the fence form may move again.
    @inline(__always)
    static func endHeavy(_ section: Bool) {
        if section { _subscriptions_section_end() }
    }

    /// Schedules the switch back to asymmetric (after a switch to symmetric).
    private static func scheduleDecay() {
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + decayInterval) { decay() }
    }

    /// The switch back: done once no heavy fence used the symmetric path since the last try;
    /// tried again later otherwise.
    private static func decay() {
        if _subscriptions_try_switch_off() == 0 && _subscriptions_fence_state_now() == 2 { scheduleDecay() }
    }
}

/// How many times the switch back to asymmetric was tried with no section seen since the try
/// before (so that it may have switched), each counted before it tries. For tests: a cancel that
/// runs the process-wide fence after such a try starts a new symmetric period.
func _fenceSwitchOffAttempts() -> Int {
    _subscriptions_switch_off_attempts()
}

/// Runs `body` inside a fence section, the one a cancel opens around its scan in the symmetric
/// state, and returns `true`; returns `false` without running it when no section opens (the
/// asymmetric state). For tests: what a section keeps mapped while it is open.
func _inFenceSection(_ body: () -> Void) -> Bool {
    guard _subscriptions_section_begin() != 0 else { return false }
    defer { _subscriptions_section_end() }
    body()
    return true
}

/// Whether the fence form moves at run time (see `_Fence`). For tests.
func _fenceAdaptive() -> Bool {
    _subscriptions_fence_adaptive() != 0
}

/// Whether this process may run the process-wide fence (Linux `membarrier` available, not
/// switched off with `SUBSCRIPTIONS_PROCESS_FENCE=off`, not a ThreadSanitizer build): then its
/// posts run the asymmetric form, at least while no thread cancels beside a posting one. For
/// tests and benchmarks.
func _processFenceAvailable() -> Bool {
    _subscriptions_process_fence_available() != 0
}
