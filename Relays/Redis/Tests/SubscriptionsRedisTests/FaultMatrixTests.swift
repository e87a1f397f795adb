import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// Where the faults of the matrix strike, and in which mode.
struct FaultCase: Sendable, CustomTestStringConvertible {
    /// `RedisRelay.Options.historyLength`: 0 is pub/sub mode.
    let historyLength: Int
    /// Whether the sending relay A is cut off too (else only the receiving relay B is).
    let cutsSender: Bool

    var testDescription: String {
        (historyLength == 0 ? "pub/sub" : "history \(historyLength)") + (cutsSender ? ", both relays" : ", receiver")
    }

    /// Pub/sub with both relays cut off; history with the receiver cut off (a sender cut off stores
    /// nothing that could be recovered); history with both cut off.
    static let blackHoles = [
        FaultCase(historyLength: 0, cutsSender: true),
        FaultCase(historyLength: 50_000, cutsSender: false),
        FaultCase(historyLength: 50_000, cutsSender: true),
    ]
    /// A fault of the server itself reaches both relays.
    static let serverFaults = [
        FaultCase(historyLength: 0, cutsSender: true), FaultCase(historyLength: 50_000, cutsSender: true),
    ]
}

/// The fault matrix of issue 39 that the other suites leave out: a 15 s black hole both ways, a
/// 12 s frozen server (SIGSTOP) and a `CLIENT KILL` of every client, each during traffic (a round
/// of posts on two names about every millisecond), in both modes. The checks, after the traffic
/// stopped and its last round arrived (every wait bounded, nothing about time asserted):
///
/// - every post made was received, counted missed by the receiver, or dropped unnumbered by the
///   sender; each name's posts arrived in order, none twice; the relays said they were
///   disconnected and connected again;
/// - history mode: every post was received, exactly once, in order, none missed or dropped, with
///   the receiver cut off (what the fault held back is reported `.recovered`) and with the sender
///   cut off too (it keeps what it could not send, and sends again what was not answered).
@Suite("Fault matrix: a black hole, a frozen server and CLIENT KILL during traffic, in both modes")
struct FaultMatrixTests {
    @Test(arguments: FaultCase.blackHoles)
    func aFifteenSecondBlackHoleBothWaysLosesNothingUncounted(_ fault: FaultCase) async throws {
        // A server of its own: a catch-up of some 20,000 posts keeps a shared server busy, and the
        // other suites' PINGs wait behind it.
        let server = try RedisServer()
        let port = server.port
        let proxy = try LoopbackProxy(to: port)
        let direct = "redis://127.0.0.1:\(port)"
        let proxied = "redis://127.0.0.1:\(proxy.port)"
        let traffic = try Traffic(
            url: fault.cutsSender ? proxied : direct, urlOfB: proxied, topology: .standalone,
            prefix: uniquePrefix(), names: ["one", "two"], historyLength: fault.historyLength)
        let logA = EventLog(traffic.relayA)
        #expect(await traffic.ready())
        traffic.start()
        #expect(await settles { traffic.receivedCount >= 200 })

        proxy.blackHole()
        let holed = ContinuousClock.now
        let madeBefore = traffic.posts
        #expect(await settles(timeout: .seconds(30)) { traffic.logB.count(isDisconnection) >= 1 })
        try await Task.sleep(until: holed + .seconds(15), clock: .continuous)
        let madeDuring = traffic.posts - madeBefore
        proxy.resume()

        #expect(await settles(timeout: .seconds(30)) { traffic.logB.count { $0 == .connected } >= 2 })
        if fault.cutsSender {
            #expect(logA.count(isDisconnection) >= 1)
            #expect(await settles(timeout: .seconds(30)) { logA.count { $0 == .connected } >= 2 })
        }
        let receivedAfter = traffic.receivedCount
        #expect(await settles(timeout: .seconds(30)) { traffic.receivedCount >= receivedAfter + 200 })
        traffic.stop()
        traffic.post(rounds: 1)
        #expect(await settles(timeout: .seconds(30)) { traffic.lastRoundArrived() })
        print(
            "black hole 15 s (\(fault.testDescription)): made \(traffic.posts) (\(madeDuring) during), received \(traffic.receivedCount), missed \(traffic.relayB.missedPosts), recovered \(traffic.relayB.recoveredPosts), dropped \(traffic.relayA.dropCounts), events of B \(traffic.logB.values)"
        )
        traffic.expectEveryPostAccountedForInOrder()
        await expectModeChecks(traffic, fault)
        await traffic.close()
        proxy.close()
        withExtendedLifetime(server) {}
    }

