import Foundation
import Subscriptions

// The `NotificationCenter` interop of Subscriptions, in a module of its own so that the core
// `Subscriptions` module (and programs that use only it) never load Foundation.

// MARK: Notification → PostObject

extension PostObject {
    /// Reads the envelope back from a Foundation notification reposted by
    /// `PostCenter.forward(_:to:)` (its `userInfo` holds the post under
    /// ``UserInfoKey/post``), or whose `object` is a ``PostObject``.
    ///
    /// ```swift
    /// NotificationCenter.default.subscribe(to: Notification.Name("login")) { notification in
    ///     guard let post = PostObject(notification) else { return }
    ///     print(post.flag, post.payload(as: User.self) as Any)
    /// }
    /// ```
    ///
    /// The result is a **copy** of the envelope: the same ``flag``, the same ``data`` object
    /// (held weakly, like the original: it reads `nil` once the data object deallocated) and,
    /// for an envelope of a typed post, the same ``payload(as:)`` value. For the original object
    /// itself, use `notification.userInfo?[PostObject.UserInfoKey.post] as? PostObject`. The
    /// initialiser fails (`nil`) when the notification carries no `PostObject` in either place.
    ///
    /// - Parameter notification: A notification forwarded by a ``PostCenter``, or whose `object`
    ///   is a `PostObject`.
    public convenience init?(_ notification: Notification) {
        guard
            let original = notification.object as? PostObject
                ?? notification.userInfo?[PostObject.UserInfoKey.post] as? PostObject
        else { return nil }
        let data = original.data
        if data == nil, let value = original.unsafePayload(as: Any.self) {
            // The envelope of a typed post with a value payload, or with a payload posted as not
            // `Sendable` (its flag is always empty): the copy withholds what the original did.
            self.init(_copying: value, of: original)
        } else {
            self.init(flag: original.flag, data: data)
        }
    }
}

extension PostObject {
    /// The `userInfo` keys of the notifications that `PostCenter.forward(_:to:)` posts, for
    /// legacy observers that read them: `note.userInfo?[PostObject.UserInfoKey.flag] as? String`.
    public enum UserInfoKey {
        /// The post's ``PostObject/flag``, a `String` (empty for typed posts).
        public static let flag = "flag"
        /// The post's ``PostObject/data`` object; absent when the post has none (or it deallocated).
        public static let data = "data"
        /// The post's ``PostObject`` itself; ``PostObject/init(_:)`` reads it.
        public static let post = "post"
    }

    /// The `userInfo` of a forwarded notification.
    fileprivate var _userInfo: [AnyHashable: Any] {
        var info: [AnyHashable: Any] = [UserInfoKey.flag: flag, UserInfoKey.post: self]
        if let data { info[UserInfoKey.data] = data }
        return info
    }
}

// MARK: NotificationCenter → PostCenter

extension NotificationCenter {
    /// Relays the notifications named `name` (optionally only those of one sender) into
    /// `center` as typed posts of `topic`, until the returned token is cancelled or dropped.
    ///
    /// ```swift
    /// let keyboard = NotificationCenter.default.relay(UIResponder.keyboardWillShowNotification,
    ///                                                 to: .keyboard, on: center) { note in Keyboard(note) }
    /// ```
    ///
    /// Each notification is turned into a payload by `transform` and posted to `topic`
    /// synchronously, on the thread that posted the notification, before its `post` returns.
    /// When the notification's `object` is an object, the relayed post is made `from:` it, so
    /// `subscribe(_:from:…)` filters see the same sender.
    ///
    /// - Parameters:
    ///   - name: The notification name to relay.
    ///   - object: Only notifications posted with this sender are relayed; `nil` for every
    ///     sender. Matched by Foundation as in `addObserver(forName:object:queue:using:)`.
    ///   - topic: The topic the payloads are posted to.
    ///   - center: The center to post to; held until the token is cancelled or deinitialised.
    ///   - transform: Makes the payload of one notification. Called on the posting thread; held
    ///     until the token is cancelled or deinitialised, then released.
    /// - Returns: The token that keeps the relay alive: the Foundation observer is removed with
    ///   it, with the guarantees of ``NotificationCenter/subscribe(to:object:queue:handler:)``
    ///   (when `cancel()` returns, no relay is running on another thread and none starts again).
    public func relay<Payload: Sendable>(
        _ name: Notification.Name, object: AnyObject? = nil, to topic: Topic<Payload>, on center: PostCenter,
        transform: @escaping @Sendable (Notification) -> Payload
    ) -> Subscription {
        _relay(name, object: object, transform: transform) { center.post(topic, $0, from: $1) }
    }

