import Synchronization
internal import _SubscriptionsShims

/// The two forms of the post/cancel handshake (see DESIGN.md, "Fences").
///
/// Both sides of the handshake are a store followed by a load of another word: a post stores the
/// entry it is about to call into its thread record and then re-reads the slot; a canceller
/// zeroes the slot and then reads every record. Some fence between each store and its load must
/// keep them in order.
///
/// - **Asymmetric** (Linux with `membarrier`): posts emit only a compiler fence; cancellers run
///   `membarrier`, which executes a full barrier on every thread of the process.
/// - **Symmetric** (everywhere else, with `SUBSCRIPTIONS_PROCESS_FENCE=off`, and under
///   ThreadSanitizer): posts use sequentially consistent stores and loads, cancellers a full fence.
enum _Fence {
    /// Whether posts pay the full fence themselves (the symmetric protocol).
    @inline(__always)
    static var symmetric: Bool { _subscriptions_is_symmetric() != 0 }

    /// The post side: orders the caller's earlier stores before its later loads, in the form the
    /// current mode needs.
    @inline(__always)
    static func light() {
        if symmetric {
            atomicMemoryFence(ordering: .sequentiallyConsistent)
        } else {
            _subscriptions_compiler_fence()
        }
    }

    /// The canceller's side: after it, every thread's later loads see the caller's earlier
    /// stores, and the caller sees every store that other threads made before their last `light()`.
    ///
    /// With `onlyThread` (the caller is the only thread holding a record), no other thread can be
    /// inside a post, and a full fence of the caller's own is enough.
    static func heavy(onlyThread: Bool = false) {
        if onlyThread {
            atomicMemoryFence(ordering: .sequentiallyConsistent)
        } else {
            _subscriptions_heavy_fence()
        }
    }
}

/// Whether this process runs the asymmetric protocol (Linux `membarrier` available and not
/// switched off with `SUBSCRIPTIONS_PROCESS_FENCE=off`). For tests and benchmarks.
func _processFenceAvailable() -> Bool {
    !_Fence.symmetric
}
