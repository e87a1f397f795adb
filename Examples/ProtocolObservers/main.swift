// Protocol-keyed observers: "posting" is calling a protocol method on every registered observer,
// and the compiler checks the method's name and arguments.
//
// Run with `swift run ProtocolObservers`.
import Subscriptions

struct User {
    let name: String
}

/// The notification protocol. `userDidChangeAvatar` has a default implementation below, which
/// makes it optional: observers that do not care about avatars simply do not implement it.
protocol UserObserver: AnyObject {
    func userDidLogin(_ user: User)
    func userDidLogout()
    func userDidChangeAvatar(_ user: User)
}

extension UserObserver {
    func userDidChangeAvatar(_ user: User) {}
}

/// Registers itself and never unregisters: the center holds it weakly.
final class MenuBar: UserObserver {
    init(center: PostCenter) {
        center.addObserver(self, for: UserObserver.self)
    }
    func userDidLogin(_ user: User) { print("  menu bar: shows \(user.name)") }
    func userDidLogout() { print("  menu bar: shows 'Sign in'") }
    func userDidChangeAvatar(_ user: User) { print("  menu bar: reloads \(user.name)'s avatar") }
}

/// Does not implement the optional avatar method. Uses the token form.
final class ProfileScreen: UserObserver {
    let title: String
    var token: Subscription?
    init(_ title: String, center: PostCenter) {
        self.title = title
        token = center.observe(self, for: UserObserver.self)
    }
    deinit { print("  (\(title) closed)") }
    func userDidLogin(_ user: User) { print("  \(title): welcome, \(user.name)") }
    func userDidLogout() { print("  \(title): goodbye") }
}

let center = PostCenter()
let ann = User(name: "Ann")

let menu = MenuBar(center: center)
var profile: ProfileScreen? = ProfileScreen("profile screen", center: center)

print("login:")
var called = center.notify(UserObserver.self) { $0.userDidLogin(ann) }
print("  -> \(called) observers")

print("avatar change (only the menu bar implements it):")
called = center.notify(UserObserver.self) { $0.userDidChangeAvatar(ann) }
print("  -> \(called) observers, the profile screen ran the empty default")

print("the profile screen goes away:")
profile = nil

print("logout:")
called = center.notify(UserObserver.self) { $0.userDidLogout() }
print("  -> \(called) observer")

center.removeObserver(menu)
print("after removing the menu bar, notify reaches \(center.notify(UserObserver.self) { $0.userDidLogout() })")
