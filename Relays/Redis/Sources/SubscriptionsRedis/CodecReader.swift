// The decoding side of the relay's binary `Codable` format (`_Codec`): `_Reader`, which reads
// and skips tagged values in place in a message body.
// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Foundation

    /// Reads values in place from a message body; valid only while the body is.
    struct _Reader {
        let bytes: UnsafeRawBufferPointer

        func byte(at offset: Int) throws -> UInt8 {
            guard offset < bytes.count else { throw _corrupt("truncated") }
            return bytes[offset]
        }

        func varint(at offset: inout Int) throws -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let byte = try self.byte(at: offset)
                offset += 1
                guard shift < 64 else { throw _corrupt("integer too long") }
                result |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return result }
                shift += 7
            }
        }

        /// The bytes of a length-prefixed run at `offset` (after its tag).
        func run(at offset: inout Int) throws -> UnsafeRawBufferPointer {
            let length = try varint(at: &offset)
            guard length <= UInt64(bytes.count - offset) else { throw _corrupt("truncated") }
            let start = offset
            offset += Int(length)
            return UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
        }

        /// Skips the value at `offset`.
        func skip(at offset: inout Int, depth: Int) throws {
            guard depth < _Codec.maxDepth else { throw _corrupt("nested too deep") }
            let tag = try byte(at: offset)
            offset += 1
            switch tag {
            case _Codec.null, _Codec.no, _Codec.yes: return
            case _Codec.signed, _Codec.unsigned: _ = try varint(at: &offset)
            case _Codec.double, _Codec.float:
                let size = tag == _Codec.double ? 8 : 4
                guard bytes.count - offset >= size else { throw _corrupt("truncated") }
                offset += size
            case _Codec.string, _Codec.data: _ = try run(at: &offset)
            case _Codec.keyed, _Codec.unkeyed:
                while try byte(at: offset) != _Codec.end {
                    if tag == _Codec.keyed { _ = try run(at: &offset) }
                    try skip(at: &offset, depth: depth + 1)
                }
                offset += 1
            default: throw _corrupt("unknown tag \(tag)")
            }
        }

        func expect(_ tag: UInt8, at offset: inout Int) throws {
            guard try byte(at: offset) == tag else { throw _corrupt("unexpected tag") }
            offset += 1
        }

        func isNil(at offset: Int) -> Bool { offset < bytes.count && bytes[offset] == _Codec.null }

        func bool(at offset: inout Int) throws -> Bool {
            let tag = try byte(at: offset)
            guard tag == _Codec.no || tag == _Codec.yes else { throw _corrupt("expected a Bool") }
            offset += 1
            return tag == _Codec.yes
        }

        func integer<T: FixedWidthInteger>(_ type: T.Type, at offset: inout Int) throws -> T {
            let tag = try byte(at: offset)
            offset += 1
            let raw = try varint(at: &offset)
            let value: T?
            switch tag {
            case _Codec.signed:
                let decoded = Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
                value = T(exactly: decoded)
            case _Codec.unsigned: value = T(exactly: raw)
            default: throw _corrupt("expected an integer")
            }
            guard let value else { throw _corrupt("integer out of range for \(T.self)") }
            return value
        }

        func floating(at offset: inout Int) throws -> Double {
            let tag = try byte(at: offset)
            offset += 1
            let size = tag == _Codec.double ? 8 : tag == _Codec.float ? 4 : 0
            guard size > 0 else { throw _corrupt("expected a floating-point number") }
            guard bytes.count - offset >= size else { throw _corrupt("truncated") }
            var bits: UInt64 = 0
            for index in 0..<size { bits |= UInt64(bytes[offset + index]) << (8 * UInt64(index)) }
            offset += size
            return size == 8 ? Double(bitPattern: bits) : Double(Float(bitPattern: UInt32(truncatingIfNeeded: bits)))
        }

        func string(at offset: inout Int) throws -> String {
            try expect(_Codec.string, at: &offset)
            let utf8 = try run(at: &offset)
            guard let string = String(validating: utf8, as: UTF8.self) else { throw _corrupt("invalid UTF-8") }
            return string
        }

        /// Decodes a `T` at `offset`, which moves past it.
        func decodeValue<T: Decodable>(_ type: T.Type, at offset: inout Int, depth: Int) throws -> T {
            guard depth < _Codec.maxDepth else { throw _corrupt("nested too deep") }
            if T.self == Data.self {
                try expect(_Codec.data, at: &offset)
                return Data(try run(at: &offset)) as! T
            }
            let start = offset
            try skip(at: &offset, depth: depth)
            return try T(from: _Decoder(reader: self, offset: start, depth: depth))
        }
    }
#endif
