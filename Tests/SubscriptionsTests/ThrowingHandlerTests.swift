import Dispatch
import Foundation
import Subscriptions
import Synchronization
import Testing

/// The error the handlers below throw.
private struct Refused: Error, Equatable {
    let code: Int
}

/// An observer whose method throws (selector-style registrations).
private final class Refuser: Sendable {
    func handle(_ post: PostObject) throws { throw Refused(code: 7) }
}

/// An actor whose handlers throw.
private actor RefusingActor {
    var calls = 0
    func note() { calls += 1 }
}

/// The diagnostics a center reported, in order, and a log the handlers write to.
private final class Journal: @unchecked Sendable {
    // @unchecked: both arrays are only touched while holding `lock`. `NSLock` rather than
    // `Synchronization.Mutex`, as in `Recorder`: queued and actor handlers report from other
    // threads, and on Linux ThreadSanitizer does not see a Mutex's futex-based locking.
    private let lock = NSLock()
    private var reports: [PostCenter.Diagnostic] = []
    private var log: [String] = []

    func attach(to center: PostCenter) {
        center.diagnostics = .init { [self] issue in
            lock.withLock {
                if case .handlerThrew(let name, let site, let error) = issue {
                    log.append("threw:\(name):\(site.line):\(error)")
                }
                reports.append(issue)
            }
        }
    }

    func append(_ line: String) { lock.withLock { log.append(line) } }
    var lines: [String] { lock.withLock { log } }
    var thrown: [PostCenter.Diagnostic] {
        lock.withLock { reports.filter { if case .handlerThrew = $0 { true } else { false } } }
    }
}

private func site(_ line: Int) -> SubscriptionSite {
    SubscriptionSite(fileID: "App/Throwing.swift", line: line, count: 1)
}

