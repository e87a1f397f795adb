// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import CHiredis

    /// A reply of the server as a plain value, for the few commands whose answer the relay reads
    /// (`CLUSTER SLOTS`, `SENTINEL get-master-addr-by-name`, `ROLE`), so that the code that
    /// interprets them is pure and tested without a server. Immutable.
    enum _Reply: Sendable, Equatable {
        case string([UInt8])
        case integer(Int64)
        case array([_Reply])
        case null
        case error(String)

        /// Copies hiredis's reply tree (the caller still frees it). Nesting deeper than 8 is cut off
        /// as `.null`: no reply the relay reads is deeper, and a hostile one cannot recurse far.
        init(_ reply: UnsafeMutablePointer<redisReply>, depth: Int = 0) {
            let value = reply.pointee
            switch value.type {
            case REDIS_REPLY_STRING, REDIS_REPLY_STATUS:
                self = .string(
                    value.str == nil
                        ? [] : Array(UnsafeRawBufferPointer(start: value.str, count: Int(value.len))))
            case REDIS_REPLY_INTEGER: self = .integer(Int64(value.integer))
            case REDIS_REPLY_ERROR:
                self = .error(value.str.map { String(cString: $0) } ?? "error")
            case REDIS_REPLY_ARRAY:
                guard depth < 8, let elements = value.element else {
                    self = depth < 8 ? .array([]) : .null
                    return
                }
                self = .array(
                    (0..<Int(value.elements)).map { index in
                        elements[index].map { _Reply($0, depth: depth + 1) } ?? .null
                    })
            default: self = .null
            }
        }

        /// The text of a string reply, `nil` for any other.
        var text: String? {
            guard case .string(let bytes) = self else { return nil }
            return String(decoding: bytes, as: UTF8.self)
        }

        /// A number, from an integer reply or a string of digits.
        var number: Int? {
            switch self {
            case .integer(let value): return Int(exactly: value)
            case .string: return text.flatMap { Int($0) }
            default: return nil
            }
        }

        /// The elements of an array reply, `nil` for any other.
        var elements: [_Reply]? {
            guard case .array(let elements) = self else { return nil }
            return elements
        }
    }
#endif
