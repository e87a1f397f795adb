// Entry construction: every public `subscribe`, `register` and `posts` method turns its options
// into one `_Entry` here (a `_NewEntry`, which also says how it joins its name: live, or after the
// name's retained post), and the public files only choose the factory. The cheapest entry that
// honours the options is picked, because a post's cost depends on the entry's class:
// - `_Handler` / `_EnvelopeHandler` / `_MainHandler`: no option, called directly by the post;
// - `_PacedEntry`: coalesced, throttled or debounced;
// - `_OptionsEntry`: everything else (a queue, one-shot, a sender filter, replay, an observer).

extension PostCenter {
    /// The entry of a `subscribe` whose handler runs where `delivery` says, with every option
    /// applied. A one-shot delivers its one post with the base delivery: pacing is ignored. A
    /// paced entry replays through its slot (`_addPacedReplaying`), any other through `_Replay`.
    func _handlerEntry<Payload>(
        _ delivery: Delivery, sender: AnyObject?, replay: Bool, once: Bool,
        _ handler: @escaping (Payload) throws -> Void
    ) -> _NewEntry<Payload> {
        let executor = delivery._executor
        let pacing = once ? nil : delivery._pacing()
        if replay && pacing == nil {
            return .replaying(_replayableEntry(executor, once: once, sender: sender, handler))
        }
        return _makeEntry(executor, once: once, sender: sender, pacing: pacing, replay: replay, handler)
    }

    /// The entry of a plain `subscribe(_:…)`: the direct-call `_EnvelopeHandler` when there is
    /// no option. `handler` is consumed (the public method takes it `consuming` too), so that the
    /// closure the caller made moves into the entry: no retain here and release in the caller.
    func _envelopeEntry(
        _ delivery: Delivery, sender: AnyObject?, replay: Bool, once: Bool,
        _ handler: consuming @escaping (PostObject) throws -> Void
    ) -> _NewEntry<PostObject> {
        if case .immediate = delivery, sender == nil, !replay, !once { return .live(_EnvelopeHandler(consume handler)) }
        return _handlerEntry(delivery, sender: sender, replay: replay, once: once, handler)
    }

    /// The entry of a typed `subscribe(_:…)` with immediate delivery: the direct-call `_Handler`
    /// when there is no option; `handler` consumed, as in `_envelopeEntry`.
    func _immediateEntry<Payload>(
        sender: AnyObject?, replay: Bool, once: Bool, _ handler: consuming @escaping (Payload) throws -> Void
    ) -> _NewEntry<Payload> {
        if sender == nil, !replay, !once { return .live(_Handler(consume handler)) }
        return _handlerEntry(.immediate, sender: sender, replay: replay, once: once, handler)
    }

    /// The entry of a `subscribe` with a `@MainActor` handler, every option applied: the
    /// direct-call `_MainHandler` when there is none.
    func _mainActorHandlerEntry<Payload>(
        _ delivery: MainActorDelivery, sender: AnyObject?, replay: Bool, once: Bool,
        _ handler: @escaping @MainActor (Payload) throws -> Void
    ) -> _NewEntry<Payload> {
        let pacing = once ? nil : delivery._pacing()
        if pacing == nil, sender == nil, !replay, !once { return .live(_mainHandler(handler)) }
        return _mainActorEntry(once: once, sender: sender, pacing: pacing, replay: replay, handler)
    }

    /// The entry for a plain handler: the direct-call `_Handler` when there is no option. Only
    /// a paced entry replays from here (`replay` is ignored otherwise: `_handlerEntry` builds the
    /// others that replay).
    func _makeEntry<Payload>(
        _ executor: _Executor, once: Bool = false, sender: AnyObject? = nil, pacing: Pacing? = nil,
        replay: Bool = false, _ handler: @escaping (Payload) throws -> Void
    ) -> _NewEntry<Payload> {
        if let pacing, !once {
            let entry = _pacedEntry(executor, pacing, observer: nil, sender: sender) { (_, payload: Payload) in
                try handler(payload)
                return true
            }
            return .paced(entry, replay: replay)
        }
        if case .immediate = executor, !once, sender == nil { return .live(_Handler(handler)) }
        if case .mainActor = executor, !once, sender == nil {
            return .live(_MainHandler(handler, mailbox: _deliveries.main))
        }
        return .live(
            _OptionsEntry(executor: executor, once: once, observer: nil, sender: sender, tracker: _tracker(executor)) {
                _, payload in
                try handler(payload)
                return true
            })
    }