    @Test(arguments: FaultCase.serverFaults)
    func aServerFrozenForTwelveSecondsLosesNothingUncounted(_ fault: FaultCase) async throws {
        let server = try RedisServer()
        let traffic = try Traffic(
            url: "redis://127.0.0.1:\(server.port)", topology: .standalone, prefix: uniquePrefix(),
            names: ["one", "two"], historyLength: fault.historyLength)
        #expect(await traffic.ready())
        traffic.start()
        #expect(await settles { traffic.receivedCount >= 200 })

        server.freeze(true)
        let frozen = ContinuousClock.now
        #expect(await settles(timeout: .seconds(30)) { traffic.logB.count(isDisconnection) >= 1 })
        try await Task.sleep(until: frozen + .seconds(12), clock: .continuous)
        server.freeze(false)

        #expect(await settles(timeout: .seconds(30)) { traffic.logB.count { $0 == .connected } >= 2 })
        let receivedAfter = traffic.receivedCount
        #expect(await settles(timeout: .seconds(30)) { traffic.receivedCount >= receivedAfter + 200 })
        traffic.stop()
        traffic.post(rounds: 1)
        #expect(await settles(timeout: .seconds(30)) { traffic.lastRoundArrived() })
        print(
            "SIGSTOP 12 s (\(fault.testDescription)): made \(traffic.posts), received \(traffic.receivedCount), missed \(traffic.relayB.missedPosts), dropped \(traffic.relayA.dropCounts)"
        )
        traffic.expectEveryPostAccountedForInOrder()
        await expectModeChecks(traffic, fault)
        await traffic.close()
    }

    @Test(arguments: FaultCase.serverFaults)
    func everyClientKilledDuringTrafficLosesNothingUncounted(_ fault: FaultCase) async throws {
        try await killEveryClientDuringTraffic(fault, pausingWrites: false)
    }

    /// History mode: what the sender sent and the server never ran is sent again. A `CLIENT PAUSE
    /// WRITE` holds the sender's commands unexecuted, and a `CLIENT KILL` of every client during the
    /// pause discards them with the connection, unanswered (the other faults above leave the
    /// server the bytes, so it runs them later and nothing depends on the resend). Every post still
    /// arrives once, in order, none missed or dropped.
    @Test func historyModeSendsAgainWhatTheServerNeverRan() async throws {
        try await killEveryClientDuringTraffic(FaultCase(historyLength: 50_000, cutsSender: true), pausingWrites: true)
    }

    /// Kills every client of the server during traffic, with `pausingWrites` inside a `CLIENT PAUSE
    /// WRITE` (300 ms of commands held unexecuted, which the kill discards), then checks that the
    /// relays reconnect, traffic flows again (and, pausing, that what was made before the kill
    /// arrived) and every post is received or counted, as `fault`'s mode promises.
    private func killEveryClientDuringTraffic(_ fault: FaultCase, pausingWrites: Bool) async throws {
        let server = try RedisServer()
        let url = "redis://127.0.0.1:\(server.port)"
        let traffic = try Traffic(
            url: url, topology: .standalone, prefix: uniquePrefix(), names: ["one", "two"],
            historyLength: fault.historyLength)
        #expect(await traffic.ready())
        traffic.start()
        #expect(await settles { traffic.receivedCount >= 200 })

        if pausingWrites {
            _ = try redisCommand(url, ["CLIENT", "PAUSE", "2000", "WRITE"])
            try await Task.sleep(for: .milliseconds(300))
        }
        let madeBeforeTheKill = traffic.posts
        for type in ["pubsub", "normal"] {
            _ = try redisCommand(url, ["CLIENT", "KILL", "TYPE", type, "SKIPME", "yes"])
        }
        if pausingWrites { _ = try redisCommand(url, ["CLIENT", "UNPAUSE"]) }
        #expect(await settles(timeout: .seconds(30)) { traffic.logB.count { $0 == .connected } >= 2 })
        let floor = max(traffic.receivedCount, pausingWrites ? madeBeforeTheKill : 0)
        #expect(await settles(timeout: .seconds(30)) { traffic.receivedCount >= floor + 200 })
        traffic.stop()
        traffic.post(rounds: 1)
        #expect(await settles(timeout: .seconds(30)) { traffic.lastRoundArrived() })
        print(
            "CLIENT \(pausingWrites ? "PAUSE + KILL" : "KILL") (\(fault.testDescription)): made \(traffic.posts) (\(madeBeforeTheKill) before the kill), received \(traffic.receivedCount), missed \(traffic.relayB.missedPosts), dropped \(traffic.relayA.dropCounts)"
        )
        #expect(traffic.logB.count(isDisconnection) >= 1)
        traffic.expectEveryPostAccountedForInOrder()
        await expectModeChecks(traffic, fault)
        await traffic.close()
    }

