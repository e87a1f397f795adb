// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Foundation

    /// The message format on a relayed channel (version 4): a magic (`SR4`, or `SS4` when signed), the
    /// sender relay's origin id as 16 lowercase hex digits, the sequence number of the message's first
    /// post (8 bytes, big-endian), a kind byte, the body and, when signed, a 32-byte HMAC-SHA256.
    ///
    /// - kind `t`: one typed post; the body is the payload in the relay's binary `Codable` format
    ///   (`_Codec`).
    /// - kind `p`: one plain post; the body is the `PostObject`'s flag in UTF-8.
    /// - kind `b`: a batch of consecutive posts of one channel, oldest first. The body is the posts'
    ///   kind byte (`t` or `p`), their count as LEB128 (1 to `batchMaxPosts`), then each post's body as
    ///   a LEB128 byte count and the bytes, and nothing after the last. The publisher coalesces posts
    ///   that are already queued when it sends (never waiting for more), up to `batchMaxPosts` posts
    ///   and about `batchMaxBytes` bytes; a post alone goes out as a `t` or `p` message.
    /// - kinds `T` and `P`: one retained post (`post(_:_:retain: true)`), typed or plain, with the
    ///   body of a `t` or `p`; receivers post it retained. Never part of a batch. The same message,
    ///   signed for the key instead of the channel, is the value of the key `<prefix>retained:<name>`
    ///   (see `RetainedOnServer.swift`).
    /// - kind `c`: a clear of the name's retained post (`clearRetained`), no body and no post, but
    ///   numbered like one (it takes a sequence number, so a lost clear counts as one missed post);
    ///   receivers clear the name's retained post. Never part of a batch. The publisher deletes the
    ///   key before it sends it.
    /// - kind `n`: an announcement, no body and no post: its sequence number is the one the sender's
    ///   next post on the channel will carry. A publisher sends one on each channel that was quiet for
    ///   a `pingInterval` (its liveness traffic, pub/sub mode only), so that a receiver counts the
    ///   posts lost at the end of a burst (a tail loss) without waiting for the next post.
    ///
    /// Sequence numbers count the posts a relay published on one channel: the posts of a message are
    /// numbered `seq`, `seq + 1`, …; the next message starts after them. A receiver that knows an
    /// origin's next number sees a gap as missed posts and a lower number as a stale message (one that
    /// a reconnection overtook), which it skips so that order holds.
    ///
    /// The signature, when the relay has a `signingKey`, is the HMAC-SHA256 of the channel name (its
    /// bytes, then one zero byte) followed by every byte of the message before the signature, so that
    /// a message cannot be moved to another channel.
    ///
    /// A receiver checks a whole batch (framing, kinds, every body) before it posts any of it: a batch
    /// with any fault is rejected as one message and none of its posts are made.
    ///
    /// Versions 1 to 3 (`SR1`, `SR2`, `SR3`: no sequence numbers) are foreign. Anything else on a
    /// relayed channel (other publishers, other versions) is foreign: counted in
    /// `RedisRelay.rejectedMessages` and skipped.
    enum _Wire {
        static let magic: [UInt8] = Array("SR4".utf8)
        static let signedMagic: [UInt8] = Array("SS4".utf8)
        static let originLength = 16
        /// Where the sequence number starts, and its length.
        static let sequenceOffset = magic.count + originLength
        static let sequenceLength = 8
        static let headerLength = sequenceOffset + sequenceLength + 1
        /// The length of a signature (HMAC-SHA256).
        static let signatureLength = 32
        static let typed = UInt8(ascii: "t")
        static let plain = UInt8(ascii: "p")
        static let batch = UInt8(ascii: "b")
        static let announcement = UInt8(ascii: "n")
        static let retainedTyped = UInt8(ascii: "T")
        static let retainedPlain = UInt8(ascii: "P")
        /// A clear of the name's retained post (no body).
        static let clearRetained = UInt8(ascii: "c")

        /// Whether `kind` is a retained post's (`T` or `P`).
        @inline(__always)
        static func isRetained(_ kind: UInt8) -> Bool { kind == retainedTyped || kind == retainedPlain }

        /// The kind of an ordinary post of the same payload: `t` for `T`, `p` for `P`, else `kind`.
        @inline(__always)
        static func postKind(_ kind: UInt8) -> UInt8 { isRetained(kind) ? kind | 0x20 : kind }

        /// Whether an outbox item of `kind` always travels alone (never in a batch).
        @inline(__always)
        static func travelsAlone(_ kind: UInt8) -> Bool { isRetained(kind) || kind == clearRetained }
        /// At most this many posts ride one batch message.
        static let batchMaxPosts = 64
        /// A batch takes no further post once its bodies hold this many bytes (a post is never split, and
        /// a post larger than this goes alone).
        static let batchMaxBytes = 16 * 1024

        /// The header of every message a relay with `origin` publishes, without the kind byte, and
        /// with a sequence number of zero (the publisher writes each message's own).
        static func header(origin: UInt64, signed: Bool = false) -> [UInt8] {
            let hex = Array(String(origin, radix: 16).utf8)
            return (signed ? signedMagic : magic) + Array(repeating: UInt8(ascii: "0"), count: originLength - hex.count)
                + hex + Array(repeating: 0, count: sequenceLength)
        }

        /// Writes `sequence` into the message that starts at `start` in `bytes`.
        static func setSequence(_ sequence: UInt64, in bytes: inout [UInt8], at start: Int) {
            var value = sequence
            for index in (0..<sequenceLength).reversed() {
                bytes[start + sequenceOffset + index] = UInt8(truncatingIfNeeded: value)
                value >>= 8
            }
        }

        /// The origin and first sequence number of a message that `parse` accepted (not `.foreign`).
        static func sequence(of bytes: UnsafeRawBufferPointer) -> (origin: UInt64, sequence: UInt64) {
            var origin: UInt64 = 0
            for index in magic.count..<sequenceOffset {
                let byte = bytes[index]
                origin = origin << 4 | UInt64(byte <= UInt8(ascii: "9") ? byte - UInt8(ascii: "0") : byte - 87)
            }
            var sequence: UInt64 = 0
            for index in sequenceOffset..<(sequenceOffset + sequenceLength) {
                sequence = sequence << 8 | UInt64(bytes[index])
            }
            return (origin, sequence)
        }

        /// The announcement of a relay with `header`: no body; its sequence number is written when it is
        /// sent.
        static func announcementMessage(header: [UInt8]) -> [UInt8] {
            message(header: header, kind: announcement, body: [])
        }

        /// A message: `header`, `kind`, `body`.
        static func message(header: [UInt8], kind: UInt8, body: some Collection<UInt8>) -> [UInt8] {
            var message: [UInt8] = []
            message.reserveCapacity(header.count + 1 + body.count)
            message += header
            message.append(kind)
            message += body
            return message
        }

        /// The byte count of the batch message that carries `posts` (whole single-post messages of
        /// one kind, each `headerLength` bytes of header and kind, then the body).
        static func batchLength(_ posts: ArraySlice<_Outgoing>) -> Int {
            var length = headerLength + 1 + _varintLength(UInt64(posts.count))
            for post in posts {
                let body = post.message.count - headerLength
                length += _varintLength(UInt64(body)) + body
            }
            return length
        }

        /// Appends the batch message that carries `posts` (see `batchLength`) to `bytes`: the header
        /// of the first, then each post's body.
        static func appendBatch(_ posts: ArraySlice<_Outgoing>, to bytes: inout [UInt8]) {
            let first = posts[posts.startIndex].message
            bytes.append(contentsOf: first[..<(headerLength - 1)])
            bytes.append(batch)
            bytes.append(first[headerLength - 1])
            _appendVarint(UInt64(posts.count), to: &bytes)
            for post in posts {
                _appendVarint(UInt64(post.message.count - headerLength), to: &bytes)
                bytes.append(contentsOf: post.message[headerLength...])
            }
        }

        /// A batch body whose framing was checked: `count` posts of `kind`, each a LEB128 byte count
        /// and the bytes, filling `entries` exactly. Iterating it yields each post's body, oldest first.
        struct Batch: Sequence {
            let kind: UInt8
            let count: Int
            let entries: UnsafeRawBufferPointer

            func makeIterator() -> Iterator { Iterator(reader: _Reader(bytes: entries)) }

            /// Yields the bodies of a checked batch.
            struct Iterator: IteratorProtocol {
                let reader: _Reader
                var offset = 0

                mutating func next() -> UnsafeRawBufferPointer? {
                    guard offset < reader.bytes.count else { return nil }
                    // Checked when the batch was parsed: cannot fail.
                    return try? reader.run(at: &offset)
                }
            }
        }

        /// What a received message is.
        enum Parsed {
            case mine
            case foreign
            case post(kind: UInt8, body: UnsafeRawBufferPointer)
            case batch(Batch)
            /// An announcement: the origin's next sequence number, read with `sequence(of:)`.
            case announcement
        }

        /// Splits `bytes` into kind and body; `header` is the receiving relay's own header, to
        /// recognise its own posts (and, by its magic, whether messages are signed: a signed message's
        /// last `signatureLength` bytes are left out, and must be checked by the caller). A batch's
        /// framing is checked here (not its bodies): one that does not hold together, or that carries
        /// more than `batchMaxPosts` posts, is foreign.
        static func parse(_ bytes: UnsafeRawBufferPointer, ownHeader header: [UInt8]) -> Parsed {
            let signed = header.first == signedMagic.first && header[1] == signedMagic[1]
            guard bytes.count >= headerLength + (signed ? signatureLength : 0), let base = bytes.baseAddress else {
                return .foreign
            }
            let bytes = UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - (signed ? signatureLength : 0))])
            return header.withUnsafeBytes { header -> Parsed in
                guard memcmp(base, header.baseAddress!, magic.count) == 0 else { return .foreign }
                if memcmp(base + magic.count, header.baseAddress! + magic.count, originLength) == 0 { return .mine }
                for index in magic.count..<(magic.count + originLength) where !_isLowerHex(bytes[index]) {
                    return .foreign
                }
                let kind = bytes[headerLength - 1]
                let body = UnsafeRawBufferPointer(rebasing: bytes[headerLength...])
                if kind == typed || kind == plain || isRetained(kind) { return .post(kind: kind, body: body) }
                if kind == clearRetained { return body.isEmpty ? .post(kind: kind, body: body) : .foreign }
                if kind == announcement { return body.isEmpty ? .announcement : .foreign }
                guard kind == batch, let parsed = parseBatch(body) else { return .foreign }
                return .batch(parsed)
            }
        }

        /// Checks a batch body's framing: a known kind, a count of 1 to `batchMaxPosts`, that many entries whose
        /// lengths stay inside the body, and nothing after them.
        static func parseBatch(_ body: UnsafeRawBufferPointer) -> Batch? {
            let reader = _Reader(bytes: body)
            var offset = 0
            guard let kind = try? reader.byte(at: offset), kind == typed || kind == plain else { return nil }
            offset += 1
            guard let count = try? reader.varint(at: &offset), count >= 1, count <= UInt64(batchMaxPosts) else {
                return nil
            }
            let start = offset
            for _ in 0..<count {
                guard (try? reader.run(at: &offset)) != nil else { return nil }
            }
            guard offset == body.count else { return nil }
            return Batch(kind: kind, count: Int(count), entries: UnsafeRawBufferPointer(rebasing: body[start...]))
        }
    }

    private func _isLowerHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }

    /// The byte count of `value` in LEB128.
    func _varintLength(_ value: UInt64) -> Int { max(1, (64 - value.leadingZeroBitCount + 6) / 7) }

    /// Appends `value` in LEB128 (7 bits a byte, low first, high bit set on all bytes but the last).
    func _appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }
#endif
