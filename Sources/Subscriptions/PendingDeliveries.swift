extension PostCenter {
    /// Waits until every queued and main-actor delivery that posts scheduled before this call has
    /// run, or has been dropped (its subscription was cancelled or paused, or its observer
    /// deallocated).
    ///
    /// Made for tests of code whose handlers run on a queue or on the main actor: post, then
    /// `await center.waitForPendingDeliveries()`, then check the effects, with no sleeps.
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
    /// are not counted either: they run in the actor's own tasks.
    ///
    /// - Threading: call it from any task. Waiting does not block a thread: the task suspends
    ///   and is resumed by the last delivery it waits for. Called on the main actor, it lets the
    ///   main actor run the pending main-actor deliveries while it waits.
    /// - Warning: it waits as long as those deliveries do: a queue that is suspended, or blocked
    ///   by its own work, holds it up until it runs them.
    /// - Complexity: O(1) when nothing is pending. Every scheduled delivery is counted with one
    ///   lock acquisition when it is scheduled and one when it ends.
    public func waitForPendingDeliveries() async {
        await _deliveries.wait()
    }

    /// The delivery counter for entries with `executor`: `nil` for immediate ones.
    func _tracker(_ executor: _Executor) -> _DeliveryTracker? {
        if case .immediate = executor { return nil }
        return _deliveries
    }
}
