import Foundation
import Testing

@testable import Subscriptions

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Guarantee 4: a post made inside a handler is delivered at once, depth-first; posts nest at most
/// `maximumNestingDepth` deep on a thread, and a post beyond that stops with a message.
@Suite("Guarantee 4: a post inside a handler is delivered at once, depth-first")
struct Guarantee04DepthFirst {
    @Test(.tags(.pin)) func postInsideHandlerIsDeliveredDepthFirst() {
        let center = PostCenter()
        let seen = Recorder<String>()
        var tokens = Set<Subscription>()
        center.subscribe("x") { _ in
            seen.append("x1")
            center.post("y")
        }.store(in: &tokens)
        center.subscribe("x") { _ in seen.append("x2") }.store(in: &tokens)
        center.subscribe("y") { _ in
            seen.append("y1")
            center.post("z")
        }.store(in: &tokens)
        center.subscribe("y") { _ in seen.append("y2") }.store(in: &tokens)
        center.subscribe("z") { _ in seen.append("z1") }.store(in: &tokens)
        center.subscribe("z") { _ in seen.append("z2") }.store(in: &tokens)
        #expect(center.post("x") == 2)
        #expect(seen.values == ["x1", "y1", "z1", "z2", "y2", "x2"])
    }

    @Test(.tags(.pin)) func postOfTheSameNameInsideHandlerIsDeliveredDepthFirst() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let inner = Recorder<Int>()
        let first = center.subscribe("x") { post in
            seen.append("a:\(post.flag)")
            if post.flag == "outer" { inner.append(center.post("x", flag: "inner")) }
        }
        let second = center.subscribe("x") { post in seen.append("b:\(post.flag)") }
        #expect(center.post("x", flag: "outer") == 2)
        #expect(seen.values == ["a:outer", "a:inner", "b:inner", "b:outer"])
        #expect(inner.values == [2])
        withExtendedLifetime((first, second)) {}
    }

    @Test(.tags(.pin)) func typedPostInsideHandlerIsDeliveredDepthFirst() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let depth = Topic<Int>("depth")
        let first = center.subscribe(depth) { n in
            seen.append("a\(n)")
            if n < 3 { center.post(depth, n + 1) }
        }
        let second = center.subscribe(depth) { n in seen.append("b\(n)") }
        center.post(depth, 0)
        #expect(seen.values == ["a0", "a1", "a2", "a3", "b3", "b2", "b1", "b0"])
        withExtendedLifetime((first, second)) {}
    }

    @Test(.tags(.pin)) func deeplyNestedPostsOfTheSameNameAreDeliveredDepthFirst() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let depth = 60
        let first = center.subscribe(Topic<Int>("deep")) { n in
            seen.append("a\(n)")
            if n < depth { center.post(Topic<Int>("deep"), n + 1) }
        }
        let second = center.subscribe("deep") { post in seen.append("b\(post.payload(as: Int.self) ?? -1)") }
        #expect(center.post(Topic<Int>("deep"), 0) == 2)
        let expected = (0...depth).map { "a\($0)" } + (0...depth).reversed().map { "b\($0)" }
        #expect(seen.values == expected)
        withExtendedLifetime((first, second)) {}
    }
}
