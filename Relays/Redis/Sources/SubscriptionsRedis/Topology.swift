// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Synchronization

    extension RedisRelay {
        /// How the Redis servers of a relay's URL are arranged: one server, a Redis Cluster, or a
        /// primary found through Sentinel. Set it in ``Options/topology``; the URL lists the seeds
        /// (`redis://app:secret@10.0.0.1:7001,10.0.0.2:7002`), and its credentials and TLS apply to
        /// every node the relay talks to. A value type; the relay copies it at initialisation.
        public enum Topology: Sendable, Hashable {
            /// One server, the URL's only host. The default.
            case standalone
            /// A Redis Cluster (Redis 7 or later): the URL's hosts are seed nodes, from which the relay
            /// reads the slot map (`CLUSTER SLOTS`). Each relayed name goes over sharded pub/sub
            /// (`SPUBLISH`, `SSUBSCRIBE`) on the primary that owns its channel's hash slot, with one
            /// subscriber and one publisher connection per primary that is needed. The map is read
            /// again on `-MOVED` or `-ASK`, on a `SUNSUBSCRIBE` the server sends when a slot moves, and
            /// after a connection loss; a name whose slot moved is subscribed on its new owner before
            /// the old subscription is given up, and ``Event/topologyChanged`` is sent. A command a
            /// node declines without running it (`-MOVED`, `-ASK`, `CLUSTERDOWN`, `TRYAGAIN`) is sent
            /// again where its slot is served, in both modes, before any later post of its name (at
            /// most 5 redirections or 30 s of `CLUSTERDOWN`, then it is counted as refused); what a
            /// node may have run (the commands in flight on a connection that fails) is sent again
            /// in history mode only.
            ///
            /// In history mode (``Options/historyLength`` > 0) each name's stream is the key
            /// `<channelPrefix><name>`, in the slot of the name's channel: `XADD` goes to the primary
            /// that owns it, and one reading connection per such primary reads its names with `XREAD`
            /// (one slot per command, names of several slots on one primary in turn). A name whose slot
            /// moved (a reshard migrates the key) or whose primary failed over is read on its new
            /// owner from where it stopped: what the new owner has is delivered once, in order per
            /// sender; what asynchronous replication lost shows as missed posts.
            case cluster
            /// A primary monitored by Sentinel under `masterName`: the URL's hosts are the sentinels.
            /// The relay asks them for the primary (`SENTINEL get-master-addr-by-name`), checks that the
            /// server it reached says it is a primary (`ROLE`), and follows failovers: when a sentinel
            /// announces a new primary (`+switch-master`), or the connection to the old one is lost,
            /// both connections move to the new one (``Event/disconnected(reason:)`` then
            /// ``Event/connected``).
            case sentinel(masterName: String)
        }
    }

    /// A host and a port: one node of a topology. Immutable.
    struct _Address: Sendable, Hashable, CustomStringConvertible {
        var host: String
        var port: Int

        /// `host:port`, an IPv6 host in brackets.
        var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    extension _Endpoint {
        /// The same credentials and TLS, at `address` (one node of a cluster, a sentinel, a primary).
        func at(_ address: _Address) -> _Endpoint {
            var endpoint = self
            endpoint.host = address.host
            endpoint.port = address.port
            return endpoint
        }

        /// This endpoint's own host and port.
        var address: _Address { _Address(host: host, port: port) }
    }

    /// What a relay knows of its topology beyond one server, shared by its threads: `Sendable`, every
    /// member atomic or in a `Mutex`. Lives as long as the relay's core.
    final class _TopologyState: Sendable {
        /// Grows each time the relay learnt that the servers it uses moved (a new Sentinel primary);
        /// a connection made in an older epoch is given up by the thread that owns it.
        let epoch = Atomic<Int>(0)
        /// Sentinel: the primary the relay's connections were last made to.
        let primary = Mutex<_Address?>(nil)
        /// Cluster: the slot map last read, or `nil` before the first.
        let map = Mutex<_SlotMap?>(nil)
        /// Wakes the Sentinel watcher thread (when the relay stops).
        let wake = _WakePipe()

        deinit { wake.close() }

        /// The servers moved: connections of older epochs are to be given up.
        func move() { epoch.add(1, ordering: .releasing) }

        /// The current epoch.
        var current: Int { epoch.load(ordering: .acquiring) }
    }
#endif

#if Redis
    /// Where a relay's initializer opens its first connections and which commands it probes there:
    /// the URL's server; with Sentinel, the primary the sentinels name; in a cluster, the primary that
    /// owns the slot of the channel named by the prefix alone (the probes use sharded pub/sub there).
    /// A value used by the initializer only.
    struct _TopologyStart {
        /// Where the first connections go.
        private(set) var endpoint: _Endpoint
        let topology: RedisRelay.Topology
        private var primary: _Address?
        private var map: _SlotMap?

        /// - Throws: ``RedisRelayError/invalidURL(_:)`` for several hosts without a cluster or
        ///   Sentinel topology.
        init(_ endpoint: _Endpoint, topology: RedisRelay.Topology) throws(RedisRelayError) {
            guard endpoint.seeds.count == 1 || topology != .standalone else {
                throw .invalidURL("several hosts need Options.topology .cluster or .sentinel(masterName:)")
            }
            self.endpoint = endpoint
            self.topology = topology
        }

        var cluster: Bool { topology == .cluster }

        /// Sentinel's master name, `nil` for another topology.
        var masterName: String? {
            guard case .sentinel(let name) = topology else { return nil }
            return name
        }

        /// The subscribe, unsubscribe and publish commands of the topology.
        var commands: (String, String, String) {
            cluster ? ("SSUBSCRIBE", "SUNSUBSCRIBE", "SPUBLISH") : ("SUBSCRIBE", "UNSUBSCRIBE", "PUBLISH")
        }

        /// Asks the sentinels for the primary, or reads the cluster's slot map from a seed.
        /// - Throws: ``RedisRelayError/unreachable(host:port:reason:)`` when no sentinel or seed
        ///   answered; authentication and TLS refusals.
        mutating func locate(tls: _TLSContext?, timeout: Duration, prefix: String) throws(RedisRelayError) {
            switch topology {
            case .standalone: return
            case .sentinel(let name):
                let primary = try _Sentinel.resolve(endpoint, masterName: name, tls: tls, timeout: timeout)
                self.primary = primary
                endpoint = endpoint.at(primary)
            case .cluster:
                let map = try _ClusterNodes.readMap(endpoint, from: endpoint.seeds, tls: tls, timeout: timeout)
                self.map = map
                guard let owner = map.owner(ofChannel: prefix) else {
                    throw .unreachable(
                        host: endpoint.host, port: endpoint.port, reason: "the cluster serves no slot of \(prefix)")
                }
                endpoint = endpoint.at(owner)
            }
        }

        /// Records what `locate` found in the relay's state, and which node the first connections are to.
        func install(in core: _RelayCore, _ publishing: _Connection?, _ subscribing: _Connection?) {
            if let primary {
                core.topology.primary.withLock { $0 = primary }
                publishing?.node = primary
                subscribing?.node = primary
            }
            if let map { core.topology.map.withLock { $0 = map } }
        }
    }
#endif
