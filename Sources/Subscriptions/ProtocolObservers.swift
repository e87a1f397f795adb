/// Protocol-keyed observers: a notification is a method call on every observer registered for a
/// protocol, checked by the compiler.
///
/// ```swift
/// protocol UserObserver: AnyObject {
///     func userDidLogin(_ user: User)
///     func userDidChangeAvatar(_ user: User)   // optional: has a default below
/// }
/// extension UserObserver {
///     func userDidChangeAvatar(_ user: User) {}
/// }
///
/// final class Screen: UserObserver {
///     init(center: PostCenter) { center.addObserver(self, for: UserObserver.self) }
///     func userDidLogin(_ user: User) { print("welcome", user.name) }
/// }
///
/// center.notify(UserObserver.self) { $0.userDidLogin(user) }
/// ```
///
/// ## Guarantees
/// - **Weak**: the center never retains an observer. An observer that deallocated is never called
///   nor returned, and its slot is reclaimed (lazily, within a constant factor of the live ones).
/// - **Order**: observers are called in registration order. Adding an observer that is already
///   registered for the protocol does nothing (it keeps its place).
/// - **Snapshot**: a `notify` calls the observers registered when it started; observers added
///   during it are not called by it, observers removed during it are not called after removal
///   (a call that another thread's `notify` has already begun is not interrupted).
/// - **Identity**: a protocol is keyed by its type identity, not by its name: two protocols called
///   `UserObserver` in different modules or scopes are separate.
/// - **Threads**: every method is safe from any thread, also from inside a `notify` body (no lock
///   is held while the body runs, so adding, removing or notifying from it cannot deadlock).
///
/// **The key is exactly the type you pass.** Pass the protocol, `UserObserver.self`. Registering
/// for a conforming class (`Screen.self`), for a composition (`(any A & B).self`) or for a
/// refined protocol keys a separate list that `notify(UserObserver.self)` does not reach. In a
/// generic function, `T.self` for `T: UserObserver` is the concrete type, not the protocol.
///
/// **Optional methods.** Give a requirement a default implementation in a protocol extension:
/// observers that implement it get the call, the others run the default. Declare the method in
/// the protocol body too; a method that exists only in the extension is not dynamically
/// dispatched and observers' versions of it would never run.
///
/// **Actors.** `notify` calls observers on the calling thread, synchronously, and the center does
/// not hop. A `@MainActor` class can register itself (through a `@MainActor` protocol, an isolated
/// conformance such as `extension Screen: @MainActor UserObserver`, or `nonisolated` methods);
/// observers whose protocol or conformance is isolated to an actor must then be notified from that
/// actor. The center cannot check this for you.
extension PostCenter {
    /// Registers `observer` for the protocol `protocolType`, holding it weakly.
    ///
    /// ```swift
    /// center.addObserver(self, for: UserObserver.self)
    /// ```
    ///
    /// The observer is notified after all observers registered before it. If it is already
    /// registered for `protocolType`, nothing changes: it is not added twice and keeps its place.
    /// The registration ends when the observer deallocates, or with ``removeObserver(_:for:)`` or
    /// ``removeObserver(_:)``; no bookkeeping is needed in `deinit`.
    ///
    /// - Precondition: `observer` is a class instance. Registering a value (a struct or enum
    ///   conforming to the protocol) stops the program with a message naming its type, because a
    ///   value cannot be held weakly; make the observer a class.
    /// - Parameters:
    ///   - observer: The object to notify. Held weakly.
    ///   - protocolType: The protocol to register for, such as `UserObserver.self`. Observers
    ///     are keyed by this type's identity; see the note on protocol-keyed observers above.
    ///   - fileID: The call site, recorded for the tokens' `debugDescription`; leave the default.
    ///   - line: The call site's line; leave the default.
    /// - Threading: safe from any thread, also inside a ``notify(_:_:)`` body; a `notify` that is
    ///   already running does not call an observer added during it.
    /// - Complexity: amortised O(1).
    public func addObserver<P>(_ observer: P, for protocolType: P.Type, fileID: String = #fileID, line: Int = #line) {
        let object = _requireClassInstance(observer, "addObserver(_:for:)")
        let site = _CallSites.shared.intern(fileID, line)
        _ = _protocols.add(observer, object: object, for: ObjectIdentifier(P.self), site: site)
    }

