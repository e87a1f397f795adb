import Testing

@testable import SubscriptionsRedis

/// The cluster's routing without a server: key slots, the slot map, redirections and the
/// subscription plan's make-before-break moves.
@Suite("Cluster routing: slots, map, redirections, plan")
struct ClusterRoutingTests {
    let a = _Address(host: "127.0.0.1", port: 7001)
    let b = _Address(host: "127.0.0.1", port: 7002)
    let c = _Address(host: "127.0.0.1", port: 7003)

    /// Redis Cluster's specification: CRC16 XMODEM of "123456789" is 0x31C3; `CLUSTER KEYSLOT`
    /// gives these slots (checked against redis-server 7.0).
    @Test func keySlotsAreRedisClusterOnes() {
        #expect(_ClusterSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(_ClusterSlot.of("foo") == 12182)
        #expect(_ClusterSlot.of("bar") == 5061)
        #expect(_ClusterSlot.of("subscriptions:chat") == _ClusterSlot.of("subscriptions:chat"))
        #expect(_ClusterSlot.of("") == 0)
    }

    /// Only the first `{…}` with at least one byte inside is hashed.
    @Test func hashTagsFollowTheSpecification() {
        #expect(_ClusterSlot.of("{user1000}.following") == _ClusterSlot.of("{user1000}.followers"))
        #expect(_ClusterSlot.of("{user1000}.following") == _ClusterSlot.of("user1000"))
        #expect(_ClusterSlot.of("foo{}{bar}") == Int(_ClusterSlot.crc16(Array("foo{}{bar}".utf8)) & 0x3FFF))
        #expect(_ClusterSlot.of("foo{{bar}}zap") == _ClusterSlot.of("{bar"))
        #expect(_ClusterSlot.of("foo{bar}{zap}") == _ClusterSlot.of("bar"))
    }

    /// Thirty relayed names spread over three equal slot ranges about evenly: the premise of the
    /// scale target (each primary carries a third of the messages).
    @Test func thirtyNamesSpreadOverThreePrimaries() {
        var owners = [_Address?](repeating: nil, count: _ClusterSlot.count)
        for slot in 0..<_ClusterSlot.count { owners[slot] = slot < 5461 ? a : slot < 10923 ? b : c }
        let map = _SlotMap(owners: owners)
        var perNode: [_Address: Int] = [:]
        for index in 0..<30 { perNode[map.owner(ofChannel: "subscriptions:name\(index)")!, default: 0] += 1 }
        #expect(perNode.count == 3)
        #expect(perNode.values.allSatisfy { (6...14).contains($0) })
    }

    @Test func aClusterSlotsReplyBecomesAMap() throws {
        func node(_ host: String, _ port: Int) -> _Reply {
            .array([.string(Array(host.utf8)), .integer(Int64(port)), .string(Array("id".utf8))])
        }
        let reply = _Reply.array([
            .array([.integer(0), .integer(5460), node("127.0.0.1", 7001), node("127.0.0.1", 7004)]),
            .array([.integer(5461), .integer(10922), node("", 7002)]),
            .array([.integer(10923), .integer(16383), node("127.0.0.1", 7003)]),
        ])
        let map = try #require(_SlotMap(clusterSlots: reply, asked: _Address(host: "127.0.0.1", port: 9999)))
        #expect(map.owner(of: 0) == a && map.owner(of: 5460) == a)
        #expect(map.owner(of: 5461) == b)  // an empty host is the node that answered
        #expect(map.owner(of: 16383) == c)
        #expect(map.isComplete)
        #expect(map.primaries == [a, b, c])
    }

    @Test func aMalformedClusterSlotsReplyIsNotUsed() {
        let asked = a
        #expect(_SlotMap(clusterSlots: .error("ERR This instance has cluster support disabled"), asked: asked) == nil)
        let outOfRange = _Reply.array([
            .array([.integer(0), .integer(16384), .array([.string(Array("h".utf8)), .integer(1)])])
        ])
        #expect(_SlotMap(clusterSlots: outOfRange, asked: asked) == nil)
        let reversed = _Reply.array([
            .array([.integer(9), .integer(3), .array([.string(Array("h".utf8)), .integer(1)])])
        ])
        #expect(_SlotMap(clusterSlots: reversed, asked: asked) == nil)
        let badPort = _Reply.array([
            .array([.integer(0), .integer(3), .array([.string(Array("h".utf8)), .integer(0)])])
        ])
        #expect(_SlotMap(clusterSlots: badPort, asked: asked) == nil)
        let partial = _Reply.array([
            .array([.integer(0), .integer(3), .array([.string(Array("h".utf8)), .integer(7)])])
        ])
        #expect(_SlotMap(clusterSlots: partial, asked: asked)?.isComplete == false)
    }

