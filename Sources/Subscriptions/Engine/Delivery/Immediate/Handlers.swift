import Synchronization

/// The hot path: a handler that runs on the posting thread, with no options. A post whose
/// payload type is exactly `Payload` recognises this class by its metadata and calls `handler`
/// directly, with no cast and no virtual dispatch.
final class _Handler<Payload>: _Entry, @unchecked Sendable {
    /// Throwing, so that a handler written with `try` needs no overload: a non-throwing closure
    /// converts to it without a thunk, and a call costs one test of the error register more.
    let handler: (Payload) throws -> Void

    init(_ handler: @escaping (Payload) throws -> Void) {
        self.handler = handler
    }

    override func deliver(_ post: PostObject, sender: AnyObject?, route: _Route) -> Bool {
        guard let payload = _extract(Payload.self, from: post) else { return false }
        do { try handler(payload) } catch { _noteThrew(error, route: route) }
        return true
    }
}

/// The hot path of plain names: `_Handler` for envelopes, stored at the closure's own type.
/// (A `(PostObject) -> Void` stored as a generic `(Payload) -> Void` would need a
/// reabstraction thunk: one more allocation per subscription and one more call per delivery.)
final class _EnvelopeHandler: _Entry, @unchecked Sendable {
    let handler: (PostObject) throws -> Void

    init(_ handler: @escaping (PostObject) throws -> Void) {
        self.handler = handler
    }

    override func deliver(_ post: PostObject, sender: AnyObject?, route: _Route) -> Bool {
        do { try handler(post) } catch { _noteThrew(error, route: route) }
        return true
    }
}
