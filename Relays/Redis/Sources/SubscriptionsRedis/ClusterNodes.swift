// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Darwin)
        import Darwin
    #endif

    /// The blocking I/O of a cluster relay's threads: reading the slot map, and waiting on several
    /// nodes' sockets at once. Called on the publisher or the subscriber thread.
    enum _ClusterNodes {
        /// Reads the slot map (`CLUSTER SLOTS`) from the first of `nodes` that answers with a
        /// well-formed one; credentials and TLS of `endpoint` apply.
        /// - Throws: ``RedisRelayError/unreachable(host:port:reason:)`` naming the last node tried when
        ///   none did; an authentication or TLS refusal at once.
        static func readMap(
            _ endpoint: _Endpoint, from nodes: [_Address], tls: _TLSContext?, timeout: Duration
        ) throws(RedisRelayError) -> _SlotMap {
            var failure = RedisRelayError.unreachable(host: endpoint.host, port: endpoint.port, reason: "no node")
            for node in nodes {
                let target = endpoint.at(node)
                do {
                    let connection = try _Connection.open(target, tls: tls, timeout: timeout)
                    let reply = try connection.call(["CLUSTER", "SLOTS"], target)
                    if let map = _SlotMap(clusterSlots: reply, asked: node), !map.primaries.isEmpty { return map }
                    let text: String
                    if case .error(let error) = reply { text = error } else { text = "a malformed CLUSTER SLOTS reply" }
                    failure = .unreachable(host: node.host, port: node.port, reason: text)
                } catch .unreachable(let host, let port, let reason) {
                    failure = .unreachable(host: host, port: port, reason: reason)
                }
            }
            throw failure
        }

        /// Reads the map as `readMap` does, asking the nodes that redirected the relay first (they
        /// know of the move: another node may not have heard of it yet), then the primaries of
        /// `known`, then the URL's seeds, and applies the `-MOVED` redirections to it (newer than
        /// what a lagging node says); records it in the relay's state. `nil` when no node answered (an
        /// authentication or TLS refusal is an event).
        static func refresh(_ core: _RelayCore, known: _SlotMap?, redirects: [_Redirect] = []) -> _SlotMap? {
            var nodes: [_Address] = []
            for redirect in redirects.reversed() where !nodes.contains(redirect.node) { nodes.append(redirect.node) }
            for primary in (known?.primaries ?? []).sorted(by: { ($0.host, $0.port) < ($1.host, $1.port) })
            where !nodes.contains(primary) {
                nodes.append(primary)
            }
            for seed in core.endpoint.seeds where !nodes.contains(seed) { nodes.append(seed) }
            do {
                var map = try readMap(core.endpoint, from: nodes, tls: core.tls, timeout: core.options.connectTimeout)
                for redirect in redirects where !redirect.asking { map.assign(redirect.slot, to: redirect.node) }
                core.topology.map.withLock { $0 = map }
                return map
            } catch .authenticationFailed(let text) {
                core.events.emit(.authenticationFailed(text))
            } catch .tlsFailed(let text) {
                core.events.emit(.disconnected(reason: text))
            } catch {}
            return nil
        }

        /// A connection to the node `address`, tagged with it, or `nil` (see `_RelayCore.connect(to:)`).
        static func connect(_ core: _RelayCore, _ address: _Address) -> _Connection? {
            let connection = core.connect(to: core.endpoint.at(address))
            connection?.node = address
            return connection
        }

        /// Waits until one of `sockets` has input or `wake` is written, at most `timeoutMilliseconds`.
        /// Returns whether `wake` was written and the indices of the ready sockets.
        static func wait(_ sockets: [Int32], wake: _WakePipe, timeoutMilliseconds: Int32) -> (wake: Bool, ready: [Int])
        {
            var fds = [pollfd(fd: wake.readEnd, events: Int16(POLLIN), revents: 0)]
            for socket in sockets { fds.append(pollfd(fd: socket, events: Int16(POLLIN), revents: 0)) }
            let count = poll(&fds, nfds_t(fds.count), max(0, timeoutMilliseconds))
            guard count > 0 else { return (false, []) }
            return (fds[0].revents != 0, fds.indices.dropFirst().filter { fds[$0].revents != 0 }.map { $0 - 1 })
        }
    }
#endif
