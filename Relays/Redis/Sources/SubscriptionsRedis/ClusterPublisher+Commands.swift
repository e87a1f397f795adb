// What the cluster publisher does with its commands: routes each message to the primary that
// owns its slot, reads the replies, sends redirected or unanswered commands again, and gives a
// failed node's connection up (see `_runClusterPublisher`).
// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    extension _ClusterPublisher {
        /// Sends each message of the batch to its channel's owner; messages whose owner has no
        /// connection are dropped as disconnected, or in history mode put back in the outbox.
        mutating func route(_ batch: [_Outgoing], _ counts: [Int], now: ContinuousClock.Instant) {
            var perNode: [_Address: (batch: [_Outgoing], counts: [Int])] = [:]
            var start = 0
            var unroutable = 0
            var held: [_Outgoing] = []
            for count in counts {
                let channel = batch[start].channel
                let owner: _Address?
                if let cached = owners[channel] {
                    owner = cached
                } else {
                    owner = map?.owner(of: _ClusterSlot.of(channel))
                    if let owner { owners[channel] = owner }
                }
                let kind = batch[start].message[_Wire.headerLength - 1]
                if count == 1, _Wire.travelsAlone(kind) {
                    reportUnstored(channel)
                }
                if let owner, nodes[owner] != nil {
                    perNode[owner, default: ([], [])].batch.append(contentsOf: batch[start..<(start + count)])
                    perNode[owner, default: ([], [])].counts.append(count)
                } else if recovers {
                    held.append(contentsOf: batch[start..<(start + count)])
                } else {
                    // Never numbered, as the standalone publisher's posts made while disconnected:
                    // counted here, not as a gap at the receivers. A clear is no post.
                    unroutable += kind == _Wire.clearRetained ? 0 : count
                }
                start += count
            }
            core.drops.disconnected.add(unroutable, ordering: .relaxed)
            if !held.isEmpty {
                // Not numbered yet: they wait at the head of the queue, in order, for their primary.
                core.outbox.withLock { $0.putBack(held) }
                holdUntil = now + .milliseconds(100)
                stale = true
            }
            for (address, work) in perNode {
                let connection = nodes[address]!.connection
                // Each command is owed a reply, counted for its posts (none for a retained post's SET
                // or DEL), and its bytes are kept, to be sent again if the node declines it: a SET or
                // DEL is a command of its own, in its message's slot, so it is redirected, and sent
                // again, with it.
                if nodes[address]!.inFlight.commands == 0 { nodes[address]!.progress = now }
                let first = connection.pendingOutputCount
                var commands: [(end: Int, posts: Int)] = []
                connection.appendPublishes(
                    work.batch, counts: work.counts, signer: core.signer, sharded: true,
                    historyLength: core.options.historyLength,
                    retainedKeys: retainedKeys,
                    command: { posts in commands.append((connection.pendingOutputCount - first, posts)) },
                    sequence: { channel, posts in
                        let first = sequences[channel, default: 0]
                        sequences[channel] = first &+ UInt64(posts)
                        return first
                    })
                nodes[address]!.record(connection.pendingOutput(from: first), commands: commands)
                nodes[address]!.lastSent = now
                if !connection.flush() { fail(address, "the connection failed while sending") }
            }
        }

        /// Reports, once per name, a retained post or clear of a name that has no key in its
        /// channel's slot (see `_RetainedOnServer.clusterKey`): it is relayed, not stored.
        mutating func reportUnstored(_ channel: [UInt8]) {
            guard !unstored.contains(channel), retainedKeys.key(channel) == nil else { return }
            unstored.insert(channel)
            let name = String(decoding: channel.dropFirst(retainedKeys.prefixLength), as: UTF8.self)
            _reject(
                core,
                "the retained post of \"\(name)\" is relayed but not kept on the server: its braces leave no key "
                    + "<prefix>retained:… in the slot of its channel")
        }

        /// Reports a retained post's `SET` (or a clear's `DEL`) that the cluster declined for good:
        /// the value stored in `key` stays as it was (its post, right behind it, is counted apart).
        func reportUnstored(key: String, _ error: String) {
            _reject(core, "the retained value in \"\(key)\" was not updated on the server: \(error)")
        }

        /// Reads the replies one node sent.
        mutating func read(_ address: _Address, now: ContinuousClock.Instant) {
            guard var node = nodes[address] else { return }
            var published = 0
            var refused = 0
            var unexpected = false
            var replies = 0
            var refusal: String?
            var redirected: [_Redirect] = []
            var again: [(kept: _Kept, redirect: _Redirect?)] = []
            var waited = false
            var unstored: [(key: String, error: String)] = []
            let open = node.connection.readPublishReplies { error in
                guard let posts = node.inFlight.pop() else {
                    unexpected = true
                    return
                }
                let kept = node.sent.removeFirst(declined: error != nil)
                replies += 1
                if let error {
                    if let redirect = _Redirect(error) {
                        redirected.append(redirect)
                        if var kept, kept.attempts < 5 {
                            kept.attempts += 1
                            again.append((kept, redirect))
                            return
                        }
                        if let key = kept?.storedKey { unstored.append((key, error)) }
                    } else if var kept, _ClusterHistoryPlan.isTransient(error), kept.waits < 300 {
                        kept.waits += 1
                        again.append((kept, nil))
                        waited = true
                        return
                    } else {
                        refusal = refusal ?? error
                        // Waited out for 30 s: a refusal for good (reported), not a passing state.
                        if _ClusterHistoryPlan.isTransient(error), let key = kept?.storedKey {
                            unstored.append((key, error))
                        }
                    }
                    refused += posts
                } else {
                    published += posts
                }
            }
            if !again.isEmpty {
                retries += again
                draining.insert(address)
            }
            if waited {
                // The cluster is down until a replica took over: ask for the map again, and wait.
                retryNotBefore = now + .milliseconds(100)
                stale = true
            }
            for (key, error) in unstored { reportUnstored(key: key, error) }
            if let refusal, !node.refusalReported {
                node.refusalReported = true
                core.events.emit(.permissionDenied(refusal))
            }
            if replies > 0 { node.progress = now }
            if !redirected.isEmpty {
                // Bounded: every command in flight on a moved slot may answer one.
                redirects = Array((redirects + redirected).suffix(256))
                stale = true
            }
            core.published.add(published, ordering: .relaxed)
            core.drops.refused.add(refused, ordering: .relaxed)
            nodes[address] = node
            if !open {
                fail(address, "the server closed the connection")
            } else if unexpected {
                fail(address, "the server sent a reply nobody asked for")
            }
        }

        /// Sends the redirected commands again, in the order their replies came: to the node an
        /// `-ASK` names (after `ASKING`), or to the slot's owner in the map read since a `-MOVED`,
        /// `CLUSTERDOWN` or `TRYAGAIN`.
        /// One whose node has no connection is refused.
        mutating func resend(now: ContinuousClock.Instant) {
            let pending = retries
            retries = []
            var touched: Set<_Address> = []
            for (kept, redirect) in pending {
                let asking = redirect?.asking == true ? redirect?.node : nil
                guard let target = asking ?? map?.owner(of: kept.slot), let connection = nodes[target]?.connection
                else {
                    if asking == nil && kept.waits < 300 {
                        // Its primary has no connection (yet): wait for the map and try again.
                        var kept = kept
                        kept.waits += 1
                        retries.append((kept, nil))
                        retryNotBefore = now + .milliseconds(100)
                        stale = true
                    } else if kept.lostConnection {
                        core.drops.unacknowledged.add(kept.posts, ordering: .relaxed)
                    } else {
                        core.drops.refused.add(kept.posts, ordering: .relaxed)
                        if let key = kept.storedKey { reportUnstored(key: key, "no connection to the slot's owner") }
                    }
                    continue
                }
                if nodes[target]!.inFlight.commands == 0 { nodes[target]!.progress = now }
                if asking != nil {
                    connection.append(["ASKING"])
                    nodes[target]!.inFlight.push(0)
                    nodes[target]!.sent.appendMark()
                }
                connection.appendFormatted(kept.bytes)
                nodes[target]!.inFlight.push(kept.posts)
                nodes[target]!.sent.append(kept)
                nodes[target]!.lastSent = now
                touched.insert(target)
            }
            for address in touched where nodes[address] != nil {
                if !nodes[address]!.connection.flush() { fail(address, "the connection failed while sending") }
            }
        }

        /// Gives a node's connection up: its posts in flight are unacknowledged, the map is read
        /// again (a replica may take over), and the loss is announced naming the node.
        mutating func fail(_ address: _Address, _ reason: String) {
            forget(address, keep: recovers && !core.stopping.load(ordering: .acquiring))
            needsConnect = true
            retryAt[address] = ContinuousClock.now + _jittered(delay)
            stale = true
            announce(reason: "\(address): \(reason)")
        }

        /// Drops a node's connection, counting its posts in flight unacknowledged; with `keep`
        /// (history mode), its commands in flight are sent again instead (see `resend`), before any
        /// new message.
        mutating func forget(_ address: _Address, keep: Bool = false) {
            guard let node = nodes.removeValue(forKey: address) else { return }
            guard keep else {
                core.drops.unacknowledged.add(node.inFlight.posts, ordering: .relaxed)
                return
            }
            for var kept in node.sent.remaining {
                kept.lostConnection = true
                retries.append((kept, nil))
            }
            retryNotBefore = ContinuousClock.now + .milliseconds(100)
        }
    }
#endif
