import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// Options of a relay in history mode, with fast reconnection.
func historyOptions(_ length: Int = 10_000) -> RedisRelay.Options {
    var options = fastOptions
    options.historyLength = length
    return options
}

/// Two relays in history mode on one server, both relaying `.chat`; B's center collects the seq
/// numbers it receives.
struct HistoryPair {
    let a = PostCenter()
    let b = PostCenter()
    let relayA: RedisRelay
    let relayB: RedisRelay
    let received = Collector<Int>()
    let tokens: [Subscription]
    /// The server's ids of B's two connections (on a server of the test's own).
    let connectionsOfB: Set<String>

    init(port: Int, prefix: String = uniquePrefix(), options: RedisRelay.Options = historyOptions()) throws {
        relayA = try RedisRelay(center: a, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options)
        let before = try clientIDs(port)
        relayB = try RedisRelay(center: b, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options)
        connectionsOfB = try clientIDs(port).subtracting(before)
        let received = self.received
        tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
    }

    func waitUntilReady() -> Bool {
        relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10))
    }

    /// Posts `seqs` on A, each its own history entry (the next waits until the server acknowledged
    /// the one before); whether every one was acknowledged.
    func postOneByOne(_ seqs: Range<Int>) -> Bool {
        for seq in seqs {
            let published = relayA.publishedPosts
            a.post(.chat, Message(seq: seq, text: "entry"))
            guard eventually(timeout: .seconds(10), { relayA.publishedPosts == published + 1 }) else { return false }
        }
        return true
    }

    /// Stops B's reading and has the server close B's connections (CLIENT KILL): B is away until
    /// its reading resumes, while A goes on.
    func sendBAway(_ port: Int) throws {
        relayB._pauseReading(true)
        #expect(connectionsOfB.count == 2)
        for id in connectionsOfB { try redisCommand("redis://127.0.0.1:\(port)", ["CLIENT", "KILL", "ID", id]) }
    }
}

/// The ids of the server's client connections, but the one asking.
func clientIDs(_ port: Int) throws -> Set<String> {
    let list = try redisCommand("redis://127.0.0.1:\(port)", ["CLIENT", "LIST"])
    return Set(
        list.split(separator: "\n").filter { !$0.contains(" cmd=client") }.compactMap { line in
            line.split(separator: " ").first { $0.hasPrefix("id=") }.map { String($0.dropFirst(3)) }
        })
}

@Suite("Recovery from history: a relay that was away receives what it missed, once, in order")
struct RecoveryTests {
    @Test func historyModeRelaysInOrderExactly() throws {
        let pair = try HistoryPair(port: RedisServer.shared)
        #expect(pair.waitUntilReady())
        for seq in 0..<2000 { pair.a.post(.chat, Message(seq: seq, text: "live")) }
        #expect(eventually { pair.received.count >= 2000 })
        #expect(pair.received.values == Array(0..<2000))
        #expect(pair.relayB.missedPosts == 0 && pair.relayB.recoveredPosts == 0)
        #expect(pair.relayA.droppedPosts == 0 && pair.relayB.rejectedMessages == 0)
        withExtendedLifetime(pair) {}
    }

    @Test func theStreamIsCappedAndWhatTheCapCostsIsCountedMissed() throws {
        let port = RedisServer.shared
        let prefix = uniquePrefix()
        let pair = try HistoryPair(port: port, prefix: prefix, options: historyOptions(10))
        #expect(pair.waitUntilReady())
        #expect(pair.postOneByOne(0..<300))
        #expect(eventually { pair.received.count + pair.relayB.missedPosts >= 300 })
        // XADD … MAXLEN ~ 10: whole nodes of entries are trimmed, so about 10 to 110 remain. A reader
        // more than the history behind (a busy machine) loses the oldest, counted.
        let length = try #require(Int(try redisCommand("redis://127.0.0.1:\(port)", ["XLEN", prefix + "chat"])))
        #expect(length >= 10 && length < 300, "\(length)")
        let values = pair.received.values
        #expect(values == values.sorted() && values.last == 299, "\(values)")
        #expect(values.count + pair.relayB.missedPosts == 300)
        #expect(pair.relayA.droppedPosts == 0 && pair.relayB.rejectedMessages == 0)
        withExtendedLifetime(pair) {}
    }

