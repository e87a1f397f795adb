import Dispatch

/// How a paced delivery spaces its handler's calls: for names posted faster than anyone can look,
/// such as download progress or a search field's text.
///
/// ```swift
/// center.subscribe(.progress, delivery: .mainActor.coalesced) { p in bar.value = p }  // newest only
/// center.subscribe(.query, delivery: .queue(q).throttled(.milliseconds(100))) { q in search(q) }
/// center.subscribe(.settings, delivery: .queue(q).debounced(.seconds(1))) { s in save(s) }
/// ```
///
/// Every pacing keeps at most one payload per subscription, the newest: a post made while a call
/// is pending replaces the pending payload, and `post` returns at once (it never waits for the
/// queue or the interval, and allocates nothing while a payload is pending).
///
/// - ``coalesced``: the handler runs as soon as its queue (or the main actor) gets to it, with
///   the newest payload.
/// - ``throttled(_:)``: at most one call per interval (counted from the end of one call to the
///   start of the next, so the starts of two calls are always at least an interval apart, also as
///   the handler reads them on `DispatchTime`, the clock of `asyncAfter` that the throttle
///   schedules by), with the newest payload. The first post after a quiet interval is
///   scheduled at once (the call gets the newest payload when it runs); posts during the
///   interval are delivered after it (the trailing edge), so the last value posted is never lost.
/// - ``debounced(_:)``: one call once the posts stopped for the interval, with the last payload.
///
/// Rules common to every pacing:
/// - **Newest last.** The calls never overlap, even on a concurrent queue, the handler never runs
///   twice for one pending payload, and the last call gets the last payload posted.
/// - **Main actor.** A paced `.mainActor` handler always runs later, on the main queue, also when
///   posted on the main thread: a burst of posts on the main thread becomes one call.
/// - **Cancellation.** When ``Subscription/cancel()`` returns, a pending payload is dropped, a
///   call running on another thread has returned, and no call starts again. Paused, the
///   subscription receives nothing, and a payload pending when a call comes up is dropped.
/// - **Lifetime.** A scheduled wake-up (a timer) holds neither the subscription nor the handler
///   or observer: dropping the token releases the handler's captures at once.
/// - **Waiting in tests.** ``PostCenter/waitForPendingDeliveries()`` waits for a pending payload's
///   call, including the interval of a throttle or debounce.
/// - **One-shot.** `subscribe(…, once: true)`, in every variant, delivers its one post with the base
///   delivery: pacing shapes a stream of posts, and a one-shot has one.
///
/// - **Replay.** With `replay: true`, the name's retained post is the first post the pacing
///   sees: it fills the slot when subscribing, and a post made before the first call replaces it,
///   as any pending payload. A throttle calls it at once; a debounce after the interval.
///
/// - Threading: a value, safe to share across threads.
public enum Pacing: Sendable, Hashable {
    /// The newest payload, as soon as the delivery runs; see ``Delivery/coalesced``.
    case coalesced
    /// At most one call per interval, the newest payload, the trailing edge delivered; see
    /// ``Delivery/throttled(_:)``.
    case throttled(Duration)
    /// One call after the posts stopped for the interval; see ``Delivery/debounced(_:)``.
    case debounced(Duration)

    /// The machine that implements this pacing. Traps on a negative interval.
    var _machine: _PacingMachine {
        switch self {
        case .coalesced: return _PacingMachine(interval: 0, debounce: false)
        case .throttled(let interval): return _PacingMachine(interval: Pacing._nanoseconds(interval), debounce: false)
        case .debounced(let interval): return _PacingMachine(interval: Pacing._nanoseconds(interval), debounce: true)
        }
    }

    static func _nanoseconds(_ interval: Duration) -> UInt64 {
        let (seconds, attoseconds) = interval.components
        guard seconds >= 0, attoseconds >= 0 else {
            fatalError(
                "Subscriptions: a throttled or debounced delivery needs an interval of zero or more, not \(interval)")
        }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole &+ UInt64(attoseconds / 1_000_000_000)
    }
}

extension Delivery {
    /// This delivery, coalesced: while a call is pending, a newer post replaces its payload, so
    /// the handler gets the newest payload and never runs twice for one pending payload.
    ///
    /// ```swift
    /// center.subscribe(.progress, delivery: .queue(q).coalesced) { p in log(p) }
    /// ```
    ///
    /// For `.queue(q)` and `.mainActor`; see ``Pacing`` for the rules. Applied to a paced
    /// delivery, it replaces that delivery's pacing.
    public var coalesced: Delivery { .paced(_unpaced, .coalesced) }

