import Foundation
import Subscriptions
import Synchronization
import Testing

@testable import SubscriptionsRedis

/// Two relays on a topology, some names, a sender thread posting round-robin over them, and the
/// receiving side's tally: for the fault tests of the cluster and Sentinel relays.
final class Traffic: Sendable {
    let relayA: RedisRelay
    let relayB: RedisRelay
    let names: [String]
    let logB: EventLog
    private let a: PostCenter
    private let received = Collector<Received>()

    struct Received: Sendable {
        let name: String
        let seq: Int
    }
    private let made = Atomic<Int>(0)
    private let running = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    nonisolated(unsafe) private var tokens: [Subscription] = []

    /// B connects to `urlOfB` when given (a proxy, say), else to `url` as A does.
    init(
        url: String, urlOfB: String? = nil, topology: RedisRelay.Topology, prefix: String, names: [String],
        historyLength: Int = 0, pingInterval: Duration = .milliseconds(500)
    ) throws {
        var options = fastOptions
        options.topology = topology
        options.historyLength = historyLength
        options.connectTimeout = .milliseconds(500)
        options.pingInterval = pingInterval
        a = PostCenter()
        let b = PostCenter()
        relayA = try RedisRelay(center: a, url: url, channelPrefix: prefix, options: options)
        relayB = try RedisRelay(center: b, url: urlOfB ?? url, channelPrefix: prefix, options: options)
        logB = EventLog(relayB)
        self.names = names
        var tokens: [Subscription] = []
        for name in names {
            let topic = Topic<Message>(name)
            tokens.append(relayA.relay(topic))
            tokens.append(relayB.relay(topic))
            let received = self.received
            tokens.append(b.subscribe(topic) { received.append(Received(name: name, seq: $0.seq)) })
        }
        self.tokens = tokens
    }

    /// Both relays connected with every subscription confirmed (waits at most `timeout`, suspended).
    func ready(_ timeout: Duration = .seconds(30)) async -> Bool {
        await settles(timeout: timeout) {
            relayA.waitUntilReady(timeout: .zero) && relayB.waitUntilReady(timeout: .zero)
        }
    }

    /// Posts `rounds` rounds (one post per name each) at once, on the calling thread.
    func post(rounds: Int) {
        for _ in 0..<rounds { postRound() }
    }

    private func postRound() {
        let seq = made.load(ordering: .relaxed) / names.count
        for name in names { a.post(Topic<Message>(name), Message(seq: seq, text: "traffic")) }
        made.add(names.count, ordering: .relaxed)
    }

    /// Starts posting on a thread of its own, a round every millisecond, until `stop()`.
    func start() {
        running.store(true, ordering: .relaxed)
        Thread.detachNewThread { [self] in
            while running.load(ordering: .relaxed) {
                postRound()
                Thread.sleep(forTimeInterval: 0.001)
            }
            finished.signal()
        }
    }

    func stop() {
        running.store(false, ordering: .relaxed)
        finished.wait()
    }

    /// The posts made so far.
    var posts: Int { made.load(ordering: .relaxed) }

    /// The posts received by B, per name.
    var receivedPerName: [String: [Int]] {
        Dictionary(grouping: received.values, by: \.name).mapValues { $0.map(\.seq) }
    }

    var receivedCount: Int { received.count }

    /// The fault tests' accounting: every post made was received, counted missed by B, or dropped
    /// unnumbered by A; and each name's posts arrived in order.
    func expectEveryPostAccountedForInOrder(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            posts == receivedCount + relayB.missedPosts + unnumbered,
            "made \(posts) received \(receivedCount) missed \(relayB.missedPosts) dropped \(relayA.dropCounts)",
            sourceLocation: sourceLocation)
        #expect(inOrder, sourceLocation: sourceLocation)
    }

    /// Whether B received the last round's post of every name.
    func lastRoundArrived() -> Bool {
        let last = posts / names.count - 1
        let values = receivedPerName
        return names.allSatisfy { values[$0]?.last == last }
    }

    /// The posts A never numbered (dropped before sending); each numbered post is, at B, received or
    /// counted missed once a later post of its name arrived.
    var unnumbered: Int {
        let drops = relayA.dropCounts
        return drops.disconnected + drops.queueFull + drops.tooLarge + drops.encodingFailed
    }

    /// Whether each name's posts arrived in order, none twice.
    var inOrder: Bool {
        receivedPerName.values.allSatisfy { $0 == $0.sorted() && Set($0).count == $0.count }
    }

    func close() async {
        tokens = []
        await relayA.close()
        await relayB.close()
    }
}
