// A login story in three parts: an async loop that greets users, legacy code that still listens
// on NotificationCenter, and one-line posts to the default center.
//
//     swift run AsyncStreams
import Foundation
import Subscriptions
import SubscriptionsFoundation

struct User: Sendable {
    let name: String
}

extension Topic where Payload == User {
    static let login = Topic("login")
}

// 1. An async sequence. The subscription starts here, so the posts below are buffered even if
//    the task has not reached its loop yet. `PostCenter.posts` is `PostCenter.default.posts`.
let logins = PostCenter.posts(.login)
let greeter = Task {
    var greeted: [String] = []
    for await user in logins {
        print("greeter: welcome, \(user.name)")
        greeted.append(user.name)
        if greeted.count == 3 { break }  // leaving the loop ends the subscription
    }
    return greeted
}

// 2. The Foundation bridge. Old code observes NotificationCenter; the center forwards logins
//    there, and the observer's token removes it from NotificationCenter when cancelled or dropped.
let forwarding = PostCenter.default.forward(.login)  // to NotificationCenter.default
let legacy = NotificationCenter.default.subscribe(to: Notification.Name("login")) { notification in
    guard let post = PostObject(notification), let user = post.payload(as: User.self) else { return }
    print("legacy observer: \(user.name) logged in")
}

// 3. Short call sites: static shorthands post to `PostCenter.default`.
for name in ["ada", "grace", "linus"] {
    let reached = PostCenter.post(.login, User(name: name))
    print("posted \(name) to \(reached) subscribers")  // the async sequence and the forwarder
}

let greeted = await greeter.value
print("greeter finished after \(greeted)")
precondition(greeted == ["ada", "grace", "linus"])

// The loop is over, so only the forwarder is left.
print("subscribers of login: \(PostCenter.default.subscriptionCount(for: "login"))")
precondition(PostCenter.default.subscriptionCount(for: "login") == 1)

forwarding.cancel()
legacy.cancel()
let reached = PostCenter.post(.login, User(name: "nobody"))
print("after cancelling: a post reaches \(reached) subscribers")
precondition(reached == 0)
