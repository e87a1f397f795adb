// Quickstart: owners hold tokens, posts reach them, and an owner going away ends its subscriptions.
import Subscriptions

final class User: Sendable {
    let name: String
    init(name: String) { self.name = name }
}

extension Topic where Payload == User {
    /// A typed name: posting anything but a `User` to it does not compile.
    static let login = Topic("login")
}

extension Topic where Payload == Int {
    /// The battery level in percent: a state that screens opened later need too.
    static let battery = Topic("battery")
}

/// A screen that cares about logins for as long as it exists.
final class ProfileScreen {
    let title: String
    private var tokens = Set<Subscription>()

    init(title: String, center: PostCenter) {
        self.title = title
        // Typed topic: the handler receives a `User`.
        center.subscribe(.login) { [title] user in
            print("  [\(title)] welcome, \(user.name)")
        }.store(in: &tokens)
        // Plain name: the handler receives the envelope.
        center.subscribe("login") { [title] post in
            print("  [\(title)] login via \(post.flag.isEmpty ? "password" : post.flag)")
        }.store(in: &tokens)
        // Selector style: the center holds `self` weakly and calls the method on it.
        center.register("logout", observer: self, selector: ProfileScreen.didLogout).store(in: &tokens)
    }

    func didLogout(_ post: PostObject) {
        print("  [\(title)] goodbye, \(post.payload(as: User.self)?.name ?? "someone")")
    }

    deinit { print("  [\(title)] closed: its \(tokens.count) subscriptions end with it") }
}

let center = PostCenter()
let ada = User(name: "Ada")

print("1. Two screens are open.")
var home: ProfileScreen? = ProfileScreen(title: "home", center: center)
let settings = ProfileScreen(title: "settings", center: center)
print("   subscriptions of \"login\": \(center.subscriptionCount(for: "login"))")
print("   made at: \(center.subscriptionSites(for: "login"))")  // each line of code, busiest first

print("2. A typed post reaches typed and plain subscribers, in subscription order.")
var reached = center.post(.login, ada)
print("   post(.login) reached \(reached) handlers")

print("3. A plain post with an envelope: a flag and weakly held data.")
reached = center.post("login", PostObject(flag: "sso", data: ada))
print("   post(\"login\") reached \(reached) handlers")

print("4. The home screen goes away; its tokens go with it.")
home = nil
print("   subscriptions of \"login\": \(center.subscriptionCount(for: "login"))")

print("5. Later posts reach only the screen that is still open.")
reached = center.post("logout", data: ada)
print("   post(\"logout\") reached \(reached) handler")

print("6. A retained post is kept for subscribers that come later.")
center.post(.battery, 80, retain: true)
let gauge = center.subscribe(.battery, replay: true) { level in print("  [gauge] battery \(level)%") }
center.post(.battery, 79, retain: true)
print("   retained now: \(center.retained(.battery) ?? 0)%")
withExtendedLifetime((settings, gauge)) {}