    /// This delivery, throttled: at most one call per `interval`, with the newest payload; the
    /// last payload posted is always delivered (at the end of its interval).
    ///
    /// ```swift
    /// center.subscribe(.query, delivery: .queue(q).throttled(.milliseconds(100))) { q in search(q) }
    /// ```
    ///
    /// For `.queue(q)` and `.mainActor`; see ``Pacing`` for the rules. Applied to a paced
    /// delivery, it replaces that delivery's pacing.
    /// - Parameter interval: The shortest time from the end of one call to the start of the next
    ///   (so also between their starts); zero or more (subscribing with a negative interval
    ///   traps).
    /// - Returns: The throttled delivery.
    public func throttled(_ interval: Duration) -> Delivery { .paced(_unpaced, .throttled(interval)) }

    /// This delivery, debounced: one call, with the last payload, once the posts stopped for
    /// `interval`.
    ///
    /// For `.queue(q)` and `.mainActor`; see ``Pacing`` for the rules. Applied to a paced
    /// delivery, it replaces that delivery's pacing.
    /// - Parameter interval: How long the posts must have stopped; zero or more (subscribing with
    ///   a negative interval traps).
    /// - Returns: The debounced delivery.
    public func debounced(_ interval: Duration) -> Delivery { .paced(_unpaced, .debounced(interval)) }

    /// The delivery without its pacing.
    var _unpaced: Delivery {
        if case .paced(let base, _) = self { return base._unpaced }
        return self
    }

    /// The pacing to apply when subscribing, or `nil`. Traps on a paced `.immediate`, which has
    /// no queue to run a later call on (a `Delivery` value the type system cannot rule out).
    func _pacing() -> Pacing? {
        guard case .paced(let base, let pacing) = self else { return nil }
        if case .immediate = base._unpaced {
            fatalError(
                "Subscriptions: .immediate cannot be \(pacing._adjective): a paced call runs later, so it needs a queue; use .queue(q).\(pacing._adjective) or .mainActor.\(pacing._adjective)"
            )
        }
        return pacing
    }
}

extension MainActorDelivery {
    /// Main-actor delivery, coalesced: `delivery: .mainActor.coalesced`. While a call is pending, a
    /// newer post replaces its payload; the handler runs on the main actor with the newest one.
    ///
    /// ```swift
    /// center.subscribe(.progress, delivery: .mainActor.coalesced) { p in bar.value = p }
    /// ```
    ///
    /// See ``Pacing`` for the rules.
    public var coalesced: MainActorDelivery { .paced(.coalesced) }

    /// Main-actor delivery, throttled: at most one call per `interval`, with the newest payload;
    /// the last payload posted is always delivered. See ``Pacing`` for the rules.
    /// - Parameter interval: The shortest time from the end of one call to the start of the next
    ///   (so also between their starts); zero or more (subscribing with a negative interval
    ///   traps).
    /// - Returns: The throttled main-actor delivery.
    public func throttled(_ interval: Duration) -> MainActorDelivery { .paced(.throttled(interval)) }

    /// Main-actor delivery, debounced: one call, with the last payload, once the posts stopped
    /// for `interval`. See ``Pacing`` for the rules.
    /// - Parameter interval: How long the posts must have stopped; zero or more (subscribing with
    ///   a negative interval traps).
    /// - Returns: The debounced main-actor delivery.
    public func debounced(_ interval: Duration) -> MainActorDelivery { .paced(.debounced(interval)) }

    /// The pacing to apply when subscribing, or `nil`.
    func _pacing() -> Pacing? {
        guard case .paced(let pacing) = self else { return nil }
        return pacing
    }
}

extension Pacing {
    var _adjective: String {
        switch self {
        case .coalesced: return "coalesced"
        case .throttled: return "throttled"
        case .debounced: return "debounced"
        }
    }
}

extension PostCenter {
    /// The entry of a paced registration; `executor` is `.queue(q)` or `.mainActor`.
    func _pacedEntry<Payload>(
        _ executor: _Executor, _ pacing: Pacing, observer: AnyObject?, sender: AnyObject?,
        invoke: @escaping (AnyObject?, Payload) throws -> Bool
    ) -> _PacedEntry<Payload> {
        let queue: DispatchQueue
        switch executor {
        case .queue(let target): queue = target
        case .mainActor: queue = .main
        case .immediate: fatalError("Subscriptions: .immediate cannot be \(pacing._adjective)")
        }
        return _PacedEntry(
            queue: queue, machine: pacing._machine, observer: observer, sender: sender, tracker: _deliveries,
            invoke: invoke)
    }
}
