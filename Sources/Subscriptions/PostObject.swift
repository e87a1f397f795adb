/// The envelope a plain post carries: a `flag` string and a weakly held `data` object.
///
/// `PostObject` never keeps its data alive. Once the poster drops its last strong reference to
/// the data object, ``data`` reads `nil`, also inside a delivery that was queued before the
/// object went away. Keep the object alive yourself for as long as handlers need it.
///
/// ```swift
/// center.post("login", PostObject(flag: "sso", data: user))
/// ```
///
/// - Threading: immutable after `init`; safe to read from any thread. The data object itself is
///   handed to handlers on whatever thread or queue they run on: it must be safe to use there.
/// - Lifetime: the envelope holds `data` weakly and a typed post's value payload strongly (a
///   value has no identity to hold weakly).
public final class PostObject: @unchecked Sendable {
    // @unchecked: the stored properties are never written after `init` (`_object` is a `weak var`
    // only because Swift 6.2 has no immutable weak properties; weak loads are atomic). The
    // payload object is not `Sendable`; like `NotificationCenter`'s `object`, the poster vouches
    // for it.

    /// A short string that qualifies the post, such as `"sso"` for a login post. Empty by default.
    public let flag: String

    /// Written only in `init`: a `weak var` because immutable weak properties need Swift 6.3
    /// (SE-0481) and the package supports Swift 6.2.
    private weak var _object: AnyObject?
    /// A typed post's value payload, boxed: one pointer instead of an inline 32-byte existential
    /// keeps the envelope of every plain post a smaller allocation, cheaper to make and destroy.
    private let _value: _ValueBox?

    /// Creates an envelope.
    ///
    /// - Parameters:
    ///   - flag: A short string that qualifies the post.
    ///   - data: The payload object, held weakly: the envelope never keeps it alive.
    public init(flag: String = "", data: AnyObject? = nil) {
        self.flag = flag
        self._object = data
        self._value = nil
    }

    /// Wraps the payload of a typed post for plain subscribers: an object payload is held
    /// weakly like `data`, a value payload is copied. `sendable`: the payload was posted as
    /// `Sendable`; otherwise it is withheld from ``data`` and ``payload(as:)`` and readable only
    /// with ``unsafePayload(as:)``. `package`: the Foundation bridge copies envelopes with it.
    package convenience init<Payload>(_typed payload: Payload, sendable: Bool = true) {
        self.init(_boxing: payload, postedAs: sendable ? nil : Payload.self)
    }

    /// A copy of `original`'s typed payload `value` (read with `unsafePayload(as:)`) that
    /// withholds it exactly as `original` does. For the Foundation bridge.
    package convenience init(_copying value: Any, of original: PostObject) {
        self.init(_boxing: value, postedAs: original._value?.postedAs)
    }

    /// A typed payload: an object posted as `Sendable` (`postedAs` is `nil`) goes in `data`, held
    /// weakly; anything else in a box that withholds it unless it was posted as `Sendable`.
    private init(_boxing any: Any, postedAs: Any.Type?) {
        self.flag = ""
        let isObject = type(of: any) is AnyClass
        if isObject && postedAs == nil {
            self._object = any as AnyObject
            self._value = nil
        } else {
            self._object = nil
            self._value = _ValueBox(any, isObject: isObject, postedAs: postedAs)
        }
    }

    /// The payload object, or `nil` once it has been deallocated (or when there was none).
    ///
    /// Reading it from any thread is safe. Reading it gives you a strong reference for as long as
    /// you keep the result.
    public var data: AnyObject? { _object }

    /// The payload as `T`, or `nil` when there is none or it is not a `T`.
    ///
    /// For a post made with a typed ``Topic`` this is the typed payload (the value itself for a
    /// value type); for a plain post it is ``data`` cast to `T`.
    ///
    /// `T` must be `Sendable`: an envelope is `Sendable`, so it may be read on another thread or
    /// actor than the poster's, and a non-`Sendable` value must not cross there unseen. A typed
    /// post made with the non-`Sendable` form of `PostCenter.post(_:_:from:)`
    /// (its payload type is not `Sendable`, or not known to be where it was posted) gives its
    /// payload here only as exactly that payload type, which `T`'s `Sendable` requirement then
    /// proves safe; as any other type (`any Sendable`, a superclass, a protocol) it is `nil`, and
    /// ``data`` withholds it too. Read it with ``unsafePayload(as:)`` where you vouch for it.
    ///
    /// - Complexity: one dynamic cast.
    public func payload<T: Sendable>(as type: T.Type = T.self) -> T? {
        _payload(as: T.self)
    }

    /// The payload as `T`, whether `T` is `Sendable` or not, also the payload of a typed post
    /// whose payload type is not `Sendable`.
    ///
    /// The caller vouches that the value is used safely where it reads it: for a non-`Sendable`
    /// payload, that is on the posting thread (a handler with immediate delivery), or where the
    /// poster and the reader otherwise guarantee exclusive access. Everything else is as
    /// ``payload(as:)``.
    ///
    /// - Complexity: one dynamic cast.
    public func unsafePayload<T>(as type: T.Type = T.self) -> T? {
        if let box = _value { return box.payload as? T }
        if let object = _object { return object as? T }
        return nil
    }

    /// ``payload(as:)`` for any `T`: withholds a payload posted as not `Sendable`. For the
    /// engine's typed subscriptions reading plain posts, and the Foundation bridge.
    ///
    /// The exact payload type of a post made as not `Sendable` is safe for a typed subscription
    /// too: one of another delivery than immediate proved it `Sendable` when it subscribed.
    package func _payload<T>(as type: T.Type) -> T? {
        if let box = _value {
            guard box.postedAs == nil || box.postedAs == T.self else { return nil }
            return box.payload as? T
        }
        if let object = _object { return object as? T }
        return nil
    }
}

/// Holds a typed post's value payload for `PostObject`, or the payload of a typed post whose
/// payload type is not `Sendable` (an object one weakly, like `data`).
final class _ValueBox: @unchecked Sendable {
    // @unchecked: immutable after `init` (`object` is a `weak var` only because Swift 6.2 has no
    // immutable weak properties); the value is handed over exactly like `PostObject`'s payload,
    // and a non-`Sendable` one only through `unsafePayload(as:)`.
    private let value: Any?
    private weak var object: AnyObject?
    /// The payload type of a post made as not `Sendable` (`nil`: posted as `Sendable`).
    let postedAs: Any.Type?

    init(_ payload: Any, isObject: Bool = false, postedAs: Any.Type? = nil) {
        if isObject {
            value = nil
            object = payload as AnyObject
        } else {
            value = payload
        }
        self.postedAs = postedAs
    }

    /// The payload: the value, or the object while it lives.
    var payload: Any? { value ?? object }
}
