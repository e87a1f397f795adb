// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import CHiredis

    /// Finding and following a Sentinel-monitored primary. The reading of the sentinels' answers is
    /// pure (tested without a server); the rest opens short connections on the calling thread.
    enum _Sentinel {
        /// The primary's address in an answer to `SENTINEL get-master-addr-by-name`: `[host, port]`,
        /// `nil` for a null (the name is unknown) or anything malformed.
        static func primary(from reply: _Reply) -> _Address? {
            guard let fields = reply.elements, fields.count == 2, let host = fields[0].text, !host.isEmpty,
                let port = fields[1].number, (1...65535).contains(port)
            else { return nil }
            return _Address(host: host, port: port)
        }

        /// Whether an answer to `ROLE` says the server is a primary (`["master", offset, replicas]`).
        static func isPrimary(_ reply: _Reply) -> Bool { reply.elements?.first?.text == "master" }

        /// The new primary announced by a `+switch-master` message (`<name> <old host> <old port>
        /// <new host> <new port>`), when it is about `masterName`; `nil` for another name or a
        /// malformed text.
        static func switched(_ text: String, masterName: String) -> _Address? {
            let words = text.split(separator: " ")
            guard words.count == 5, words[0] == masterName, let port = Int(words[4]), (1...65535).contains(port)
            else { return nil }
            return _Address(host: String(words[3]), port: port)
        }

        /// Asks the sentinels of `endpoint.seeds`, in order, for the primary of `masterName`; the first
        /// that names one answers. Credentials and TLS of `endpoint` apply to the sentinels too.
        /// - Throws: ``RedisRelayError/unreachable(host:port:reason:)`` (naming the last sentinel) when
        ///   none answered; an authentication or TLS refusal as soon as a sentinel gives one.
        static func resolve(
            _ endpoint: _Endpoint, masterName: String, tls: _TLSContext?, timeout: Duration
        ) throws(RedisRelayError) -> _Address {
            var failure = RedisRelayError.unreachable(host: endpoint.host, port: endpoint.port, reason: "no sentinel")
            for seed in endpoint.seeds {
                let sentinel = endpoint.at(seed)
                do {
                    let connection = try _Connection.open(sentinel, tls: tls, timeout: timeout)
                    let reply = try connection.call(["SENTINEL", "get-master-addr-by-name", masterName], sentinel)
                    if let primary = primary(from: reply) { return primary }
                    failure = .unreachable(
                        host: seed.host, port: seed.port, reason: "the sentinel knows no primary named \(masterName)")
                } catch .unreachable(let host, let port, let reason) {
                    failure = .unreachable(host: host, port: port, reason: reason)
                }
            }
            throw failure
        }

        /// A connection to the current primary for one of the relay's threads, or `nil` (retried with
        /// backoff by the caller): asks the sentinels, connects, and checks with `ROLE` that the server
        /// is a primary (a sentinel may still name the old one during a failover). The connection
        /// carries the epoch it was made in; an authentication or TLS refusal is reported as an event.
        static func connect(_ core: _RelayCore, masterName: String) -> _Connection? {
            let epoch = core.topology.current
            do {
                let primary = try resolve(
                    core.endpoint, masterName: masterName, tls: core.tls, timeout: core.options.connectTimeout)
                let endpoint = core.endpoint.at(primary)
                guard let connection = core.connect(to: endpoint),
                    (try? isPrimary(connection.call(["ROLE"], endpoint))) == true
                else { return nil }
                connection.node = primary
                connection.epoch = epoch
                core.topology.primary.withLock { $0 = primary }
                return connection
            } catch .authenticationFailed(let text) {
                core.events.emit(.authenticationFailed(text))
            } catch .tlsFailed(let text) {
                core.events.emit(.disconnected(reason: text))
            } catch {}
            return nil
        }

        /// The Sentinel watcher thread: keeps a subscription to `+switch-master` on one sentinel (the
        /// next one in the URL's order when it is lost) and moves the relay to the new primary when
        /// one is announced for `masterName`, or when, on (re)connecting to a sentinel, it names
        /// another primary than the one the relay uses (an announcement missed while disconnected).
        /// Pings its sentinel every `pingInterval` and gives it up after two silent ones. Runs until
        /// the relay stops.
        static func watch(_ core: _RelayCore, masterName: String) {
            let seeds = core.endpoint.seeds
            var next = 0
            var delay = core.options.reconnectDelay.lowerBound
            while !core.stopping.load(ordering: .acquiring) {
                let sentinel = core.endpoint.at(seeds[next % seeds.count])
                next += 1
                guard
                    let connection = try? _Connection.open(
                        sentinel, tls: core.tls, timeout: core.options.connectTimeout),
                    let named = try? primary(
                        from: connection.call(["SENTINEL", "get-master-addr-by-name", masterName], sentinel))
                else {
                    _sleep(core.topology.wake, _jittered(delay))
                    delay = min(delay * 2, core.options.reconnectDelay.upperBound)
                    continue
                }
                delay = core.options.reconnectDelay.lowerBound
                if let used = core.topology.primary.withLock({ $0 }), used != named { moveTo(core, named) }
                connection.append(["SUBSCRIBE", "+switch-master"])
                guard connection.flush() else { continue }
                listen(core, connection, masterName: masterName)
            }
        }

        /// Reads `+switch-master` messages until the connection fails or the relay stops.
        private static func listen(_ core: _RelayCore, _ connection: _Connection, masterName: String) {
            let interval = core.options.pingInterval
            var lastHeard = ContinuousClock.now
            var pinged = false
            while !core.stopping.load(ordering: .acquiring) {
                let now = ContinuousClock.now
                if now - lastHeard >= interval * 2 { return }
                if !pinged && now - lastHeard >= interval {
                    pinged = true
                    connection.append(["PING"])
                    guard connection.flush() else { return }
                }
                let wait = lastHeard + (pinged ? interval * 2 : interval) - now
                let ready = _poll(
                    socket: connection.socket, wake: core.topology.wake, timeoutMilliseconds: _milliseconds(wait))
                if ready.wake { core.topology.wake.drain() }
                guard ready.socket else { continue }
                guard connection.readAvailable() else { return }
                lastHeard = ContinuousClock.now
                pinged = false
                while true {
                    let (raw, ok) = connection.nextReply()
                    guard ok else { return }
                    guard let raw else { break }
                    let reply = _Reply(raw)
                    freeReplyObject(raw)
                    guard let fields = reply.elements, fields.count == 3, fields[0].text == "message",
                        fields[1].text == "+switch-master", let text = fields[2].text,
                        let primary = switched(text, masterName: masterName)
                    else { continue }
                    moveTo(core, primary)
                }
            }
        }

        /// Gives up the connections to the old primary: each thread notices the new epoch and
        /// reconnects through the sentinels.
        private static func moveTo(_ core: _RelayCore, _ primary: _Address) {
            core.topology.move()
            core.publisherWake.wake()
            core.subscriberWake.wake()
        }
    }
#endif
