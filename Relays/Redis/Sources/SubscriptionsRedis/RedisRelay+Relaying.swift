// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Foundation
    import Subscriptions

    extension RedisRelay {
        // MARK: Relaying

        /// Relays `topic` both ways: local posts of it are published to Redis in a compact
        /// binary encoding of its `Codable` form, and posts
        /// published by other relays on its channel are decoded and posted on ``center``.
        ///
        /// The relay subscribes to `topic` on ``center`` with ``Delivery/immediate`` delivery, so a post
        /// is queued for Redis before `post` returns; it receives typed posts and plain posts whose data
        /// is a `Payload`. Received posts are made on the relay's subscriber thread.
        ///
        /// - Returns: The token; it keeps the relay alive. Cancelling or dropping it stops both
        ///   directions; the channel is unsubscribed. Until the server confirms the subscription, messages from other processes
        ///   may be missed: see ``waitUntilReady(timeout:)``.
        /// - Parameters:
        ///   - topic: The topic to relay.
        ///   - fileID: The call site, recorded for the center's `subscriptionSites(for:)`; leave the
        ///     default.
        ///   - line: The call site's line; leave the default.
        /// - Precondition: the relay does not relay `topic`'s name already (it would publish every post
        ///   twice); the call stops the process with a message naming the topic.
        public func relay<Payload: Codable & Sendable>(
            _ topic: Topic<Payload>, fileID: String = #fileID, line: Int = #line
        ) -> Subscription {
            let inbound = _Inbound(kind: _Wire.typed) { [weak center] body, retained in
                guard let value = try? _Codec.decode(Payload.self, from: body) else { return nil }
                if retained { return { [weak center] in center?.post(topic, value, retain: true) } }
                return { [weak center] in center?.post(topic, value) }
            } decodeBatch: { [weak center] batch in
                var values: [Payload] = []
                values.reserveCapacity(batch.count)
                for body in batch {
                    guard let value = try? _Codec.decode(Payload.self, from: body) else { return nil }
                    values.append(value)
                }
                return { [weak center, values] in if let center { for value in values { center.post(topic, value) } } }
            } clear: { [weak center] in
                center?.clearRetained(topic)
            }
            let lease = core.bind(topic.name, inbound, owner: self)
            return _RelayRegistration.token(lease, name: topic.name) {
                center.subscribe(topic, fileID: fileID, line: line) { [lease] payload in
                    guard let kind = lease.outboundKind(_Wire.typed) else { return }
                    // One array per post: header, kind and body written straight into it, then queued.
                    var message = lease.core.header
                    message.reserveCapacity(64)
                    message.append(kind)
                    do {
                        try _Codec.encode(payload, into: &message)
                    } catch {
                        lease.core.drops.encodingFailed.add(1, ordering: .relaxed)
                        return
                    }
                    lease.core.enqueue(channel: lease.channelBytes, message: message)
                }
            }
        }

        /// Relays the plain name `name` both ways: the ``PostObject/flag`` of local posts is published,
        /// and posts from other relays arrive as a ``PostObject`` with that flag and no data (an object
        /// cannot cross processes).
        ///
        /// The relay subscribes to `name` on ``center`` with ``Delivery/immediate`` delivery. Received
        /// posts are made on the relay's subscriber thread.
        ///
        /// - Returns: The token; it keeps the relay alive. Cancelling or dropping it stops both
        ///   directions; the channel is unsubscribed.
        /// - Parameters:
        ///   - name: The name to relay.
        ///   - fileID: The call site, recorded for the center's `subscriptionSites(for:)`; leave the
        ///     default.
        ///   - line: The call site's line; leave the default.
        /// - Precondition: the relay does not relay `name` already; the call stops the process with a
        ///   message naming it.
        public func relay(_ name: String, fileID: String = #fileID, line: Int = #line) -> Subscription {
            let inbound = _Inbound(kind: _Wire.plain) { [weak center] body, retained in
                guard let flag = String(validating: body, as: UTF8.self) else { return nil }
                if retained { return { [weak center] in center?.post(name, flag: flag, retain: true) } }
                return { [weak center] in center?.post(name, flag: flag) }
            } decodeBatch: { [weak center] batch in
                var flags: [String] = []
                flags.reserveCapacity(batch.count)
                for body in batch {
                    guard let flag = String(validating: body, as: UTF8.self) else { return nil }
                    flags.append(flag)
                }
                return { [weak center, flags] in if let center { for flag in flags { center.post(name, flag: flag) } } }
            } clear: { [weak center] in
                center?.clearRetained(name)
            }
            let lease = core.bind(name, inbound, owner: self)
            return _RelayRegistration.token(lease, name: name) {
                center.subscribe(name, fileID: fileID, line: line) { [lease] post in
                    guard let kind = lease.outboundKind(_Wire.plain) else { return }
                    lease.send(kind: kind, body: post.flag.utf8)
                }
            }
        }
    }
#endif