    @Test func aDisconnectedRelayRecoversEveryPostItMissedOnceInOrder() async throws {
        let server = try RedisServer()
        let pair = try HistoryPair(port: server.port)
        var events = EventReader(pair.relayB)
        #expect(await events.next() == .connected)
        #expect(pair.waitUntilReady())
        for seq in 0..<100 { pair.a.post(.chat, Message(seq: seq, text: "before")) }
        #expect(eventually { pair.received.count == 100 })

        try pair.sendBAway(server.port)
        #expect(pair.relayA.waitUntilReady(timeout: .seconds(10)))
        for seq in 100..<600 { pair.a.post(.chat, Message(seq: seq, text: "while away")) }
        #expect(eventually { pair.relayA.publishedPosts == 600 })
        pair.relayB._pauseReading(false)

        let seen = await events.read { if case .recovered = $0 { true } else { false } }
        #expect(seen.last == .recovered(count: 500), "\(seen)")
        #expect(eventually { pair.received.count >= 600 })
        #expect(pair.received.values == Array(0..<600))
        #expect(pair.relayB.recoveredPosts == 500)
        #expect(pair.relayB.missedPosts == 0)
        #expect(pair.relayA.droppedPosts == 0)
        withExtendedLifetime(pair) {}
    }

    /// History mode's sending side: posts made while the sender's server is down wait in its queue
    /// and are sent when it is back; nothing is dropped, lost or delivered twice.
    @Test func aSenderKeepsThePostsMadeWhileItsServerIsDownAndSendsThemWhenItIsBack() async throws {
        let server = try RedisServer()
        let pair = try HistoryPair(port: server.port)
        var eventsOfA = EventReader(pair.relayA)
        #expect(await eventsOfA.next() == .connected)
        #expect(pair.waitUntilReady())
        for seq in 0..<100 { pair.a.post(.chat, Message(seq: seq, text: "before")) }
        #expect(eventually { pair.received.count == 100 })

        server.stop()  // kill -9
        // Posts made before A notices are in flight, unanswered: sent again. Those after wait.
        for seq in 100..<150 { pair.a.post(.chat, Message(seq: seq, text: "unanswered")) }
        let lost = await eventsOfA.next()
        guard case .disconnected = lost else {
            Issue.record("A was not disconnected: \(String(describing: lost))")
            return
        }
        for seq in 150..<400 { pair.a.post(.chat, Message(seq: seq, text: "while down")) }
        #expect(pair.relayA.droppedPosts == 0 && pair.relayA.publishedPosts == 100)
        try server.start()
        #expect(await eventsOfA.next() == .connected)
        #expect(pair.waitUntilReady())
        for seq in 400..<450 { pair.a.post(.chat, Message(seq: seq, text: "after")) }

        #expect(eventually { pair.received.count >= 450 })
        #expect(pair.received.values == Array(0..<450))
        #expect(pair.relayB.missedPosts == 0)
        #expect(eventually { pair.relayA.publishedPosts == 450 })
        #expect(pair.relayA.droppedPosts == 0)
        withExtendedLifetime(pair) {}
    }

    /// History mode: what waits while the server is down is bounded by the queue's limits (the rest
    /// dropped as `queueFull`), and `close()` drops what still waits then (as `disconnected`).
    @Test func aSendersQueueWhileItsServerIsDownIsBoundedAndCloseDropsWhatStillWaits() async throws {
        let server = try RedisServer()
        var options = historyOptions()
        options.maxQueuedPosts = 40
        options.closeTimeout = .milliseconds(200)
        let center = PostCenter()
        let relay = try RedisRelay(
            center: center, host: "127.0.0.1", port: server.port, channelPrefix: uniquePrefix(), options: options)
        var events = EventReader(relay)
        let token = relay.relay(.chat)
        #expect(await events.next() == .connected)
        #expect(relay.waitUntilReady(timeout: .seconds(10)))
        server.stop()
        let lost = await events.next()
        guard case .disconnected = lost else {
            Issue.record("not disconnected: \(String(describing: lost))")
            return
        }
        for seq in 1...100 { center.post(.chat, Message(seq: seq, text: "while down")) }
        var expected = RedisRelay.DropCounts()
        expected.queueFull = 60
        #expect(relay.dropCounts == expected)
        await relay.close()
        expected.disconnected = 40
        #expect(relay.dropCounts == expected)
        #expect(relay.publishedPosts == 0)
        withExtendedLifetime(token) {}
    }

