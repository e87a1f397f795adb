import Dispatch
import Foundation
import Synchronization
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

    // MARK: Guarantee 4: runaway nesting stops with a message

    /// A handler that re-posts its own name without end stops the process with a message that
    /// names the post and the depth, one past `maximumNestingDepth`, instead of overflowing the
    /// stack later with no message.
    @Test(.tags(.mutantPin)) func runawayRecursivePostStopsWithAMessageNamingThePostAndTheDepth() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let center = PostCenter()
            let token = center.subscribe("pin.loop") { _ in center.post("pin.loop") }
            center.post("pin.loop")
            withExtendedLifetime(token) {}
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        let expected =
            "a post of \"pin.loop\" started while \(PostCenter.maximumNestingDepth) posts were in progress on one "
            + "thread: a loop of posts"
        #expect(message.contains(expected), "the stop message does not say \(expected)")
    }

    // MARK: The nesting limit counts posts, not queued calls

    /// A loop of posts through three names stops with a message naming the name and saying it
    /// is a loop, well before the stack of a secondary thread could overflow.
    @Test(.tags(.pin)) func postLoopThroughThreeNamesStopsWithAMessage() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let center = PostCenter()
            let a = center.subscribe("loop.a") { _ in center.post("loop.b") }
            let b = center.subscribe("loop.b") { _ in center.post("loop.c") }
            let c = center.subscribe("loop.c") { _ in center.post("loop.a") }
            // On a thread with the 512 KB stack of secondary threads on Apple platforms.
            let thread = Thread { center.post("loop.a") }
            thread.stackSize = 512 * 1024
            thread.start()
            while true { sleep(1) }
            withExtendedLifetime((a, b, c)) {}
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("a loop of posts"), "the stop message does not say it is a loop of posts")
        #expect(
            message.contains("while \(PostCenter.maximumNestingDepth) posts were in progress"),
            "the stop message does not give the depth")
        #expect(message.contains("\"loop."), "the stop message does not name the name")
    }

    /// A queued handler runs outside any post: when it posts its own name, that post is the only
    /// one in progress on its thread (depth 1), not a nested one.
    @Test(.tags(.pin)) func queuedHandlerPostingItsOwnNameIsNotNested() {
        let center = PostCenter()
        let reports = Mutex<[PostCenter.Diagnostic]>([])
        center.diagnostics = .init(nestingLimit: 2) { issue in reports.withLock { $0.append(issue) } }
        let queue = makeSerialQueue("engine.queued-repost")
        let calls = Counter()
        let token = center.subscribe("requeue", delivery: .queue(queue)) { post in
            calls.increment()
            if post.flag == "first" { center.post("requeue", flag: "again") }
        }
        center.post("requeue", flag: "first")
        queue.sync {}
        queue.sync {}
        #expect(calls.count == 2)
        #expect(reports.withLock { $0 }.isEmpty, "a queued handler's post was reported as nested")
        withExtendedLifetime(token) {}
    }
}
