// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Synchronization

    /// The broker-independent receive path: what one message received on a relayed channel becomes,
    /// decided from its bytes alone (no socket, no Redis, no thread). The subscriber thread feeds it
    /// every message; the fuzz tests feed it random and mutated ones.
    ///
    /// Every number read from the message is hostile until checked: the length against
    /// `maximumMessageBytes` first, the framing by `_Wire.parse` (batch counts at most
    /// `_Wire.batchMaxPosts`, lengths inside the message), the signature, then the sequence number,
    /// whose arithmetic saturates (`_OriginSequences`).
    enum _Reception {
        /// What to do with a message.
        enum Action: Equatable {
            /// Nothing: the relay's own message, or a stale one (a reconnection overtook it, or a forged
            /// number moved its origin ahead); no counter moves.
            case ignore
            /// Refuse it: counted in `rejectedMessages`, with this reason.
            case reject(String)
            /// It was delivered (`deliver` returned `true`); `missed` posts of its origin were lost before
            /// it (zero when none).
            case delivered(missed: Int)
            /// An announcement of its origin's next sequence number: `missed` posts of that origin were
            /// lost since its last message (zero when none, or when the origin is new).
            case announced(missed: Int)
        }

        /// Checks `bytes`, received on `channel`, and hands an acceptable one to `deliver` (which
        /// checks its kind and bodies, and returns whether it took it). Only a delivered message moves
        /// its origin on in `sequences`: a refused one's posts count as missed when that origin's
        /// next message arrives.
        ///
        /// - Parameters:
        ///   - bytes: The message, as received.
        ///   - channel: The channel it came on (part of what a signature covers).
        ///   - ownHeader: The receiving relay's header (`_Wire.header`): recognises its own messages,
        ///     and by its magic whether messages must be signed.
        ///   - signer: Checks signatures when the relay has a key.
        ///   - maximumMessageBytes: A longer message is refused before anything else is read.
        ///   - sequences: The channel's per-origin state, moved on by a delivered message.
        ///   - stored: The message is a retained post read from the server's key (`channel` is then
        ///     the key): it must be a single retained post, and it moves its origin on only as far as
        ///     `_OriginSequences.stored` says (it was not heard on the channel).
        ///   - deliver: Takes an accepted message; `false` when its kind or a body is wrong.
        /// - Returns: What the caller must count and report.
        static func receive(
            _ bytes: UnsafeRawBufferPointer, channel: UnsafeRawBufferPointer, ownHeader: [UInt8], signer: _Signer?,
            maximumMessageBytes: Int, sequences: inout _OriginSequences, stored: Bool = false,
            deliver: (_Wire.Parsed) -> Bool
        ) -> Action {
            guard bytes.count <= maximumMessageBytes else {
                return .reject("a message of \(bytes.count) bytes, over maximumMessageBytes")
            }
            let parsed = _Wire.parse(bytes, ownHeader: ownHeader)
            switch parsed {
            case .mine: return .ignore
            case .foreign:
                return .reject(signer == nil ? "a malformed or foreign message" : "a malformed or unsigned message")
            case .post, .batch, .announcement: break
            }
            if stored {
                guard case .post(let kind, _) = parsed, _Wire.isRetained(kind) else {
                    return .reject("a stored retained post that is not one")
                }
            }
            if let signer, !signer.isSigned(bytes, channel: channel) {
                return .reject("a message whose signature does not match")
            }
            let (origin, first) = _Wire.sequence(of: bytes)
            if case .announcement = parsed {
                return .announced(missed: sequences.announced(origin: origin, next: first))
            }
            let posts: UInt64
            if case .batch(let batch) = parsed { posts = UInt64(batch.count) } else { posts = 1 }
            guard sequences.isCurrent(origin: origin, first: first) else { return .ignore }
            guard deliver(parsed) else {
                if case .batch = parsed { return .reject("a batch whose posts do not decode as the relayed type") }
                return .reject("a post that does not decode as the relayed type")
            }
            if stored { return .delivered(missed: sequences.stored(origin: origin, sequence: first)) }
            return .delivered(missed: sequences.delivered(origin: origin, first: first, posts: posts))
        }
    }

    /// The next sequence number expected from each origin heard on one channel (see `_Wire`): a pure
    /// state machine, fed by `_Reception.receive` on the subscriber thread.
    ///
    /// Its arithmetic saturates: a forged number near `UInt64.max` moves the origin to the end of the
    /// range (its later messages are stale), never traps. It remembers at most `maxOrigins` origins,
    /// forgetting them all when a new one would pass that (relays long gone), so a flood of forged
    /// origin ids costs bounded memory.
    struct _OriginSequences {
        /// The most origins remembered per channel.
        static let maxOrigins = 4096
        private(set) var expected: [UInt64: UInt64] = [:]
        /// For origins not heard on the channel yet: the number below which their messages are stale
        /// because a retained post read from the server (`stored`) already delivered them. Not a
        /// position: the first message heard after it counts no gap.
        private(set) var floors: [UInt64: UInt64] = [:]

        /// Whether a message of `origin` numbered `first` is not stale (below the expected number).
        func isCurrent(origin: UInt64, first: UInt64) -> Bool {
            guard let known = expected[origin] else { return first >= floors[origin] ?? 0 }
            return first >= known
        }

        /// Records a retained post of `origin` numbered `sequence`, read from the server's key (not
        /// heard on the channel). For an origin heard before, it is a delivered message (the posts
        /// between are a gap, returned). For one not heard yet, the posts before it were never this
        /// relay's to receive: it only makes that post and older ones stale (the same post arriving
        /// on the channel too is skipped), and no gap is counted.
        mutating func stored(origin: UInt64, sequence: UInt64) -> Int {
            if expected[origin] != nil { return delivered(origin: origin, first: sequence, posts: 1) }
            if floors.count >= Self.maxOrigins { floors.removeAll() }
            let (next, overflow) = sequence.addingReportingOverflow(1)
            floors[origin] = overflow ? .max : next
            return 0
        }

        /// Records an announcement that `origin`'s next post is numbered `next`; returns how many posts
        /// of `origin` were lost since its last delivered message (a tail loss; at most `Int.max`). An
        /// origin heard first is remembered from there (no loss); an announcement behind what was
        /// already delivered (a reconnection overtook it) changes nothing.
        mutating func announced(origin: UInt64, next: UInt64) -> Int {
            guard let known = expected[origin] else {
                if expected.count >= Self.maxOrigins { expected.removeAll() }
                expected[origin] = max(next, floors.removeValue(forKey: origin) ?? 0)
                return 0
            }
            guard next > known else { return 0 }
            expected[origin] = next
            return Int(clamping: next - known)
        }

        /// Records a delivered message of `posts` posts numbered from `first`; returns how many posts of
        /// `origin` were lost before it (a gap; zero for an origin heard first), at most `Int.max`.
        mutating func delivered(origin: UInt64, first: UInt64, posts: UInt64) -> Int {
            let known = expected[origin]
            if known == nil && expected.count >= Self.maxOrigins { expected.removeAll() }
            if known == nil { floors[origin] = nil }
            let (next, overflow) = first.addingReportingOverflow(posts)
            expected[origin] = overflow ? .max : next
            guard let known, first > known else { return 0 }
            return Int(clamping: first - known)
        }
    }

    extension Atomic where Value == Int {
        /// Adds `amount` (not negative), stopping at `Int.max` instead of trapping: for counters whose
        /// increments come from the wire.
        func addSaturating(_ amount: Int) {
            var current = load(ordering: .relaxed)
            while true {
                let (sum, overflow) = current.addingReportingOverflow(amount)
                let (exchanged, original) = compareExchange(
                    expected: current, desired: overflow ? .max : sum, ordering: .relaxed)
                if exchanged { return }
                current = original
            }
        }
    }
#endif