    @Test func aServerRestartedWithAppendOnlyLosesNothingThatWasAcknowledged() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-aof-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try RedisServer(arguments: ["--appendonly", "yes", "--appendfsync", "always", "--dir", directory])
        let pair = try HistoryPair(port: server.port)
        #expect(pair.waitUntilReady())
        for seq in 0..<100 { pair.a.post(.chat, Message(seq: seq, text: "before")) }
        #expect(eventually { pair.received.count == 100 })

        // Away first (an XREAD in flight would be answered with the first post before the kill).
        try pair.sendBAway(server.port)
        #expect(pair.relayA.waitUntilReady(timeout: .seconds(10)))
        for seq in 100..<400 { pair.a.post(.chat, Message(seq: seq, text: "unread when killed")) }
        #expect(eventually { pair.relayA.publishedPosts == 400 })
        server.stop()  // kill -9
        try server.start()
        pair.relayB._pauseReading(false)
        #expect(pair.waitUntilReady())
        for seq in 400..<500 { pair.a.post(.chat, Message(seq: seq, text: "after")) }

        #expect(eventually { pair.received.count >= 500 })
        #expect(pair.received.values == Array(0..<500))
        #expect(pair.relayB.recoveredPosts == 300)
        #expect(pair.relayB.missedPosts == 0)
        #expect(pair.relayA.droppedPosts == 0)
        withExtendedLifetime(pair) {}
    }

    @Test func aReaderGivesAFrozenServerUpAndReadsOnWhereItStopped() async throws {
        let server = try RedisServer()
        var options = historyOptions()
        options.pingInterval = .milliseconds(150)
        options.connectTimeout = .milliseconds(300)
        let pair = try HistoryPair(port: server.port, options: options)
        var events = EventReader(pair.relayB)
        #expect(await events.next() == .connected)
        #expect(pair.waitUntilReady())
        for seq in 0..<50 { pair.a.post(.chat, Message(seq: seq, text: "before")) }
        #expect(eventually { pair.received.count == 50 })
        server.freeze(true)
        let seen = await events.read { if case .disconnected = $0 { true } else { false } }
        server.freeze(false)
        #expect(seen.contains(.disconnected(reason: "no answer to XREAD for 0.3 seconds")), "\(seen)")
        #expect(pair.waitUntilReady())
        for seq in 50..<100 { pair.a.post(.chat, Message(seq: seq, text: "after")) }
        #expect(eventually { pair.received.count >= 100 })
        #expect(pair.received.values == Array(0..<100))
        #expect(pair.relayB.missedPosts == 0 && pair.relayB.recoveredPosts == 0)
        withExtendedLifetime(pair) {}
    }

    @Test func aFrozenServerCostsAReaderNothing() async throws {
        let server = try RedisServer()
        var options = historyOptions()
        options.pingInterval = .milliseconds(150)
        options.connectTimeout = .milliseconds(300)
        let pair = try HistoryPair(port: server.port, options: options)
        var events = EventReader(pair.relayB)
        #expect(await events.next() == .connected)
        #expect(pair.waitUntilReady())
        for seq in 0..<50 { pair.a.post(.chat, Message(seq: seq, text: "before")) }
        #expect(eventually { pair.received.count == 50 })

        try pair.sendBAway(server.port)
        #expect(pair.relayA.waitUntilReady(timeout: .seconds(10)))
        for seq in 50..<250 { pair.a.post(.chat, Message(seq: seq, text: String(repeating: "z", count: 4096))) }
        #expect(eventually { pair.relayA.publishedPosts == 250 })
        server.freeze(true)
        pair.relayB._pauseReading(false)
        // B finds its connection closed and cannot make a new one while the server is frozen.
        let seen = await events.read { if case .disconnected = $0 { true } else { false } }
        server.freeze(false)
        guard case .disconnected = seen.last else {
            Issue.record("B did not give the frozen connection up: \(seen)")
            return
        }
        #expect(eventually { pair.received.count >= 250 })
        #expect(pair.received.values == Array(0..<250))
        #expect(pair.relayB.recoveredPosts == 200)
        #expect(pair.relayB.missedPosts == 0)
        withExtendedLifetime(pair) {}
    }

    @Test func slowHandlersHoldReadingBackInsteadOfLosingPosts() throws {
        var options = historyOptions()
        options.maxPendingPosts = 64
        let pair = try HistoryPair(port: RedisServer.shared, options: options)
        let slow = Collector<Int>()
        let local = pair.b.subscribe(.chat) { message in
            Thread.sleep(forTimeInterval: 0.001)
            slow.append(message.seq)
        }
        #expect(pair.waitUntilReady())
        for seq in 0..<1000 { pair.a.post(.chat, Message(seq: seq, text: "fast")) }
        #expect(eventually { slow.count >= 1000 })
        #expect(slow.values == Array(0..<1000))
        #expect(pair.relayB.missedPosts == 0)
        withExtendedLifetime((pair, local)) {}
    }

    @Test func postsOlderThanTheHistoryAreCountedMissedAndTheRestRecovered() throws {
        let server = try RedisServer()
        let pair = try HistoryPair(port: server.port, options: historyOptions(1))
        #expect(pair.waitUntilReady())
        // B hears A once, so that a gap in A's numbers shows.
        pair.a.post(.chat, Message(seq: 0, text: "first"))
        #expect(eventually { pair.received.count == 1 })

        try pair.sendBAway(server.port)
        #expect(pair.relayA.waitUntilReady(timeout: .seconds(10)))
        #expect(pair.postOneByOne(1..<501))
        pair.relayB._pauseReading(false)

        #expect(eventually { pair.relayB.recoveredPosts + pair.relayB.missedPosts == 500 })
        let recovered = pair.relayB.recoveredPosts
        #expect(pair.relayB.missedPosts >= 300, "MAXLEN ~ 1 keeps at most a node of entries")
        #expect(eventually { pair.received.count == 1 + recovered })
        #expect(pair.received.values == [0] + Array((501 - recovered)..<501))
        withExtendedLifetime(pair) {}
    }

    @Test func anACLUserWithoutTheHistoryCommandsIsRefusedByTheInitializer() throws {
        let server = try RedisServer(arguments: ["--requirepass", "hunter2"])
        let admin = "redis://:hunter2@127.0.0.1:\(server.port)"
        let prefix = uniquePrefix()
        let all = ["+xadd", "+xread", "+xrevrange", "+ping"]
        let users: [(String, [String])] = [
            ("noxadd", ["~\(prefix)*"] + all.filter { $0 != "+xadd" }),
            ("noxread", ["~\(prefix)*"] + all.filter { $0 != "+xread" }),
            ("noxrevrange", ["~\(prefix)*"] + all.filter { $0 != "+xrevrange" }),
            ("otherkeys", ["~elsewhere:*"] + all),
        ]
        for (user, rules) in users {
            try redisCommand(admin, ["ACL", "SETUSER", user, "on", ">pass", "resetkeys"] + rules)
            do {
                let relay = try RedisRelay(
                    center: PostCenter(), url: "redis://\(user):pass@127.0.0.1:\(server.port)", channelPrefix: prefix,
                    options: historyOptions())
                Issue.record("\(user): no error; relay \(relay.originID)")
            } catch .permissionDenied(let text) {
                #expect(text.hasPrefix("NOPERM"), "\(user): \(text)")
            } catch {
                Issue.record("\(user): \(error)")
            }
        }
        try redisCommand(admin, ["ACL", "SETUSER", "app", "on", ">pass", "resetkeys", "~\(prefix)*"] + all)
        let relay = try RedisRelay(
            center: PostCenter(), url: "redis://app:pass@127.0.0.1:\(server.port)", channelPrefix: prefix,
            options: historyOptions())
        let token = relay.relay(.chat)
        #expect(relay.waitUntilReady(timeout: .seconds(10)))
        // The check wrote nothing: NOMKSTREAM made no stream.
        #expect(try redisCommand(admin, ["EXISTS", prefix]) == "0")
        withExtendedLifetime(token) {}
    }
}

