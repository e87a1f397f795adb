// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    /// Sits between the subscriber connection's socket and hiredis's reply reader, so that a message
    /// is measured before it is buffered: hiredis keeps a whole bulk string in memory until it is
    /// complete, so a 500 MB message would cost 500 MB before any size check could run.
    ///
    /// It follows the RESP2 framing only as far as the type byte and the length line of each item
    /// (hiredis still parses every reply): a bulk string announced longer than `limit` reaches hiredis
    /// as a null bulk (`$-1`), its bytes are dropped as they arrive, and its announced length joins
    /// `oversized` (oldest first), for the reason of the rejection. An array announcing more than
    /// `maxElements` elements, a length line longer than `maxLineBytes`, a negative length other than
    /// -1 or an unknown type byte is a protocol error (`feed` returns `false`). A pure value: no
    /// socket, no Redis; one per connection, used by the thread that owns it.
    struct _LengthGate {
        /// The longest bulk string passed on.
        let limit: Int
        /// The most elements an array may announce (the server's pushes have 3).
        static let maxElements = 1024
        /// The longest length line, type byte and CRLF included.
        static let maxLineBytes = 24

        /// The announced lengths of the bulk strings replaced by `$-1`, oldest first.
        private(set) var oversized: [Int] = []
        private var state = State.type
        /// The length line being read (type byte included), until its line feed.
        private var line: [UInt8] = []

        private enum State {
            /// The next byte is an item's type byte.
            case type
            /// Inside a simple line (`+`, `-`, `:`): passed on up to its line feed.
            case simple
            /// Inside a length line (`$` or `*`), held back until complete.
            case length
            /// Inside a bulk string's bytes and its CRLF: `remaining` more, passed on when `keep`.
            case payload(remaining: Int, keep: Bool)
        }

        init(limit: Int) {
            self.limit = limit
            line.reserveCapacity(Self.maxLineBytes)
        }

        /// Takes the oldest entry of `oversized`.
        mutating func takeOversized() -> Int? { oversized.isEmpty ? nil : oversized.removeFirst() }

        /// Appends to `output` what hiredis may read of `chunk` (the next bytes from the socket, split
        /// anywhere). Returns `false` on a protocol error; then the connection must be closed.
        mutating func feed(_ chunk: UnsafeRawBufferPointer, into output: inout [UInt8]) -> Bool {
            var index = 0
            while index < chunk.count {
                switch state {
                case .payload(let remaining, let keep):
                    let take = min(remaining, chunk.count - index)
                    if keep {
                        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[index..<(index + take)]))
                    }
                    index += take
                    state = remaining == take ? .type : .payload(remaining: remaining - take, keep: keep)
                case .type:
                    let byte = chunk[index]
                    index += 1
                    switch byte {
                    case UInt8(ascii: "$"), UInt8(ascii: "*"):
                        line.removeAll(keepingCapacity: true)
                        line.append(byte)
                        state = .length
                    case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"):
                        output.append(byte)
                        state = .simple
                    default:
                        return false
                    }
                case .simple:
                    let byte = chunk[index]
                    index += 1
                    output.append(byte)
                    if byte == 10 { state = .type }
                case .length:
                    let byte = chunk[index]
                    index += 1
                    line.append(byte)
                    if byte == 10 {
                        guard lengthLineEnded() else { return false }
                        output.append(contentsOf: line)
                    } else if line.count >= Self.maxLineBytes {
                        return false
                    }
                }
            }
            return true
        }

        /// Checks the complete length line in `line`, decides what follows it, and rewrites `line` to
        /// what hiredis gets; `false` when it is malformed or over a limit.
        private mutating func lengthLineEnded() -> Bool {
            guard line.count >= 4, line[line.count - 2] == 13 else { return false }
            let digits = line[1..<(line.count - 2)]
            guard let value = Int(String(decoding: digits, as: UTF8.self)) else { return false }
            if line[0] == UInt8(ascii: "*") {
                guard (-1...Self.maxElements).contains(value) else { return false }
                state = .type
                return true
            }
            guard value >= -1 else { return false }
            if value == -1 {
                state = .type
            } else if value <= limit {
                state = .payload(remaining: value + 2, keep: true)
            } else {
                oversized.append(value)
                line = Array("$-1\r\n".utf8)
                state = .payload(remaining: value > Int.max - 2 ? .max : value + 2, keep: false)
            }
            return true
        }
    }
#endif
