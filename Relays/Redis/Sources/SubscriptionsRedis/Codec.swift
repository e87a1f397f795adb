// The relay's binary `Codable` format: its tags, its entry points and its errors. The encoding
// side is in CodecWriter.swift and CodecEncoder.swift, the decoding side in CodecReader.swift and
// CodecDecoder.swift.
// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Foundation

    /// The relay's compact binary `Codable` format (the body of a typed post since wire version 2).
    ///
    /// Every value is a tag byte and its data, so any value can be skipped without its type:
    ///
    /// - `0` nil; `1` false; `2` true
    /// - `3` signed integer, zigzag LEB128; `4` unsigned integer, LEB128
    /// - `5` Double, 8 bytes little-endian; `6` Float, 4 bytes little-endian
    /// - `7` string, LEB128 byte count and UTF-8; `8` `Data`, LEB128 byte count and the bytes
    /// - `9` keyed container: entries (key as a LEB128 byte count and UTF-8, then a value) up to `11`
    /// - `10` unkeyed container: values up to `11`
    ///
    /// The encoder streams into one byte array (no tree, no per-value allocation): a container stays
    /// open until its parent writes its next value, or until the encoding ends. The decoder reads the
    /// bytes in place; a keyed container finds a key by scanning its entries, starting after the last
    /// one found, so fields decoded in the order they were encoded cost one comparison each. Malformed
    /// input throws `DecodingError`; nesting deeper than `maxDepth` is rejected rather than recursed.
    enum _Codec {
        static let null: UInt8 = 0
        static let no: UInt8 = 1
        static let yes: UInt8 = 2
        static let signed: UInt8 = 3
        static let unsigned: UInt8 = 4
        static let double: UInt8 = 5
        static let float: UInt8 = 6
        static let string: UInt8 = 7
        static let data: UInt8 = 8
        static let keyed: UInt8 = 9
        static let unkeyed: UInt8 = 10
        static let end: UInt8 = 11
        static let maxDepth = 512

        /// Appends `value`'s encoding to `bytes`.
        static func encode<T: Encodable>(_ value: T, into bytes: inout [UInt8]) throws {
            let writer = _Writer(bytes: [])
            swap(&writer.bytes, &bytes)
            defer { swap(&writer.bytes, &bytes) }
            try writer.encodeValue(value, depth: 0)
            writer.close(to: 0)
        }

        /// Decodes a `T` from `bytes`.
        static func decode<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) throws -> T {
            let reader = _Reader(bytes: bytes)
            var offset = 0
            let value = try reader.decodeValue(T.self, at: &offset, depth: 0)
            guard offset == bytes.count else { throw _corrupt("trailing bytes") }
            return value
        }
    }

    func _corrupt(_ what: String) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "relay message: \(what)"))
    }
#endif
