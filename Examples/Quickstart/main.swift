import Subscriptions

final class User { let name: String; init(name: String) { self.name = name } }
extension Topic where Payload == User { static let login = Topic("login") }

let center = PostCenter()
final class Screen {
    var tokens = Set<Subscription>()
    var token: Subscription?
    init(_ c: PostCenter) {
        c.subscribe("login") { p in print("plain", p.flag, p.payload(as: User.self)?.name ?? "-") }.store(in: &tokens)
        c.subscribe(.login) { u in print("typed", u.name) }.store(in: &tokens)
        token = c.register("login", observer: self, selector: Screen.didLogin)
    }
    func didLogin(_ p: PostObject) { print("selector", p.flag) }
}
var s: Screen? = Screen(center)
let u = User(name: "ann")
print(center.post("login", PostObject(flag: "sso", data: u)))
print(center.post(.login, u))
print(center.subscriptionCount(for: "login"))
s = nil
print(center.post(.login, u), center.subscriptionCount(for: "login"))