    /// Registers `observer` for the protocol `protocolType`, holding it weakly, and returns a
    /// token that controls the registration.
    ///
    /// ```swift
    /// token = center.observe(self, for: UserObserver.self)
    /// ```
    ///
    /// Cancelling or deinitialising the token removes the observer from `protocolType` (exactly
    /// like ``removeObserver(_:for:)``). ``Subscription/pause()`` makes `notify` skip the observer
    /// until ``Subscription/resume()``, in the same place in the order.
    /// ``Subscription/isActive`` is `false` once the registration is removed (by any means),
    /// while paused, after the observer deallocated, and after the center deinitialised.
    ///
    /// If `observer` is already registered for `protocolType` (by ``addObserver(_:for:fileID:line:)`` or
    /// another token), the token controls that same registration: there is still one, and
    /// cancelling any of its tokens ends it.
    ///
    /// > Important: Keep the token. Dropping it, for example with `_ = center.observe(...)`,
    /// > removes the observer at once. Use ``addObserver(_:for:fileID:line:)`` when you do not want a token.
    ///
    /// - Precondition: `observer` is a class instance (see ``addObserver(_:for:fileID:line:)``).
    /// - Parameters:
    ///   - observer: The object to notify. Held weakly; the token does not retain it either, so
    ///     the observer can own its token without a reference cycle.
    ///   - protocolType: The protocol to register for, such as `UserObserver.self`.
    ///   - fileID: The call site, recorded for the token's `debugDescription`; leave the default.
    ///   - line: The call site's line; leave the default.
    /// - Returns: The token owning the registration.
    /// - Threading: safe from any thread; the token may be cancelled from any thread.
    /// - Complexity: amortised O(1).
    public func observe<P>(
        _ observer: P, for protocolType: P.Type, fileID: String = #fileID, line: Int = #line
    ) -> Subscription {
        let object = _requireClassInstance(observer, "observe(_:for:)")
        let key = ObjectIdentifier(P.self)
        let entry = _protocols.add(observer, object: object, for: key, site: _CallSites.shared.intern(fileID, line))
        return Subscription(home: _ProtocolHome(registry: _protocols, key: key, entry: entry), entry: nil)
    }

    /// Removes `observer` from the protocol `protocolType`. Its other registrations stay.
    ///
    /// Removing an observer that is not registered for `protocolType` (or a value that is not a
    /// class instance, which can never be registered) does nothing. Removing the last observer
    /// of a protocol is fine and frees the protocol's list.
    ///
    /// - Parameters:
    ///   - observer: The object to remove.
    ///   - protocolType: The protocol it was registered for.
    /// - Threading: safe from any thread, also inside a ``notify(_:_:)`` body, where the removed
    ///   observer is not called after this returns, even by the `notify` in progress. A `notify`
    ///   running on another thread that has already started calling this observer finishes that
    ///   call: removal does not wait for it.
    /// - Complexity: amortised O(1).
    public func removeObserver<P>(_ observer: P, for protocolType: P.Type) {
        guard let object = _classInstance(observer) else { return }
        _protocols.remove(objectID: ObjectIdentifier(object), for: ObjectIdentifier(P.self))
    }

    /// Removes every registration of `observer`: its protocol registrations (for every protocol)
    /// and its selector registrations (every `register(_:observer:…)` overload), on every name.
    ///
    /// The tokens of those registrations report ``Subscription/isActive`` `false` from then on;
    /// cancelling them is harmless. A selector registration's closure is released when its token
    /// is cancelled or deinitialised, as usual. Queued or main-actor deliveries to the observer
    /// that have not started yet are dropped.
    ///
    /// Does nothing for an object that is not registered. Calling it from the observer's
    /// `deinit` is allowed but unnecessary: a deallocated observer is never called.
    ///
    /// - Parameter observer: The object to remove.
    /// - Threading: as ``removeObserver(_:for:)``: safe from any thread, also inside a handler;
    ///   it does not wait for a call that another thread has already begun.
    /// - Complexity: O(protocols with observers in this center + subscriptions in this center):
    ///   selector registrations are found by scanning, so keep it off hot paths.
    public func removeObserver(_ observer: AnyObject) {
        _protocols.remove(objectID: ObjectIdentifier(observer), for: nil)
        _removeSelectorRegistrations(of: observer)
    }