    @Test func movedAndAskAreRedirectionsOtherErrorsAreNot() throws {
        let moved = try #require(_Redirect("MOVED 3999 127.0.0.1:6381"))
        #expect(moved.slot == 3999 && moved.node == _Address(host: "127.0.0.1", port: 6381) && !moved.asking)
        #expect(_Redirect("ASK 3999 127.0.0.1:6381")?.asking == true)
        #expect(_Redirect("MOVED 3999 [::1]:6381")?.node == _Address(host: "::1", port: 6381))
        #expect(_Redirect("NOPERM this user has no permissions") == nil)
        #expect(_Redirect("CROSSSLOT Keys in request don't hash to the same slot") == nil)
        #expect(_Redirect("MOVED 16384 127.0.0.1:6381") == nil)
        #expect(_Redirect("MOVED 1 127.0.0.1:0") == nil)
        #expect(_Redirect("MOVED 1 127.0.0.1") == nil)
    }

    private func map(_ owner: (Int) -> _Address?) -> _SlotMap {
        _SlotMap(owners: (0..<_ClusterSlot.count).map(owner))
    }

    /// A first plan subscribes each name on its owner, one command per node.
    @Test func aPlanSubscribesEachNameOnItsOwner() {
        var plan = _ClusterPlan()
        let x = "subscriptions:x"  // slot 1..
        let onA = map { _ in a }
        let (commands, moved) = plan.update(wanted: [x], map: onA)
        #expect(commands == [.init(node: a, subscribe: true, channels: [x])])
        #expect(moved.isEmpty)
        #expect(plan.nodes == [a])
        // Nothing changed: nothing to send.
        let result1 = plan.update(wanted: [x], map: onA).commands
        #expect(result1.isEmpty)
        // The name is no longer relayed: unsubscribed.
        let result2 = plan.update(wanted: [], map: onA).commands
        #expect(result2 == [.init(node: a, subscribe: false, channels: [x])])
        #expect(plan.nodes.isEmpty)
    }

    /// A confirmed name whose slot moved is subscribed on the new owner, and given up on the old one
    /// only once the new owner confirmed.
    @Test func aMovedSlotIsSubscribedOnItsNewOwnerBeforeTheOldIsGivenUp() {
        var plan = _ClusterPlan()
        let x = "subscriptions:x"
        _ = plan.update(wanted: [x], map: map { _ in a })
        let result3 = plan.confirmed(x, on: a)
        #expect(result3 == nil)
        let (commands, moved) = plan.update(wanted: [x], map: map { _ in b })
        #expect(commands == [.init(node: b, subscribe: true, channels: [x])])
        #expect(moved == [x])
        #expect(plan.nodes == [a, b])  // both held until b confirms
        let result4 = plan.confirmed(x, on: b)
        #expect(result4 == .init(node: a, subscribe: false, channels: [x]))
        #expect(plan.nodes == [b])
    }

