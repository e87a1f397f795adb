/// A name with a payload type, so that posting the wrong payload type is a compile error.
///
/// ```swift
/// extension Topic where Payload == User {
///     static let login = Topic("login")
/// }
/// center.post(.login, user)                     // Payload is checked at compile time
/// let token = center.subscribe(.login) { user in print(user.name) }
/// ```
///
/// Topics share the name space of plain names: `Topic<User>("login")` and the plain name
/// `"login"` are the same route. A topic subscriber receives every post of its name whose payload
/// is a `Payload` (typed posts, and plain posts whose ``PostObject/data`` is a `Payload`); a plain
/// subscriber receives every post of the name.
///
/// Equality and hashing use ``name`` only. A `Topic` is an immutable value, safe to share across
/// threads.
public struct Topic<Payload>: Hashable, Sendable {
    /// The name that routes posts of this topic.
    public let name: String

    /// The name with its hash, computed once here so that posting never hashes.
    let _key: _NameKey
    /// The entry class a post of this topic calls directly (see `PostCenter._post`).
    let _direct: ObjectIdentifier
    /// The main-actor entry class a post of this topic calls directly on the main actor (see
    /// `_MainHandler`). Computed here, once: a post that runs unspecialised would otherwise ask
    /// the runtime for the metadata of `_MainHandler<Payload>` (a hash-table lookup) per handler.
    let _mainDirect: ObjectIdentifier
    /// Whether `Payload` is `PostObject` (posts of such a topic take the envelope path). Computed
    /// here, once: an unspecialised post would otherwise fetch and compare type metadata.
    let _envelope: Bool

    /// Creates a topic for `name`.
    ///
    /// - Complexity: O(length of `name`), once; keep topics in `static let`s.
    public init(_ name: String) {
        self.name = name
        self._key = _NameKey(name)
        self._direct = ObjectIdentifier(_Handler<Payload>.self)
        self._mainDirect = ObjectIdentifier(_MainHandler<Payload>.self)
        self._envelope = Payload.self == PostObject.self
    }

    /// Topics are equal when their names are.
    public static func == (lhs: Topic, rhs: Topic) -> Bool {
        lhs.name == rhs.name
    }

    /// Hashes the name.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
    }
}
