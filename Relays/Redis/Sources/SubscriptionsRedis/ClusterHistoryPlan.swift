// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    /// History mode in a cluster: on which primary each relayed channel's stream is read. A stream is
    /// the key `<prefix><name>`, the channel's own bytes, so it lives in the channel's slot (hash tags
    /// included) and moves with it: a reshard migrates the key, a failover promotes a replica that
    /// holds it. A plain value owned by the reading thread; pure, tested without a server.
    ///
    /// Unlike `_ClusterPlan` there is nothing to subscribe: a stream keeps what was added while
    /// nobody read it, so a moved channel is simply read on its new owner from the position its
    /// cursor kept (`_HistoryCursors.lost(_:)`), and nothing is lost in the switch.
    struct _ClusterHistoryPlan: Sendable, Equatable {
        /// How old the slot map may get before the reader reads it again, whatever the replies said:
        /// a move that no reply told of is followed within it.
        static let mapAge = Duration.seconds(5)

        /// The node each wanted channel is read from.
        private(set) var placed: [String: _Address] = [:]
        /// Channels whose node was lost or redirected their reading, waiting to be placed again:
        /// channel → that node. Placed elsewhere, they count as moved.
        private(set) var displaced: [String: _Address] = [:]

        /// The nodes a reading connection is needed to.
        var nodes: Set<_Address> { Set(placed.values) }

        /// Brings the plan to `wanted` under `map`. Returns the channels placed on a node they were
        /// not read from (each asks for its tip there before it is read again), and among them those
        /// that moved from another node (for `.topologyChanged`), both in name order. A channel whose
        /// slot has no owner in `map` stays where it is, or unplaced, until it has one.
        /// - Complexity: O(n) in the wanted channels (a CRC16 of each name).
        mutating func update(wanted: Set<String>, map: _SlotMap) -> (placed: [String], moved: [String]) {
            for channel in displaced.keys where !wanted.contains(channel) { displaced[channel] = nil }
            for channel in placed.keys where !wanted.contains(channel) { placed[channel] = nil }
            var fresh: [String] = []
            var moved: [String] = []
            for channel in wanted {
                guard let owner = map.owner(ofChannel: channel) else { continue }
                if let current = placed[channel] {
                    guard current != owner else { continue }
                    moved.append(channel)
                } else if let old = displaced.removeValue(forKey: channel), old != owner {
                    moved.append(channel)
                }
                placed[channel] = owner
                fresh.append(channel)
            }
            return (fresh.sorted(), moved.sorted())
        }

        /// `node` redirected the reading of `channel` (`-MOVED`): unless the channel was placed
        /// elsewhere meanwhile, it is displaced (read the map again, then `update`). Returns whether
        /// it was.
        mutating func lost(_ channel: String, on node: _Address) -> Bool {
            guard placed[channel] == node else { return false }
            placed[channel] = nil
            displaced[channel] = node
            return true
        }

        /// `node`'s connection was lost: every channel read there is displaced; returns them, in name
        /// order.
        mutating func lost(node: _Address) -> [String] {
            let channels = placed.filter { $0.value == node }.map(\.key).sorted()
            for channel in channels {
                placed[channel] = nil
                displaced[channel] = node
            }
            return channels
        }

        /// Whether an error reply is the cluster's passing state rather than a refusal: `CLUSTERDOWN`
        /// (a primary failed and no replica took over yet), `TRYAGAIN` (a multi-key command during
        /// a slot's migration) or `LOADING` (a node restarting). The read is asked again shortly,
        /// with no `.permissionDenied` event.
        static func isTransient(_ error: String) -> Bool {
            error.hasPrefix("CLUSTERDOWN") || error.hasPrefix("TRYAGAIN") || error.hasPrefix("LOADING")
        }

        /// Whether `error` refuses the command for good: neither a redirection (`-MOVED`, `-ASK`)
        /// nor a passing state of the cluster (`isTransient`). Such a refusal of a retained key's
        /// read is a `.permissionDenied` event; the others are not (the name is read again where
        /// it is served next).
        static func isRefusal(_ error: String) -> Bool {
            _Redirect(error) == nil && !isTransient(error)
        }

        /// The channels read on `node`, grouped by slot, in slot order and name order within one: a
        /// cluster refuses a command whose keys are in different slots (`CROSSSLOT`), so each `XREAD`
        /// reads one group. Names that share a hash tag share a group.
        func slotGroups(on node: _Address) -> [[String]] {
            let channels = placed.filter { $0.value == node }.map(\.key)
            let groups = Dictionary(grouping: channels, by: { _ClusterSlot.of($0) })
            return groups.keys.sorted().map { groups[$0]!.sorted() }
        }
    }
#endif
