/// Which names a pattern subscription listens to: every name, or every name that starts with a
/// prefix.
///
/// ```swift
/// let everything = NamePattern.all
/// let orders = NamePattern.prefix("orders.")
/// ```
///
/// A prefix is compared with the start of a post's name byte by byte, in UTF-8: unlike whole
/// names (Guarantees, rule 14), a prefix does not match a name that spells the same characters
/// with other Unicode scalars, so spell prefixes in the form your names use. `.prefix("")`
/// matches every name, like `.all`, and shares its subscriptions' order.
///
/// A value type: safe to share between threads and to keep for any time.
public enum NamePattern: Hashable, Sendable {
    /// Every name of the center.
    case all
    /// Every name whose UTF-8 spelling starts with the given string's (the name itself included).
    case prefix(String)

    /// Whether a post of `name` reaches a subscription to this pattern.
    ///
    /// - Complexity: O(length of the prefix).
    public func matches(_ name: String) -> Bool {
        switch self {
        case .all: return true
        case .prefix(let prefix): return name.utf8.starts(with: prefix.utf8)
        }
    }
}
