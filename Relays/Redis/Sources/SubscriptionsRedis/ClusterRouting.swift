// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    /// Redis Cluster's key slots: CRC16 (XMODEM) of the key, or of its hash tag, modulo 16384. A
    /// sharded channel is placed exactly as a key of the same bytes. Pure; safe from any thread.
    enum _ClusterSlot {
        /// The number of slots of a Redis Cluster.
        static let count = 16384

        /// The slot of `key`: when it holds a `{`, followed later by a `}` with at least one byte
        /// between them, only those bytes (the first such hash tag) are hashed, so that
        /// `{user1}.a` and `{user1}.b` share a slot.
        /// - Complexity: O(n) in the key's length.
        static func of(_ key: some Collection<UInt8>) -> Int {
            let bytes = Array(key)
            if let open = bytes.firstIndex(of: UInt8(ascii: "{")),
                let close = bytes[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
            {
                return Int(crc16(bytes[(open + 1)..<close]) & 0x3FFF)
            }
            return Int(crc16(bytes) & 0x3FFF)
        }

        /// The slot of a channel name's UTF-8 bytes.
        static func of(_ channel: String) -> Int { of(Array(channel.utf8)) }

        /// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), as Redis Cluster specifies it.
        static func crc16(_ bytes: some Collection<UInt8>) -> UInt16 {
            var crc: UInt16 = 0
            for byte in bytes {
                crc ^= UInt16(byte) << 8
                for _ in 0..<8 {
                    crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
                }
            }
            return crc
        }
    }

    /// Which primary owns each slot, as read from `CLUSTER SLOTS`. Immutable value; pure.
    struct _SlotMap: Sendable, Equatable {
        /// The owner of each slot (16384 entries), `nil` for a slot nobody serves.
        private(set) var owners: [_Address?]

        init(owners: [_Address?] = Array(repeating: nil, count: _ClusterSlot.count)) {
            precondition(owners.count == _ClusterSlot.count)
            self.owners = owners
        }

        /// Parses a `CLUSTER SLOTS` reply: an array of `[start, end, [host, port, id, …], replicas…]`.
        /// A primary's empty host (a node that does not know its own address) or `?` means the node
        /// that answered, `asked`. Ranges out of bounds or malformed entries make it `nil`: a reply
        /// that cannot be trusted is not half-used.
        init?(clusterSlots reply: _Reply, asked: _Address) {
            guard let ranges = reply.elements else { return nil }
            self.init()
            for range in ranges {
                guard let fields = range.elements, fields.count >= 3, let start = fields[0].number,
                    let end = fields[1].number, 0 <= start, start <= end, end < _ClusterSlot.count,
                    let node = fields[2].elements, node.count >= 2, let host = node[0].text,
                    let port = node[1].number, (1...65535).contains(port)
                else { return nil }
                let address =
                    host.isEmpty || host == "?"
                    ? _Address(host: asked.host, port: port) : _Address(host: host, port: port)
                for slot in start...end { owners[slot] = address }
            }
        }

        /// The primary owning `slot`, or `nil`.
        func owner(of slot: Int) -> _Address? { owners[slot] }

        /// The primary owning `channel`'s slot, or `nil`.
        func owner(ofChannel channel: String) -> _Address? { owners[_ClusterSlot.of(channel)] }

        /// Whether every slot has an owner.
        var isComplete: Bool { owners.allSatisfy { $0 != nil } }

        /// The primaries that own at least one slot.
        var primaries: Set<_Address> { Set(owners.compactMap { $0 }) }

        /// Records that `slot` is now served by `owner` (a `-MOVED` reply says so before the map is
        /// read again).
        mutating func assign(_ slot: Int, to owner: _Address) { owners[slot] = owner }
    }

    /// A cluster's redirection, parsed from an error reply: `MOVED <slot> <host>:<port>` (the slot
    /// has a new owner: read the map again) or `ASK <slot> <host>:<port>` (the slot is migrating).
    /// Pure.
    struct _Redirect: Sendable, Equatable {
        var slot: Int
        var node: _Address
        /// `true` for `ASK`, `false` for `MOVED`.
        var asking: Bool

        /// `nil` for any other error text (`NOPERM …`, `CROSSSLOT …`), or one whose slot or port is
        /// out of range.
        init?(_ error: String) {
            let words = error.split(separator: " ")
            guard words.count == 3, words[0] == "MOVED" || words[0] == "ASK", let slot = Int(words[1]),
                (0..<_ClusterSlot.count).contains(slot), let colon = words[2].lastIndex(of: ":"),
                let port = Int(words[2][words[2].index(after: colon)...]), (1...65535).contains(port)
            else { return nil }
            var host = String(words[2][..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            self.slot = slot
            self.node = _Address(host: host, port: port)
            self.asking = words[0] == "ASK"
        }
    }

    /// The subscriber's plan across a cluster: for each relayed channel, on which primary it is
    /// subscribed (confirmed or asked), and what to do when the wanted channels or the slot map
    /// change. A moved channel is subscribed on its new owner first; its old subscription is
    /// given up only once the new one is confirmed (`confirmed(_:on:)`), so that no message
    /// published on the new owner meanwhile is lost for want of a subscription. A plain value
    /// owned by the subscriber thread; pure, tested without a server.
    struct _ClusterPlan: Sendable, Equatable {
        /// A command for one node: `SSUBSCRIBE` or `SUNSUBSCRIBE` of some channels.
        struct Command: Sendable, Equatable, Hashable {
            var node: _Address
            var subscribe: Bool
            var channels: [String]
        }

        /// Where each wanted channel is subscribed or being subscribed.
        private(set) var placed: [String: _Address] = [:]
        /// Channels still subscribed on a node that no longer owns them, waiting for the new owner
        /// to confirm: channel → old node.
        private(set) var leaving: [String: _Address] = [:]
        /// Channels whose subscription the node confirmed: channel → node.
        private(set) var confirmed: [String: _Address] = [:]
        /// Channels whose node dropped them (its own `SUNSUBSCRIBE`, a lost connection), waiting to
        /// be placed again: channel → that node. Placed elsewhere, they count as moved.
        private(set) var displaced: [String: _Address] = [:]

        /// The nodes that hold or are about to hold a subscription: those the subscriber needs a
        /// connection to.
        var nodes: Set<_Address> { Set(placed.values).union(leaving.values) }

        /// Brings the plan to `wanted` under `map`: returns the commands to send, and the channels
        /// that moved to another node (for `.topologyChanged`). A channel whose slot has no owner
        /// in `map` stays where it is until it has one.
        mutating func update(wanted: Set<String>, map: _SlotMap) -> (commands: [Command], moved: [String]) {
            var subscribe: [_Address: [String]] = [:]
            var unsubscribe: [_Address: [String]] = [:]
            var moved: [String] = []
            for channel in displaced.keys where !wanted.contains(channel) { displaced[channel] = nil }
            for channel in placed.keys where !wanted.contains(channel) {
                let node = placed.removeValue(forKey: channel)!
                confirmed[channel] = nil
                unsubscribe[node, default: []].append(channel)
                if let old = leaving.removeValue(forKey: channel) { unsubscribe[old, default: []].append(channel) }
            }
            for channel in wanted {
                guard let owner = map.owner(ofChannel: channel) else { continue }
                guard let current = placed[channel] else {
                    placed[channel] = owner
                    subscribe[owner, default: []].append(channel)
                    if let old = displaced.removeValue(forKey: channel), old != owner { moved.append(channel) }
                    continue
                }
                guard current != owner else { continue }
                moved.append(channel)
                placed[channel] = owner
                subscribe[owner, default: []].append(channel)
                if confirmed[channel] == current {
                    // Make before break: the old subscription stays until the new one is confirmed.
                    if let older = leaving[channel] { unsubscribe[older, default: []].append(channel) }
                    leaving[channel] = current
                } else {
                    // Never confirmed there: nothing arrives through it yet, give it up now.
                    unsubscribe[current, default: []].append(channel)
                    if leaving[channel] == owner { leaving[channel] = nil }
                }
                confirmed[channel] = nil
            }
            // Subscriptions first, then the unsubscriptions, each in node order: a stable order for
            // the tests and the wire.
            let commands =
                subscribe.map { Command(node: $0.key, subscribe: true, channels: $0.value.sorted()) }.sorted(
                    by: Self.order)
                + unsubscribe.map { Command(node: $0.key, subscribe: false, channels: $0.value.sorted()) }.sorted(
                    by: Self.order)
            return (commands, moved.sorted())
        }

        private static func order(_ a: Command, _ b: Command) -> Bool {
            (a.node.host, a.node.port) < (b.node.host, b.node.port)
        }

        /// `node` confirmed the subscription of `channel`: when it is the channel's current place,
        /// the old node's subscription (if any) is now given up (the command returned).
        mutating func confirmed(_ channel: String, on node: _Address) -> Command? {
            guard placed[channel] == node else { return nil }
            confirmed[channel] = node
            guard let old = leaving.removeValue(forKey: channel), old != node else { return nil }
            return Command(node: old, subscribe: false, channels: [channel])
        }

        /// `node` dropped `channel` on its own (a `SUNSUBSCRIBE` the server sent because the slot
        /// moved) or its connection was lost: the channel must be placed again. Returns `true` when
        /// it was the channel's current place (read the slot map again, then `update`).
        mutating func lost(_ channel: String, on node: _Address) -> Bool {
            if leaving[channel] == node {
                leaving[channel] = nil
                return false
            }
            guard placed[channel] == node else { return false }
            placed[channel] = nil
            confirmed[channel] = nil
            displaced[channel] = node
            return true
        }

        /// Every subscription held on `node` is gone (its connection was lost): each channel placed
        /// there is to be placed again; returns those channels.
        mutating func lost(node: _Address) -> [String] {
            for (channel, old) in leaving where old == node { leaving[channel] = nil }
            let channels = placed.filter { $0.value == node }.map(\.key)
            for channel in channels {
                placed[channel] = nil
                confirmed[channel] = nil
                displaced[channel] = node
            }
            return channels.sorted()
        }
    }
#endif