@Suite("History mode: refusals after start")
struct HistoryRefusalTests {
    @Test func anXREADRefusedAfterStartIsAnEventAndIsRetriedUntilAllowed() async throws {
        let server = try RedisServer(arguments: ["--requirepass", "hunter2"])
        let admin = "redis://:hunter2@127.0.0.1:\(server.port)"
        let prefix = uniquePrefix()
        try redisCommand(
            admin,
            [
                "ACL", "SETUSER", "app", "on", ">pass", "resetkeys", "~\(prefix)*", "+xadd", "+xread", "+xrevrange",
                "+ping", "+set", "+del", "+getrange",
            ])
        var options = historyOptions()
        options.pingInterval = .milliseconds(200)
        let url = "redis://app:pass@127.0.0.1:\(server.port)"
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(center: a, url: url, channelPrefix: prefix, options: options)
        let relayB = try RedisRelay(center: b, url: url, channelPrefix: prefix, options: options)
        var events = EventReader(relayB)
        #expect(await events.next() == .connected)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))

        try redisCommand(admin, ["ACL", "SETUSER", "app", "-xread"])
        guard case .permissionDenied(let text) = await events.next() else {
            Issue.record("no permissionDenied event")
            return
        }
        #expect(text.hasPrefix("NOPERM"), "\(text)")
        for seq in 0..<20 { a.post(.chat, Message(seq: seq, text: "while refused")) }
        #expect(eventually { relayA.publishedPosts == 20 })
        // Allowed again: the next try reads on from where B stopped, nothing lost.
        try redisCommand(admin, ["ACL", "SETUSER", "app", "+xread"])
        #expect(eventually { received.count >= 20 })
        #expect(received.values == Array(0..<20))
        #expect(relayB.missedPosts == 0)
        withExtendedLifetime(tokens) {}
    }
}

