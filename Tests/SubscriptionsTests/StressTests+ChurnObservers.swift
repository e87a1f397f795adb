// The protocol observers of the stress tests: the churn protocols, `ChurnObserver`, and `ChurnProtocolKey`.

import Subscriptions
import Synchronization

/// The shared protocol: every thread adds, removes and notifies its observers.
protocol ChurnShared: AnyObject {
    func sharedCall()
}

/// One protocol per thread (protocols are keyed by type, so a thread's own protocol is the way
/// to give it registrations nobody else touches).
protocol ChurnP0: AnyObject { func churn() }
protocol ChurnP1: AnyObject { func churn() }
protocol ChurnP2: AnyObject { func churn() }
protocol ChurnP3: AnyObject { func churn() }
protocol ChurnP4: AnyObject { func churn() }
protocol ChurnP5: AnyObject { func churn() }
protocol ChurnP6: AnyObject { func churn() }
protocol ChurnP7: AnyObject { func churn() }

/// An observer of every churn protocol that counts its calls and records calls made once its
/// deinit started.
final class ChurnObserver: ChurnShared, ChurnP0, ChurnP1, ChurnP2, ChurnP3, ChurnP4, ChurnP5, ChurnP6, ChurnP7,
    @unchecked Sendable
{
    // @unchecked: `token` is only touched by the thread that owns the observer; the rest is
    // immutable or atomic (the deinit may run on a notifying thread).
    let live: Reliability.Tally
    let violations: Reliability.Tally
    let calls = Reliability.Tally()
    let deinitStarted = Atomic<Bool>(false)
    let onShared: @Sendable () -> Void
    var token: Subscription?

    init(live: Reliability.Tally, violations: Reliability.Tally, onShared: @escaping @Sendable () -> Void = {}) {
        self.live = live
        self.violations = violations
        self.onShared = onShared
        live.up()
    }

    func churn() {
        if deinitStarted.load(ordering: .acquiring) { violations.up() }
        calls.up()
    }

    func sharedCall() {
        if deinitStarted.load(ordering: .acquiring) { violations.up() }
        calls.up()
        onShared()
    }

    deinit {
        deinitStarted.store(true, ordering: .releasing)
        live.down()
    }
}

/// The protocol-observer API for one of the `ChurnP…` protocols, behind closures.
struct ChurnProtocolKey: Sendable {
    let add: @Sendable (PostCenter, ChurnObserver) -> Void
    let observe: @Sendable (PostCenter, ChurnObserver) -> Subscription
    let remove: @Sendable (PostCenter, ChurnObserver) -> Void
    let notify: @Sendable (PostCenter) -> Int
    let observers: @Sendable (PostCenter) -> [AnyObject]

    static func make<P>(_ type: P.Type, _ cast: @escaping @Sendable (ChurnObserver) -> P) -> ChurnProtocolKey {
        ChurnProtocolKey(
            add: { $0.addObserver(cast($1), for: P.self) },
            observe: { $0.observe(cast($1), for: P.self) },
            remove: { $0.removeObserver(cast($1), for: P.self) },
            notify: { center in center.notify(P.self) { ($0 as AnyObject as! ChurnObserver).churn() } },
            observers: { $0.observers(for: P.self).map { $0 as AnyObject } })
    }

    static let perThread: [ChurnProtocolKey] = [
        make((any ChurnP0).self) { $0 }, make((any ChurnP1).self) { $0 }, make((any ChurnP2).self) { $0 },
        make((any ChurnP3).self) { $0 }, make((any ChurnP4).self) { $0 }, make((any ChurnP5).self) { $0 },
        make((any ChurnP6).self) { $0 }, make((any ChurnP7).self) { $0 },
    ]
}
