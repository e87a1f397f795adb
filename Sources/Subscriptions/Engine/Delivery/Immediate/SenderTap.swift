/// An immediate registration whose handler is also given the post's sender: what the Foundation
/// bridge's `forward(_:to:)` needs to repost with the sender as `Notification.object`.
///
/// Reached through the envelope path (it takes no typed payload), on the posting thread, inside
/// the post's frame, exactly like `_EnvelopeHandler`. The sender of a retained post is the
/// post's record (see `Retained.swift`), which is an implementation detail: the handler gets
/// the sender the retained post was made `from:` instead (`nil` when it had none or it is gone).
final class _SenderTap: _Entry, @unchecked Sendable {
    // @unchecked: `handler` is immutable.
    let handler: (PostObject, AnyObject?) -> Void

    init(_ handler: @escaping (PostObject, AnyObject?) -> Void) {
        self.handler = handler
    }

    override func deliver(_ post: PostObject, sender: AnyObject?, route: _Route) -> Bool {
        handler(post, _postSender(sender))
        return true
    }
}

extension PostCenter {
    /// Subscribes `handler` to every post of `name` on the posting thread, with the post's sender
    /// (`nil` for posts made without one). For `SubscriptionsFoundation`; the rules are those of
    /// an immediate `subscribe(_:handler:)`.
    package func _subscribeWithSender(
        _ name: String, fileID: String, line: Int, handler: @escaping @Sendable (PostObject, AnyObject?) -> Void
    ) -> Subscription {
        _add(_SenderTap(handler), to: _NameKey(name), fileID, line)
    }
}