@Suite("History mode with more names than one read carries")
struct ManyNamesHistoryTests {
    @Test func moreThanAThousandNamesAreReadInWindowsAndNoneIsLeftOut() throws {
        let port = RedisServer.shared
        let prefix = uniquePrefix()
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, host: "127.0.0.1", port: port, channelPrefix: prefix, options: historyOptions())
        let relayB = try RedisRelay(
            center: b, host: "127.0.0.1", port: port, channelPrefix: prefix, options: historyOptions())
        let names = (0..<(_HistoryReading.maxStreams + 200)).map { "name\($0)" }
        let received = Collector<String>()
        var tokens: [Subscription] = []
        for name in names {
            tokens.append(relayA.relay(name))
            tokens.append(relayB.relay(name))
            tokens.append(b.subscribe(name) { received.append("\(name) \($0.flag)") })
        }
        #expect(relayA.waitUntilReady(timeout: .seconds(20)) && relayB.waitUntilReady(timeout: .seconds(20)))
        let chosen = [names[0], names[999], names[1000], names[names.count - 1]]
        for name in chosen { a.post(name, flag: "hello") }
        #expect(eventually { received.count >= chosen.count })
        #expect(Set(received.values) == Set(chosen.map { "\($0) hello" }))
        #expect(relayB.missedPosts == 0 && relayB.rejectedMessages == 0)
        // The streams of this test, so that the shared server does not keep 1,200 of them.
        for name in chosen { try redisCommand("redis://127.0.0.1:\(port)", ["DEL", prefix + name]) }
        withExtendedLifetime(tokens) {}
    }
}
