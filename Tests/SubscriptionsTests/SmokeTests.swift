import Foundation
import Testing
import Subscriptions

@Suite struct SmokeTests {
    @Test func postReachesSubscriber() {
        let center = PostCenter()
        let seen = Box()
        let token = center.subscribe("x") { post in seen.append(post.flag) }
        #expect(center.post("x", flag: "a") == 1)
        #expect(seen.values == ["a"])
        withExtendedLifetime(token) {}
    }
}

final class Box: @unchecked Sendable {
    private var lock = pthread_mutex_t()
    private var _values: [String] = []
    init() { pthread_mutex_init(&lock, nil) }
    func append(_ s: String) { pthread_mutex_lock(&lock); _values.append(s); pthread_mutex_unlock(&lock) }
    var values: [String] { pthread_mutex_lock(&lock); defer { pthread_mutex_unlock(&lock) }; return _values }
}