    /// The output-buffer limit that throws a stalled pub/sub subscriber out (LossTests,
    /// TailLossTests), in history mode: a history reader holds at most one reply, so a stalled reader
    /// is not thrown out, and what was posted meanwhile is read when it resumes, once each, in order.
    /// Under a `normal` limit below one read's reply (Redis's default is none) the reader is thrown
    /// out when the server's buffer outgrows the limit before it drains it; it then asks for half
    /// as many entries per read at each loss (`_HistoryReadCap`), so it is thrown out a few times at
    /// most (256 entries halve to 1 in 8), then reads everything, once each, in order, missing
    /// nothing.
    @Test(arguments: ["pubsub 1mb 512kb 1", "normal 1mb 512kb 1"])
    func anOutputBufferLimitCostsAStalledHistoryReaderNothing(_ limit: String) async throws {
        let server = try RedisServer(arguments: ["--client-output-buffer-limit", limit])
        let pair = try HistoryPair(port: server.port)
        let log = EventLog(pair.relayB)
        #expect(pair.waitUntilReady())
        pair.relayB._pauseReading(true)
        let text = String(repeating: "x", count: 1000)
        let total = 20_000
        for seq in 0..<total { pair.a.post(.chat, Message(seq: seq, text: text)) }
        #expect(await settles { pair.relayA.publishedPosts + pair.relayA.droppedPosts == total })
        #expect(pair.relayA.droppedPosts == 0)
        pair.relayB._pauseReading(false)
        // Bounded: everything received, or the reader thrown out more often than halving allows.
        _ = await settles(timeout: .seconds(30)) {
            pair.received.count >= total || log.count(isDisconnection) > 9
        }
        print(
            "output-buffer limit \(limit), history: made \(total), received \(pair.received.count), missed \(pair.relayB.missedPosts), disconnections of B \(log.count(isDisconnection))"
        )
        #expect(pair.received.values == Array(0..<total))
        #expect(pair.relayB.missedPosts == 0)
        if limit.hasPrefix("normal") {
            // Thrown out as often as the server's buffer outgrows the limit before the reader drains
            // it (none at all when the reader keeps up): at most the halvings from 256 to 1, and one.
            #expect(log.count(isDisconnection) <= 9, "\(log.values.prefix(12))")
        } else {
            #expect(log.count(isDisconnection) == 0, "\(log.values.prefix(5))")
        }
        withExtendedLifetime(pair) {}
    }

    /// History mode's promise on top of the accounting: nothing is missed or dropped, every post
    /// arrives once and in order, also when the sender was cut off (it kept what it could not send);
    /// with only the receiver cut off, what the fault held back is reported recovered.
    private func expectModeChecks(
        _ traffic: Traffic, _ fault: FaultCase, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let relayB = traffic.relayB
        guard fault.historyLength > 0 else { return }
        let rounds = traffic.posts / traffic.names.count
        #expect(
            traffic.receivedPerName == Dictionary(uniqueKeysWithValues: traffic.names.map { ($0, Array(0..<rounds)) }),
            "missed \(relayB.missedPosts), dropped \(traffic.relayA.dropCounts)", sourceLocation: sourceLocation)
        #expect(
            relayB.missedPosts == 0 && traffic.relayA.droppedPosts == 0,
            "missed \(relayB.missedPosts), dropped \(traffic.relayA.dropCounts)", sourceLocation: sourceLocation)
        if !fault.cutsSender {
            // `.recovered(count:)` follows the catch-up's last delivery: wait for it (bounded).
            let reported = {
                traffic.logB.values.reduce(0) { if case .recovered(let count) = $1 { $0 + count } else { $0 } }
            }
            #expect(relayB.recoveredPosts > 0, sourceLocation: sourceLocation)
            #expect(
                await settles(timeout: .seconds(30)) { reported() == relayB.recoveredPosts },
                "reported \(reported()), recoveredPosts \(relayB.recoveredPosts)", sourceLocation: sourceLocation)
        }
    }
}

private func isDisconnection(_ event: RedisRelay.Event) -> Bool {
    if case .disconnected = event { true } else { false }
}