    /// ``relay(_:object:to:on:transform:)`` for a payload that is not `Sendable`: it is posted with
    /// `PostCenter.post(_:_:from:)`'s non-`Sendable` form, so it stays
    /// on the thread that posted the notification (plain subscribers read it only with
    /// ``PostObject/unsafePayload(as:)``). Everything else is as the `Sendable` form.
    ///
    /// - Parameters:
    ///   - name: The notification name to relay.
    ///   - object: Only notifications posted with this sender are relayed; `nil` for every sender.
    ///   - topic: The topic the payloads are posted to.
    ///   - center: The center to post to; held until the token is cancelled or deinitialised.
    ///   - transform: Makes the payload of one notification, on the posting thread.
    /// - Returns: The token that keeps the relay alive, as for the `Sendable` form.
    public func relay<Payload>(
        _ name: Notification.Name, object: AnyObject? = nil, to topic: Topic<Payload>, on center: PostCenter,
        transform: @escaping @Sendable (Notification) -> Payload
    ) -> Subscription {
        _relay(name, object: object, transform: transform) { center.post(topic, $0, from: $1) }
    }

    /// Observes `name` and posts what `transform` makes of each notification with `post`, from
    /// the notification's `object` when that is an object.
    private func _relay<Payload>(
        _ name: Notification.Name, object: AnyObject?, transform: @escaping @Sendable (Notification) -> Payload,
        post: @escaping @Sendable (Payload, AnyObject?) -> Void
    ) -> Subscription {
        subscribe(to: name, object: object) { notification in
            let payload = transform(notification)
            if let sender = notification.object, type(of: sender) is AnyClass {
                post(payload, sender as AnyObject)
            } else {
                post(payload, nil)
            }
        }
    }
}

// MARK: PostCenter → NotificationCenter

extension PostCenter {
    /// Reposts every post of `name` to a `NotificationCenter`, for code that still listens there.
    ///
    /// Each post becomes a `Notification` named `name` whose `object` is the post's **sender**
    /// (`post(_:_:from:)`; `nil` for a post made without one), so a legacy observer registered
    /// with `object: sender` receives exactly that sender's posts. The `userInfo` carries the
    /// post: ``PostObject/UserInfoKey/flag`` (a `String`), ``PostObject/UserInfoKey/data`` (the
    /// data object, when the post has one) and ``PostObject/UserInfoKey/post`` (the
    /// ``PostObject`` itself; for a typed post, the envelope whose ``PostObject/payload(as:)``
    /// returns the value). Read it back with ``PostObject/init(_:)``.
    ///
    /// ```swift
    /// let bridge = center.forward("login")          // to NotificationCenter.default
    /// center.post("login", flag: "sso", from: session)
    /// // A legacy observer of "login" with object: session gets userInfo["flag"] == "sso".
    /// ```
    ///
    /// Forwarding is an ordinary immediate subscription: it runs on the posting thread, in
    /// subscription order, and `NotificationCenter.post` runs its own observers before returning.
    /// It counts as one subscriber of the name. Dropping the token stops forwarding.
    ///
    /// > Warning: An observer that posts the same name back to this center recurses without end.
    ///
    /// - Parameters:
    ///   - name: The name to forward; also the notification's name.
    ///   - center: The notification center to post to; held until the token is cancelled.
    ///   - fileID: The call site, recorded for ``PostCenter/subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    /// - Returns: The token that keeps forwarding alive.
    public func forward(
        _ name: String, to center: NotificationCenter = .default, fileID: String = #fileID, line: Int = #line
    ) -> Subscription {
        let notificationName = Notification.Name(name)
        return _subscribeWithSender(name, fileID: fileID, line: line) { post, sender in
            center.post(name: notificationName, object: sender, userInfo: post._userInfo)
        }
    }

    /// Reposts every post of `topic`'s name whose payload is a `Payload` to a `NotificationCenter`.
    ///
    /// Forwards exactly the posts a subscriber of `topic` would receive: typed posts of `topic`,
    /// and plain posts whose ``PostObject/data`` is a `Payload`. The notification is named
    /// `topic.name`, its `object` is the post's sender and its `userInfo` the post, as for
    /// the `forward(_:to:)` of a name; for a typed post, ``PostObject/init(_:)`` gives back
    /// an envelope whose ``PostObject/payload(as:)`` returns the value. A typed post whose payload
    /// was posted as not `Sendable` is not forwarded: `NotificationCenter` may hand it to an
    /// observer's queue, and the envelope withholds it anyway. The forwarder counts as
    /// one subscriber of the name, in every post of the name (also those it skips).
    ///
    /// - Parameters:
    ///   - topic: The topic to forward.
    ///   - center: The notification center to post to; held until the token is cancelled.
    ///   - fileID: The call site, recorded for ``PostCenter/subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    /// - Returns: The token that keeps forwarding alive.
    public func forward<Payload>(
        _ topic: Topic<Payload>, to center: NotificationCenter = .default, fileID: String = #fileID,
        line: Int = #line
    ) -> Subscription {
        let notificationName = Notification.Name(topic.name)
        return _subscribeWithSender(topic.name, fileID: fileID, line: line) { post, sender in
            guard post._payload(as: Payload.self) != nil else { return }
            center.post(name: notificationName, object: sender, userInfo: post._userInfo)
        }
    }
}
