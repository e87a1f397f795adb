// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    /// The id of an entry of a history stream: `<milliseconds>-<sequence>`, two unsigned 64-bit
    /// numbers, ordered by milliseconds then sequence. What a broker calls an offset: any broker whose
    /// history hands out increasing ids can use it.
    struct _StreamID: Comparable, Hashable, Sendable, CustomStringConvertible {
        var milliseconds: UInt64
        var sequence: UInt64

        /// `0-0`: before every entry (reading from it reads the whole history).
        static let zero = _StreamID(milliseconds: 0, sequence: 0)

        init(milliseconds: UInt64, sequence: UInt64) {
            self.milliseconds = milliseconds
            self.sequence = sequence
        }

        /// Parses `<digits>-<digits>`; `nil` for anything else (an empty part, another byte, a number
        /// past `UInt64.max`): an id read from the wire is checked like every other number.
        init?(_ bytes: UnsafeRawBufferPointer) {
            var parts: [UInt64] = [0]
            var digits = 0
            for byte in bytes {
                if byte == UInt8(ascii: "-") {
                    guard digits > 0, parts.count == 1 else { return nil }
                    parts.append(0)
                    digits = 0
                    continue
                }
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                let (times, overflow) = parts[parts.count - 1].multipliedReportingOverflow(by: 10)
                let (sum, carry) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
                guard !overflow, !carry else { return nil }
                parts[parts.count - 1] = sum
                digits += 1
            }
            guard parts.count == 2, digits > 0 else { return nil }
            self.init(milliseconds: parts[0], sequence: parts[1])
        }

        /// Parses the text form; see the other `init?`.
        init?(_ text: String) {
            let bytes = Array(text.utf8)
            guard let id = bytes.withUnsafeBytes({ _StreamID($0) }) else { return nil }
            self = id
        }

        var description: String { "\(milliseconds)-\(sequence)" }

        static func < (lhs: _StreamID, rhs: _StreamID) -> Bool {
            (lhs.milliseconds, lhs.sequence) < (rhs.milliseconds, rhs.sequence)
        }
    }

    /// Recovery bookkeeping of a receiving relay in history mode (`Options.historyLength > 0`): for
    /// each relayed channel, the id of the last history entry read, kept across reconnections, so that
    /// a new connection reads on from there and delivers what the relay missed, each entry once.
    ///
    /// A pure state machine (no socket, no broker, no thread), fed with events by the subscriber
    /// thread and tested alone:
    /// - `sync(wanted:)`: the relayed channels changed;
    /// - `connectionLost()`: the connection ended; positions are kept;
    /// - `tip(_:last:)`: the newest id of a channel's history when asked (`nil`: no history);
    /// - `entry(_:id:)`: an entry was read; whether it is new, and whether it is caught up;
    /// - `recovered(posts:)`: a caught-up entry's posts were delivered;
    /// - `readFinished(entries:limit:)`: a read returned; reports a finished catch-up.
    ///
    /// A newly relayed channel asks for its tip first and starts there: it receives what is added
    /// from then on, not the older history. After a connection loss every channel asks for its tip
    /// again: the entries between its position and that tip are the ones it missed (caught up,
    /// counted in `recoveredPosts`); the catch-up of a channel ends with the first read that returns
    /// fewer entries than asked for it. A tip older than the position means the history was
    /// recreated (a server restarted without persistence): the channel reads it from the start,
    /// where sequence numbers skip whatever was already delivered.
    struct _HistoryCursors {
        /// One channel's state.
        struct Cursor: Equatable {
            /// The id of the last entry read; `nil` until the first tip.
            var position: _StreamID?
            /// While catching up after a reconnection: the tip of the history when the connection
            /// began. Entries up to it were missed; they are counted as recovered.
            var catchUpTo: _StreamID?
            /// Whether the channel must ask for its tip before it is read.
            var needsTip = true
        }

        /// What an entry read is.
        enum Entry: Equatable {
            /// Already read (at or before the position): skip it.
            case old
            /// Added while the relay was connected.
            case live
            /// Added while the relay was away: a recovered entry.
            case caughtUp
        }

        private(set) var cursors: [String: Cursor] = [:]
        /// How many entries per channel a read may ask for (see `_HistoryReadCap`).
        var readCap = _HistoryReadCap()
        /// Posts delivered by the catch-up in progress.
        private var recoveredPosts = 0
        /// Whether a catch-up is in progress (some channel had missed entries).
        private var catchingUp = false

        /// Relays exactly the channels of `wanted`: new ones ask for their tip, others are forgotten.
        mutating func sync(wanted: Set<String>) {
            for channel in cursors.keys where !wanted.contains(channel) { cursors[channel] = nil }
            for channel in wanted where cursors[channel] == nil { cursors[channel] = Cursor() }
        }

        /// The connection ended: every channel asks for its tip again on the next one; positions stay.
        mutating func connectionLost() {
            for channel in cursors.keys {
                cursors[channel]?.needsTip = true
                cursors[channel]?.catchUpTo = nil
            }
        }

        /// Only `channels` lost their reading (in a cluster: they moved to another node, or their
        /// node's connection ended): each asks for its tip again, where it is read now; positions
        /// stay, so a moved channel reads on from where it stopped.
        mutating func lost(_ channels: some Sequence<String>) {
            for channel in channels {
                guard let cursor = cursors[channel] else { continue }
                cursors[channel] = Cursor(position: cursor.position, catchUpTo: nil, needsTip: true)
            }
        }

        /// The channels that must ask for their tip, in name order.
        var tipsNeeded: [String] { cursors.filter(\.value.needsTip).keys.sorted() }

        /// Whether `channel` knows where to read from (the subscription's readiness).
        func isReady(_ channel: String) -> Bool { cursors[channel].map { !$0.needsTip } ?? false }

        /// Records the newest id of `channel`'s history (`nil`: it has none).
        mutating func tip(_ channel: String, last: _StreamID?) {
            guard var cursor = cursors[channel] else { return }
            cursor.needsTip = false
            if let position = cursor.position {
                if let last, last < position {
                    // Recreated: everything in it is new to this relay.
                    cursor.position = .zero
                    cursor.catchUpTo = last
                } else if let last, last > position {
                    cursor.catchUpTo = last
                }
                if cursor.catchUpTo != nil { catchingUp = true }
            } else {
                cursor.position = last ?? .zero
            }
            cursors[channel] = cursor
        }

        /// Where to read each channel from, in name order; `nil` while a tip is owed (read once all
        /// are known, so that no read skips a channel) or when no channel is relayed.
        var readPositions: [(channel: String, after: _StreamID)]? {
            guard !cursors.isEmpty, !cursors.values.contains(where: \.needsTip) else { return nil }
            return cursors.keys.sorted().map { ($0, cursors[$0]!.position ?? .zero) }
        }

        /// Where to read `channels` from (those relayed), in name order; `nil` while one of them owes
        /// its tip or none is relayed. In a cluster, the channels of one slot on one node.
        func readPositions(of channels: some Sequence<String>) -> [(channel: String, after: _StreamID)]? {
            let relayed = Set(channels).filter { cursors[$0] != nil }
            guard !relayed.isEmpty, !relayed.contains(where: { cursors[$0]!.needsTip }) else { return nil }
            return relayed.sorted().map { ($0, cursors[$0]!.position ?? .zero) }
        }

        /// An entry `id` of `channel` was read: moves the position past it and says what it is. An id
        /// at or before the position (a read that raced a reconnection) is `.old` and changes nothing.
        mutating func entry(_ channel: String, id: _StreamID) -> Entry {
            guard var cursor = cursors[channel], !cursor.needsTip else { return .old }
            if let position = cursor.position, id <= position { return .old }
            cursor.position = id
            var kind = Entry.live
            if let catchUpTo = cursor.catchUpTo {
                if id <= catchUpTo { kind = .caughtUp }
                if id >= catchUpTo { cursor.catchUpTo = nil }
            }
            cursors[channel] = cursor
            return kind
        }

        /// `posts` posts of caught-up entries were delivered (ignored when no catch-up is in progress).
        mutating func recovered(posts: Int) {
            guard catchingUp else { return }
            let (sum, overflow) = recoveredPosts.addingReportingOverflow(posts)
            recoveredPosts = overflow ? .max : sum
        }

        /// A read of the channels `read` (`nil`: all) returned `entries[channel]` entries for each
        /// (absent: none), asking for at most `limit` per channel: a channel read that got fewer has
        /// read its whole history, so its catch-up is over. Returns the posts recovered once every
        /// channel's catch-up is over (and resets the count), else `nil`.
        mutating func readFinished(entries: [String: Int], limit: Int, read: Set<String>? = nil) -> Int? {
            for (channel, cursor) in cursors
            where cursor.catchUpTo != nil && read?.contains(channel) ?? true && entries[channel, default: 0] < limit {
                cursors[channel]?.catchUpTo = nil
            }
            guard catchingUp, !cursors.values.contains(where: { $0.catchUpTo != nil }) else { return nil }
            catchingUp = false
            defer { recoveredPosts = 0 }
            return recoveredPosts
        }
    }
#endif
