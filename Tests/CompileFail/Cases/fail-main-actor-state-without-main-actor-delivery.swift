// expect: main actor-isolated
// A handler that touches main-actor state needs delivery: .mainActor.
import Subscriptions

@MainActor final class Screen {
    var title = ""
    var token: Subscription?
    func start(_ center: PostCenter) {
        token = center.subscribe("login") { [weak self] post in self?.title = post.flag }
    }
}
