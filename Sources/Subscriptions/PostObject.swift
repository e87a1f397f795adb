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
    /// weakly like `data`, a value payload is copied. `package`: the Foundation bridge copies
    /// envelopes with it.
    package init<Payload>(_typed payload: Payload) {
        self.flag = ""
        let any = payload as Any
        if type(of: any) is AnyClass {
            self._object = any as AnyObject
            self._value = nil
        } else {
            self._object = nil
            self._value = _ValueBox(any)
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
    /// - Complexity: one dynamic cast.
    public func payload<T>(as type: T.Type = T.self) -> T? {
        if let value = _value { return value.value as? T }
        if let object = _object { return object as? T }
        return nil
    }
}

/// Holds a typed post's value payload for `PostObject`.
final class _ValueBox: @unchecked Sendable {
    // @unchecked: immutable; the value is handed over exactly like `PostObject`'s payload.
    let value: Any
    init(_ value: Any) { self.value = value }
}