    /// The observers that a ``notify(_:_:)`` of `protocolType` would call now, in registration
    /// order: observers that deallocated or whose token is paused are left out.
    ///
    /// The array holds strong references: the observers stay alive while you keep it.
    ///
    /// - Parameter protocolType: The protocol, such as `UserObserver.self`.
    /// - Returns: The live observers, in registration order.
    /// - Threading: safe from any thread; the answer can be stale as soon as it is returned if
    ///   other threads add or remove observers.
    /// - Complexity: O(observers of `protocolType`).
    public func observers<P>(for protocolType: P.Type) -> [P] {
        _protocols.observers(ObjectIdentifier(P.self), as: P.self)
    }

    /// Calls `body` with each observer of `protocolType`, in registration order, on the calling
    /// thread, and returns how many it called.
    ///
    /// ```swift
    /// center.notify(UserObserver.self) { $0.userDidLogin(user) }
    /// ```
    ///
    /// `notify` works on the registrations present when it starts: an observer added during the
    /// notify (by `body` or by another thread) is not called by it. Each observer is checked right
    /// before its call: one that was removed, paused or deallocated meanwhile is skipped, so an
    /// observer removed from inside `body` is never called after the removal. An observer is kept
    /// alive for the duration of its own call.
    ///
    /// No lock is held while `body` runs: it may add, remove, list and notify observers, of this
    /// or any protocol, and may post. Nested notifies run depth-first.
    ///
    /// - Parameters:
    ///   - protocolType: The protocol, such as `UserObserver.self`. Only observers registered for
    ///     exactly this type are called.
    ///   - body: Called once per observer, typically with one protocol method call. With a
    ///     method that has a default implementation, observers that do not implement it run the
    ///     default (and are counted).
    /// - Returns: How many observers `body` was called on; 0 when there are none.
    /// - Threading: safe from any thread, concurrently with every other operation.
    /// - Complexity: O(observers of `protocolType`); one lock acquisition and no allocation per
    ///   notify (a second lock acquisition when it meets deallocated observers, to reclaim them).
    @discardableResult
    public func notify<P>(_ protocolType: P.Type, _ body: (P) -> Void) -> Int {
        _protocols.notify(ObjectIdentifier(P.self), body)
    }

    /// `observer` as an object, or a precondition failure that names its type.
    ///
    /// `fatalError` rather than `preconditionFailure`: optimised builds drop the message of the
    /// latter, and the message is the point.
    func _requireClassInstance<P>(_ observer: P, _ function: StaticString) -> AnyObject {
        guard let object = _classInstance(observer) else {
            fatalError(
                "PostCenter.\(function): \(type(of: observer as Any)) is not a class, but observers of "
                    + "\(P.self) are held weakly and must be class instances. Make \(type(of: observer as Any)) "
                    + "a class, or register a class instance that forwards the calls to it.")
        }
        return object
    }

    /// `observer` as an object when it is a class instance, `nil` for a value.
    ///
    /// The check uses the dynamic type: `observer as AnyObject` alone would box a struct into a
    /// new object on Linux, which the center would then hold weakly and lose at once. The object
    /// found is checked to be of that dynamic type too, because for `P == any Error` the cast
    /// from a generic `P` boxes the error instead of unwrapping it; that case is unwrapped
    /// through `any Error`.
    func _classInstance<P>(_ observer: P) -> AnyObject? {
        let value = observer as Any
        let dynamicType = type(of: value)
        guard dynamicType is AnyClass else { return nil }
        let object = value as AnyObject
        if ObjectIdentifier(type(of: object)) == ObjectIdentifier(dynamicType) { return object }
        if let error = observer as? any Error {
            let unwrapped = error as AnyObject
            if ObjectIdentifier(type(of: unwrapped)) == ObjectIdentifier(dynamicType) { return unwrapped }
        }
        fatalError(
            "PostCenter: cannot find the \(dynamicType) instance inside a value of type \(P.self); "
                + "register the object itself, or an existential of a protocol it conforms to.")
    }

    /// How many slots the list of `protocolType` uses, live or not (for tests of reclamation).
    func _protocolSlotCount<P>(for protocolType: P.Type) -> Int {
        _protocols.slotCount(ObjectIdentifier(P.self))
    }
}
