extension PostCenter {
    /// Waits until every queued, main-actor and actor delivery that posts made before this call
    /// scheduled has run, or has been dropped (its subscription was cancelled or paused, its
    /// observer or actor deallocated).
    ///
    /// Made for tests of code whose handlers run on a queue, on the main actor or on an actor:
    /// post, then `await center.waitForPendingDeliveries()`, then check the effects, with no sleeps.
    ///
    /// ```swift
    /// @Test func statusFollowsTheBatteryLevel() async {
    ///     let center = PostCenter()
    ///     let model = StatusModel(center: center)   // subscribes with delivery: .mainActor
    ///     center.post(.battery, 15)
    ///     await center.waitForPendingDeliveries()
    ///     #expect(await model.status == "low")
    /// }
    /// ```
    ///
    /// Deliveries scheduled after the call (also by handlers that run meanwhile) do not hold it
    /// up, so a steady stream of posts cannot keep it waiting. Handlers that run synchronously
    /// (``Delivery/immediate``, and main-actor handlers posted on the main thread) are done when
    /// `post` returns and are not waited for. Deliveries to an actor (`subscribe(_:on:handler:)`)
    /// are waited for up to the last payload their mailbox held when this was called.
    ///
    /// - Threading: call it from any task. Waiting does not block a thread: the task suspends
    ///   and is resumed by the last delivery it waits for. Called on the main actor, it lets the
    ///   main actor run the pending main-actor deliveries while it waits.
    /// - Warning: it waits as long as those deliveries do: a queue that is suspended, or blocked
    ///   by its own work, holds it up until it runs them.
    /// - Complexity: O(1) when nothing is pending, plus O(actor subscriptions with deliveries
    ///   pending). Each delivery to a queue is counted with one lock acquisition when it is
    ///   scheduled and one when it ends; main-actor and actor mailboxes count theirs for free.
    public func waitForPendingDeliveries() async {
        await _deliveries.wait()
    }

    /// The delivery counter for entries with `executor`: `nil` for immediate ones. (Main-actor
    /// entries use its main mailbox, which counts its own deliveries.)
    func _tracker(_ executor: _Executor) -> _DeliveryTracker? {
        if case .immediate = executor { return nil }
        return _deliveries
    }
}