    /// A name not yet confirmed on a node that lost its slot is given up there at once.
    @Test func anUnconfirmedNameMovesAtOnce() {
        var plan = _ClusterPlan()
        let x = "subscriptions:x"
        _ = plan.update(wanted: [x], map: map { _ in a })
        let (commands, _) = plan.update(wanted: [x], map: map { _ in b })
        #expect(
            commands == [
                .init(node: b, subscribe: true, channels: [x]), .init(node: a, subscribe: false, channels: [x]),
            ])
        #expect(plan.nodes == [b])
        // A late confirmation from the old node changes nothing.
        let result5 = plan.confirmed(x, on: a)
        #expect(result5 == nil)
        #expect(plan.confirmed[x] == nil)
    }

    /// The server's own SUNSUBSCRIBE (the slot left that node) or a lost connection places the name
    /// again; the unsubscription the relay asked for itself does not.
    @Test func aServerSentUnsubscribePlacesTheNameAgain() {
        var plan = _ClusterPlan()
        let x = "subscriptions:x"
        let y = "subscriptions:y"
        _ = plan.update(wanted: [x, y], map: map { _ in a })
        _ = plan.confirmed(x, on: a)
        _ = plan.confirmed(y, on: a)
        let lostX = plan.lost(x, on: a)
        #expect(lostX)
        #expect(plan.placed[x] == nil)
        let (commands, moved) = plan.update(wanted: [x, y], map: map { _ in b })
        #expect(commands.first == .init(node: b, subscribe: true, channels: [x, y]))
        // Both moved: x from the node that dropped it, y from the node that still holds it.
        #expect(moved == [x, y])
        // y was still confirmed on a: it is held there until b confirms, and its own release is no loss.
        let release = plan.confirmed(y, on: b)
        #expect(release == .init(node: a, subscribe: false, channels: [y]))
        let lostY = plan.lost(y, on: a)
        #expect(!lostY)
        #expect(plan.placed[y] == b)
        let lostOnB = plan.lost(node: b)
        #expect(lostOnB == [x, y])
        #expect(plan.nodes.isEmpty)
    }

    /// A slot with no owner (its primary failed, no replica promoted yet) keeps its name where it is.
    @Test func aSlotWithoutOwnerKeepsItsName() {
        var plan = _ClusterPlan()
        let x = "subscriptions:x"
        _ = plan.update(wanted: [x], map: map { _ in a })
        let (commands, moved) = plan.update(wanted: [x], map: map { _ in nil })
        #expect(commands.isEmpty && moved.isEmpty)
        #expect(plan.placed[x] == a)
    }

    /// A command in RESP, as the publisher formats it.
    private func command(_ words: [String]) -> [UInt8] {
        var bytes = Array("*\(words.count)\r\n".utf8)
        for word in words { bytes += Array("$\(word.utf8.count)\r\n\(word)\r\n".utf8) }
        return bytes
    }

    /// A command sent again goes to the owner of its first argument's slot: the channel of an
    /// `SPUBLISH` or `XADD`, the key of a retained post's `SET` or `DEL` (in the channel's slot).
    @Test func aKeptCommandsSlotIsItsChannelsOrKeys() {
        let channel = "app:chat"
        let slot = _ClusterSlot.of(channel)
        let commands = [
            command(["SPUBLISH", channel, "message"]),
            command(["XADD", channel, "MAXLEN", "~", "10000", "*", "m", "message"]),
            command(["SET", "app:retained:{app:chat}", "value"]),
            command(["DEL", "app:retained:{app:chat}"]),
        ]
        for bytes in commands { #expect(_Kept(bytes: bytes, posts: 1).slot == slot) }
        #expect(
            _Kept(bytes: command(["SET", "app:retained:{user1}.mode", "v"]), posts: 0).slot == _ClusterSlot.of("user1"))
        // Not such a command: slot 0, never a crash.
        for bytes in [[], Array("*2\r\n$3\r\nDEL".utf8), Array("*2\r\n$3\r\nDEL\r\n$9\r\nkey\r\n".utf8)] {
            #expect(_Kept(bytes: bytes, posts: 0).slot == 0)
        }
    }

    /// `_SentCommands` against a plain array of what was sent: random batches of commands, marks
    /// and commands sent again, removed oldest first, accepted or declined, past its compaction
    /// (more than 1,024 removed while others are in flight): every declined command comes back
    /// with its own bytes and posts, every mark as `nil`, and what is left in flight is what the
    /// model holds.
    @Test func sentCommandsGiveEachCommandItsOwnBytesInOrder() {
        var random = SplitMix64(state: 40)
        var sent = _SentCommands()
        var model: [(bytes: [UInt8], posts: Int)?] = []
        var serial = 0
        for _ in 0..<20_000 {
            switch random.next() % 4 {
            case 0, 1:
                // A batch formatted into an output buffer that held other bytes before it.
                var output = Array(repeating: UInt8(ascii: "x"), count: Int(random.next() % 5))
                let first = output.count
                var commands: [(end: Int, posts: Int)] = []
                for _ in 0..<Int(random.next() % 4) {
                    serial += 1
                    let bytes = command(["SPUBLISH", "c\(serial)", String(repeating: "m", count: serial % 7)])
                    output += bytes
                    let posts = Int(random.next() % 3)
                    commands.append((output.count - first, posts))
                    model.append((bytes, posts))
                }
                sent.append(output[first...], commands: commands)
            case 2:
                if random.next() % 3 == 0 {
                    sent.appendMark()
                    model.append(nil)
                } else {
                    serial += 1
                    let bytes = command(["XADD", "again\(serial)", "*", "m", "x"])
                    sent.append(_Kept(bytes: bytes, posts: 1))
                    model.append((bytes, 1))
                }
            default:
                // Replies: up to a few, oldest first; most accepted, some declined.
                for _ in 0..<Int(random.next() % 6) where !model.isEmpty {
                    let expected = model.removeFirst()
                    let declined = random.next() % 5 == 0
                    let kept = sent.removeFirst(declined: declined)
                    #expect(kept?.posts == expected?.posts)
                    #expect((kept == nil) == (expected == nil))
                    if declined, let expected { #expect(kept?.bytes == expected.bytes) }
                }
            }
        }
        #expect(sent.remaining.map(\.bytes) == model.compactMap { $0?.bytes })
        while !model.isEmpty {
            let expected = model.removeFirst()
            #expect(sent.removeFirst(declined: true)?.bytes == expected?.bytes)
        }
        #expect(sent.isEmpty)
        #expect(sent.removeFirst(declined: true) == nil)
    }
}