@Suite("Throwing handlers")
struct ThrowingHandlerTests {
    /// A thrown error does not stop the post: the next handler runs, the error is reported through
    /// `diagnostics` before it, and the handler that threw counts as run in `post`'s result.
    @Test(.tags(.pin)) func aThrownErrorIsReportedAndTheNextHandlerRuns() throws {
        let center = PostCenter()
        let journal = Journal()
        journal.attach(to: center)
        let file = "App/Throwing.swift"
        let typed = Topic<Int>("count")
        let a = center.subscribe(typed, fileID: file, line: 1) { value in journal.append("a:\(value)") }
        let b = center.subscribe(typed, fileID: file, line: 2) { value in
            journal.append("b:\(value)")
            throw Refused(code: value)
        }
        let c = center.subscribe("count", fileID: file, line: 3) { post in
            journal.append("c")
            throw Refused(code: 3)
        }
        let d = center.subscribe(typed, fileID: file, line: 4) { value in journal.append("d:\(value)") }

        #expect(center.post(typed, 5) == 4)
        #expect(
            journal.lines == [
                "a:5", "b:5", "threw:count:2:Refused(code: 5)", "c", "threw:count:3:Refused(code: 3)", "d:5",
            ])
        #expect(
            journal.thrown == [
                .handlerThrew(name: "count", site: site(2), error: Refused(code: 5)),
                .handlerThrew(name: "count", site: site(3), error: Refused(code: 3)),
            ])
        // A plain post reaches the plain handler directly and the typed ones (the number reads as
        // an `Int`) through `deliver`: the same reports, in the same order.
        #expect(center.post("count", data: 6 as NSNumber) == 4)
        let later = journal.thrown.dropFirst(2).compactMap { report -> Int? in
            guard case .handlerThrew("count", let site, _) = report else { return nil }
            return site.line
        }
        #expect(later == [2, 3])
        withExtendedLifetime((a, b, c, d)) {}
    }

    /// Every option of an immediate subscription reports the same way: `from:`, `once:`,
    /// `replay:` (the replayed post too), and a selector-style registration.
    @Test(.tags(.pin)) func immediateSubscriptionsWithOptionsReportWhatTheyThrow() throws {
        let center = PostCenter()
        let journal = Journal()
        journal.attach(to: center)
        let sender = NSObject()
        let refuser = Refuser()
        let file = "App/Throwing.swift"
        center.post("opt", flag: "kept", retain: true)
        let filtered = center.subscribe("opt", from: sender, fileID: file, line: 10) { _ in throw Refused(code: 10) }
        let once = center.subscribe("opt", once: true, fileID: file, line: 11) { _ in throw Refused(code: 11) }
        let replayed = center.subscribe("opt", replay: true, fileID: file, line: 12) { post in
            throw Refused(code: post.flag == "kept" ? 120 : 12)
        }
        let registered = center.register(
            "opt", observer: refuser, fileID: file, line: 13, selector: Refuser.handle)

        #expect(center.post("opt", flag: "live", from: sender) == 4)
        let lines = journal.thrown.compactMap { report -> String? in
            guard case .handlerThrew(_, let site, let error) = report else { return nil }
            return "\(site.line):\(error)"
        }
        // The replayed post is reported inside `subscribe`, before the live post.
        #expect(
            lines == [
                "12:Refused(code: 120)", "10:Refused(code: 10)", "11:Refused(code: 11)", "12:Refused(code: 12)",
                "13:Refused(code: 7)",
            ])
        withExtendedLifetime((filtered, once, replayed, registered, refuser)) {}
    }

    /// Queued, paced, actor and coalesced actor deliveries report the same way, where the handler
    /// ran; the post counts them as scheduled.
    @Test(.tags(.pin)) func queuedPacedAndActorDeliveriesReportWhatTheyThrow() async throws {
        let center = PostCenter()
        let journal = Journal()
        journal.attach(to: center)
        let queue = DispatchQueue(label: "throwing")
        let actor = RefusingActor()
        let file = "App/Throwing.swift"
        let topic = Topic<Int>("later")
        let queued = center.subscribe(topic, delivery: .queue(queue), fileID: file, line: 20) { value in
            throw Refused(code: 20 + value)
        }
        let paced = center.subscribe(topic, delivery: .queue(queue).coalesced, fileID: file, line: 21) { value in
            throw Refused(code: 21 + value)
        }
        let onActor = center.subscribe(topic, on: actor, fileID: file, line: 22) { actor, value in
            actor.note()
            throw Refused(code: 22 + value)
        }
        let coalesced = center.subscribe(topic, on: actor, coalesced: true, fileID: file, line: 23) { actor, value in
            actor.note()
            throw Refused(code: 23 + value)
        }
        #expect(center.post(topic, 100) == 4)
        await center.waitForPendingDeliveries()
        let lines = journal.thrown.compactMap { report -> String? in
            guard case .handlerThrew("later", let site, let error as Refused) = report else { return nil }
            return "\(site.line):\(error.code)"
        }
        #expect(lines.sorted() == ["20:120", "21:121", "22:122", "23:123"])
        #expect(await actor.calls == 2)
        withExtendedLifetime((queued, paced, onActor, coalesced)) {}
    }

    /// Main-actor handlers report what they throw both when called in place (a post on the main
    /// actor) and when delivered later through the main queue.
    @Test(.tags(.pin)) @MainActor func mainActorHandlersReportWhatTheyThrow() async throws {
        let center = PostCenter()
        let journal = Journal()
        journal.attach(to: center)
        let file = "App/Throwing.swift"
        let plain = center.subscribe("main", delivery: .mainActor, fileID: file, line: 30) { post in
            throw Refused(code: post.flag == "here" ? 30 : 31)
        }
        let typed = center.subscribe(Topic<String>("main"), delivery: .mainActor, fileID: file, line: 32) { value in
            throw Refused(code: value == "typed" ? 32 : 33)
        }
        #expect(center.post("main", flag: "here") == 1)  // the typed one takes no envelope without data
        #expect(center.post(Topic<String>("main"), "typed") == 2)
        let away = await Task.detached { center.post("main", flag: "away") }.value
        #expect(away == 1)
        await center.waitForPendingDeliveries()
        let lines = journal.thrown.compactMap { report -> String? in
            guard case .handlerThrew("main", let site, let error as Refused) = report else { return nil }
            return "\(site.line):\(error.code)"
        }
        #expect(lines == ["30:30", "30:31", "32:32", "30:31"])
        withExtendedLifetime((plain, typed)) {}
    }

    /// A handler that never throws still compiles unchanged, with no `try` anywhere: the closure
    /// types are `throws`, with no extra overload.
    @Test(.tags(.pin)) func aHandlerThatDoesNotThrowCompilesUnchanged() {
        let center = PostCenter()
        let seen = Mutex(0)
        let token = center.subscribe("quiet") { _ in seen.withLock { $0 += 1 } }
        #expect(center.post("quiet") == 1)
        #expect(seen.withLock { $0 } == 1)
        withExtendedLifetime(token) {}
    }

    /// The description names the name, the call site and the error; two reports are equal when
    /// their errors have the same type and description.
    @Test(.tags(.pin)) func theDiagnosticDescribesTheThrowAndComparesErrorsByTypeAndDescription() {
        let report = PostCenter.Diagnostic.handlerThrew(name: "save", site: site(40), error: Refused(code: 1))
        #expect(
            report.description
                == "Subscriptions: a handler of \"save\" (subscribed at App/Throwing.swift:40) threw "
                + "Refused(code: 1); the post went on with the next handler.")
        #expect(report == .handlerThrew(name: "save", site: site(40), error: Refused(code: 1)))
        #expect(report != .handlerThrew(name: "save", site: site(40), error: Refused(code: 2)))
        #expect(report != .handlerThrew(name: "save", site: site(41), error: Refused(code: 1)))
        #expect(report != .handlerThrew(name: "saved", site: site(40), error: Refused(code: 1)))
        #expect(report != .handlerThrew(name: "save", site: site(40), error: CancellationError()))
        #expect(report != .unheardPost(name: "save"))
    }

    #if os(Linux) || os(macOS)
        /// With no diagnostics set, a throw is printed to standard error, once per call site: two
        /// throws of one site print one line, a second site prints its own. Child process: the set
        /// of printed sites is process-wide.
        @Test(.tags(.pin)) func withNoDiagnosticsAThrowIsPrintedOncePerCallSite() async {
            let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
                let center = PostCenter()
                let file = "App/Printed.swift"
                let a = center.subscribe("printed", fileID: file, line: 1) { _ in throw Refused(code: 1) }
                let b = center.subscribe("printed", fileID: file, line: 2) { _ in throw Refused(code: 2) }
                let posted = center.post("printed") + center.post("printed") + center.post("printed")
                withExtendedLifetime((a, b)) {}
                exit(posted == 6 ? 0 : 1)
            }
            let printed = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
            let lines = printed.split(separator: "\n").filter { $0.hasPrefix("Subscriptions:") }
            let advice = " the post went on with the next handler. Set PostCenter.diagnostics to handle "
            let advice2 = ".handlerThrew, or catch the error in the handler."
            let first =
                "Subscriptions: a handler of \"printed\" (subscribed at App/Printed.swift:1) threw Refused(code: 1);"
            let second =
                "Subscriptions: a handler of \"printed\" (subscribed at App/Printed.swift:2) threw Refused(code: 2);"
            let expected: [Substring] = [Substring(first + advice + advice2), Substring(second + advice + advice2)]
            #expect(lines == expected, "the child process printed: \(printed)")
        }
    #endif
}
