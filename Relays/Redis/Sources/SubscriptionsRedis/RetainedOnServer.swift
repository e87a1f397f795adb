// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Subscriptions

    /// Retained posts across processes: the last retained post of each relayed name is kept on the
    /// server, as the value of the key `<prefix>retained:<name>`, so that a relay that starts later
    /// posts it on its center as retained.
    ///
    /// - **Storing.** The center tells the relay of each retained post of a relayed name through a
    ///   `_RetainedWatcher` (the core's `package` hook): the watcher marks the thread while the post is
    ///   delivered, so the relay's own handler queues it with the retained kind (`T` or `P`, see
    ///   `_Wire`). The publisher sends such a post alone, as `SET <key> <message>` (the message signed
    ///   for the key, so that it cannot be moved to a channel or another key) followed by its
    ///   `PUBLISH` (or `XADD`) with the same sequence number. Receivers that hear it post it retained.
    /// - **Clearing.** `clearRetained` on the center queues a clear (kind `c`): the publisher sends
    ///   `DEL <key>`, then the clear on the channel (or into the stream), numbered like a post;
    ///   relays that hear it clear the name's retained post on their center (not echoed back), and
    ///   relays that start later find nothing.
    /// - **Reading.** When a relayed name's subscription is confirmed (pub/sub mode: on each
    ///   (re)subscription, on a short-lived extra connection, since a subscribed connection may not
    ///   read keys; history mode: once per name, right after its first tip, on the reading
    ///   connection) the relay reads the key with `GETRANGE key 0 maximumMessageBytes` (so a huge
    ///   value is never buffered whole) and passes the value through the checks of every message
    ///   (size, framing, signature for the key, kind) before posting it retained. Its origin's
    ///   sequence state is moved by `_OriginSequences.stored`, so the same post heard on the
    ///   channel too is skipped.
    /// - **Order.** The key is read after the subscription is confirmed (or after the tip), and a
    ///   publisher stores before it publishes: a retained post is either in the key when it is read,
    ///   or heard on the channel afterwards. The last writer wins, per name, on the server; on a
    ///   center, whatever was posted retained last (a local post or one from another relay).
    /// - **Cluster.** The key must lie in the hash slot of the channel `<prefix><name>`: then the
    ///   `SET` or `DEL` goes to the slot's owner on the same connection as the name's `SPUBLISH` or
    ///   `XADD`, right before it (and, redirected, is sent again with it), and the key is read on
    ///   the node that serves the name. See `clusterKey(channel:prefixLength:)` for which key.
    ///   Pub/sub mode reads it on a short-lived connection to the node that confirmed the
    ///   `SSUBSCRIBE` (closed once the read that needed it is over: at most 2 connections per
    ///   primary stay open); history mode on the node's reading connection, after the first tip.
    enum _RetainedOnServer {
        /// The key of the retained post of the channel `<prefix><name>`: `<prefix>retained:<name>`.
        static func key(channel: [UInt8], prefixLength: Int) -> [UInt8] {
            var key: [UInt8] = []
            key.reserveCapacity(channel.count + marker.count)
            key += channel[..<prefixLength]
            key += marker
            key += channel[prefixLength...]
            return key
        }

        /// The key of the retained post of the channel `<prefix><name>` in a cluster, where it must
        /// share the channel's hash slot, or `nil` when no key does:
        /// - `<prefix>retained:<name>`, the standalone key, when it already hashes to the channel's
        ///   slot (the prefix or the name holds a `{hash tag}` that both share): a key a reader of
        ///   the standalone layout would look for, and no brace is added to a name that chose its
        ///   slot itself;
        /// - else `<prefix>retained:{<prefix><name>}`, when that hashes to the channel's slot: its
        ///   hash tag is the channel itself, which is the case for every name without braces (the
        ///   common one: `retained:` holds none, so the first `{` is the one added, and the first
        ///   `}` after it the added one);
        /// - else `nil`: a name whose braces defeat both (such as `a}b`, whose `}` closes the added
        ///   tag early). Its retained posts are relayed but not stored, which the publisher reports
        ///   once per name (`.rejected(reason:)`), and nothing is read for it.
        ///
        /// Both keys start with `<prefix>retained:`, so the README's ACL pattern
        /// `~<prefix>retained:*` covers them. Checked with the relay's own `_ClusterSlot.of`, the
        /// function that routes the channel.
        /// - Complexity: O(n) in the channel's length (at most three CRC16s).
        static func clusterKey(channel: [UInt8], prefixLength: Int) -> [UInt8]? {
            let slot = _ClusterSlot.of(channel)
            let plain = key(channel: channel, prefixLength: prefixLength)
            if _ClusterSlot.of(plain) == slot { return plain }
            var tagged: [UInt8] = []
            tagged.reserveCapacity(prefixLength + marker.count + channel.count + 2)
            tagged += channel[..<prefixLength]
            tagged += marker
            tagged.append(UInt8(ascii: "{"))
            tagged += channel
            tagged.append(UInt8(ascii: "}"))
            return _ClusterSlot.of(tagged) == slot ? tagged : nil
        }

        private static let marker = Array("retained:".utf8)

        /// The watcher of one relayed name: marks the thread while a local retained post is delivered
        /// (not while an inbound one is: that one must not be published back), and queues a clear (the
        /// key's `DEL`, then the clear message) on a local `clearRetained`. It holds the core and the
        /// binding weakly: the center keeps it.
        static func watcher(_ core: _RelayCore, _ inbound: _Inbound, channel: [UInt8]) -> _RetainedWatcher {
            _RetainedWatcher(
                posting: { [weak inbound] deliver in
                    guard let inbound, _ThreadMarker.current != inbound.marker else { return deliver() }
                    return _ThreadMarker.with(inbound.retainedMarker) { deliver() }
                },
                cleared: { [weak core, weak inbound] in
                    guard let core, let inbound, _ThreadMarker.current != inbound.marker,
                        inbound.isBound.load(ordering: .acquiring)
                    else { return }
                    core.enqueueClear(channel: channel)
                })
        }
    }

    /// Which key holds a channel's retained post: `<prefix>retained:<name>`, or in a cluster
    /// `_RetainedOnServer.clusterKey(channel:prefixLength:)`. A value, so that the publishers pass it
    /// to `appendPublishes` without allocating.
    struct _RetainedKeys {
        /// The byte count of the channel prefix.
        let prefixLength: Int
        let cluster: Bool

        /// The key of `channel`'s retained post; `nil` in a cluster when no key lies in its slot.
        func key(_ channel: [UInt8]) -> [UInt8]? {
            cluster
                ? _RetainedOnServer.clusterKey(channel: channel, prefixLength: prefixLength)
                : _RetainedOnServer.key(channel: channel, prefixLength: prefixLength)
        }
    }

    extension _RelayCore {
        /// Where this relay keeps retained posts (see `_RetainedKeys`).
        var retainedKeys: _RetainedKeys {
            _RetainedKeys(prefixLength: prefix.utf8.count, cluster: options.topology == .cluster)
        }

        /// Queues a clear of `channel`'s retained post (the key's `DEL`, then the clear message), after
        /// the posts queued before it. A clear is no post: never counted in `droppedPosts`; one made
        /// while the publisher is disconnected (in pub/sub mode; in history mode it waits, as posts
        /// do), or with a full queue, does not reach the server.
        func enqueueClear(channel: [UInt8]) {
            let message = _Wire.message(header: header, kind: _Wire.clearRetained, body: [])
            let limit = options.maxQueuedPosts
            let wake = outbox.withLock { outbox -> Bool in
                guard outbox.accepts, outbox.count < limit else { return false }
                outbox.bytes += message.count
                outbox.items.append(_Outgoing(channel: channel, message: message))
                let wake = outbox.writerWaiting
                outbox.writerWaiting = false
                return wake
            }
            if wake { publisherWake.wake() }
        }

        /// The `GETRANGE` that reads `channel`'s retained key, at most one byte past
        /// `maximumMessageBytes` (so that a longer value is seen as such, never buffered whole);
        /// `nil` for a name of a cluster that has no key (see `_RetainedOnServer.clusterKey`).
        func storedRead(_ channel: String) -> [[UInt8]]? {
            guard let key = retainedKeys.key(Array(channel.utf8)) else { return nil }
            return [Array("GETRANGE".utf8), key, [UInt8(ascii: "0")], Array("\(options.maximumMessageBytes)".utf8)]
        }

        /// Handles the value read from `channel`'s retained key (`nil`: a value the connection's gate
        /// kept out, `oversized` bytes long): nothing when empty (no key), else checked and posted
        /// retained like a message (see `_accept`).
        func acceptStored(_ channel: String, _ value: UnsafeRawBufferPointer?, oversized: Int? = nil) {
            guard let inbound = channels.withLock({ $0.bindings[channel] }) else { return }
            guard let value else {
                _reject(self, "a stored retained post of \(oversized ?? 0) bytes, over maximumMessageBytes")
                return
            }
            guard !value.isEmpty else { return }
            guard value.count <= options.maximumMessageBytes else {
                _reject(self, "a stored retained post over maximumMessageBytes")
                return
            }
            guard let key = retainedKeys.key(Array(channel.utf8)) else { return }
            key.withUnsafeBytes { key in _ = _accept(self, inbound, value, channel: key, stored: true) }
        }

        /// Pub/sub mode: reads `channel`'s retained key on `side`, a connection opened on first use
        /// (a subscribed connection may not read keys) to the server, or in a cluster to `node`, the
        /// one that confirmed the name's `SSUBSCRIBE` (it owns the key's slot), and handles it. A
        /// connection that fails is dropped (the key is read again on the next subscription); a
        /// refusal is a `.permissionDenied` event, but not a redirection or the cluster's passing
        /// state (the slot moved or is being taken over: the name is subscribed again, and its key
        /// read again, where it is served next).
        func readStored(_ channel: String, on side: inout _Connection?, node: _Address? = nil) {
            guard let read = storedRead(channel) else { return }
            if side == nil { side = node.map { _ClusterNodes.connect(self, $0) } ?? connect() }
            guard let connection = side else { return }
            let reply: _Reply
            do {
                reply = try connection.call(bytes: read, node.map { endpoint.at($0) } ?? endpoint)
            } catch {
                side = nil
                return
            }
            switch reply {
            case .string(let bytes): bytes.withUnsafeBytes { acceptStored(channel, $0) }
            case .error(let text):
                if _ClusterHistoryPlan.isRefusal(text) { events.emit(.permissionDenied(text)) }
            default: _reject(self, "a stored retained post that is not a string")
            }
        }
    }
#endif