    /// The entry for a selector registration: the entry holds the observer weakly and passes
    /// it, loaded, to the calling closure.
    func _observerEntry<Observer: AnyObject, Payload>(
        _ observer: Observer, _ executor: _Executor, pacing: Pacing? = nil, replay: Bool,
        _ selector: @escaping (Observer) -> (Payload) throws -> Void
    ) -> _NewEntry<Payload> {
        let invoke: (AnyObject?, Payload) throws -> Bool = { target, payload in
            guard let target else { return false }
            try selector(unsafeDowncast(target, to: Observer.self))(payload)
            return true
        }
        if let pacing {
            return .paced(
                _pacedEntry(executor, pacing, observer: observer, sender: nil, invoke: invoke), replay: replay)
        }
        // The tracker also for immediate delivery (which schedules nothing): it reports a dead
        // observer (`Diagnostic.subscriberGone`).
        let entry = _OptionsEntry(
            executor: executor, once: false, observer: observer, sender: nil, tracker: _deliveries, invoke: invoke)
        return .options(entry, replay: replay)
    }

    /// The entry of a plain `@MainActor` handler: called directly by posts on the main actor.
    func _mainHandler<Payload>(_ handler: @escaping @MainActor (Payload) throws -> Void) -> _Entry {
        // Global-actor isolation does not change a function's representation; the entry calls it
        // only on the main actor (see `_MainHandler`).
        _MainHandler(_nonisolated(handler), mailbox: _deliveries.main)
    }

    /// The entry of a `@MainActor` handler with an option (one-shot, sender, pacing, replay).
    func _mainActorEntry<Payload>(
        once: Bool = false, sender: AnyObject? = nil, pacing: Pacing? = nil, replay: Bool,
        _ handler: @escaping @MainActor (Payload) throws -> Void
    ) -> _NewEntry<Payload> {
        let invoke: (AnyObject?, Payload) throws -> Bool = { _, payload in
            let box = _UncheckedSendable(payload)
            try MainActor.assumeIsolated { try handler(box.value) }
            return true
        }
        if let pacing, !once {
            return .paced(
                _pacedEntry(.mainActor, pacing, observer: nil, sender: sender, invoke: invoke), replay: replay)
        }
        let entry = _OptionsEntry<Payload>(
            executor: .mainActor, once: once, observer: nil, sender: sender, tracker: _deliveries, invoke: invoke)
        return .options(entry, replay: replay)
    }

    /// The entry of a `@MainActor` observer's method: the observer is held weakly and loaded for
    /// each call.
    func _mainActorObserverEntry<Observer: AnyObject, Payload>(
        _ observer: Observer, pacing: Pacing? = nil, replay: Bool,
        _ selector: @escaping @MainActor (Observer) -> (Payload) throws -> Void
    ) -> _NewEntry<Payload> {
        let invoke: (AnyObject?, Payload) throws -> Bool = { target, payload in
            guard let target else { return false }
            let box = _UncheckedSendable((unsafeDowncast(target, to: Observer.self), payload))
            try MainActor.assumeIsolated { try selector(box.value.0)(box.value.1) }
            return true
        }
        if let pacing {
            return .paced(
                _pacedEntry(.mainActor, pacing, observer: observer, sender: nil, invoke: invoke), replay: replay)
        }
        let entry = _OptionsEntry<Payload>(
            executor: .mainActor, once: false, observer: observer, sender: nil, tracker: _deliveries, invoke: invoke)
        return .options(entry, replay: replay)
    }
}
