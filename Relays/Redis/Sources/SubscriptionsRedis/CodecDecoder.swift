// The `Decoder` of the relay's binary `Codable` format (`_Codec`) and its keyed, unkeyed,
// single-value and super-decoder containers, all reading through one `_Reader`.
// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Foundation

    struct _Decoder: Decoder {
        let reader: _Reader
        /// Where this decoder's value starts.
        let offset: Int
        let depth: Int
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            var start = offset
            try reader.expect(_Codec.keyed, at: &start)
            return KeyedDecodingContainer(_KeyedDecoder<Key>(reader: reader, start: start, depth: depth + 1))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            var start = offset
            try reader.expect(_Codec.unkeyed, at: &start)
            return _UnkeyedDecoder(reader: reader, offset: start, depth: depth + 1)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer {
            _SingleDecoder(reader: reader, offset: offset, depth: depth)
        }
    }

    /// A keyed container; `hint` (shared by copies) is where the entry after the last one found
    /// starts, so that in-order lookups do not rescan.
    struct _KeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let reader: _Reader
        /// The first entry (after the tag).
        let start: Int
        let depth: Int
        private let hint = _Hint()
        var codingPath: [any CodingKey] { [] }

        init(reader: _Reader, start: Int, depth: Int) {
            self.reader = reader
            self.start = start
            self.depth = depth
            hint.offset = start
        }

        /// The offset of `key`'s value, or `nil`.
        private func find(_ key: Key) throws -> Int? { try find(key.stringValue) }

        private func find(_ name: String) throws -> Int? {
            var wanted = name
            return try wanted.withUTF8 { wanted -> Int? in
                var offset = hint.offset
                var wrapped = false
                while true {
                    if try reader.byte(at: offset) == _Codec.end {
                        if wrapped || hint.offset == start { return nil }
                        wrapped = true
                        offset = start
                        continue
                    }
                    let name = try reader.run(at: &offset)
                    let value = offset
                    try reader.skip(at: &offset, depth: depth)
                    if name.elementsEqual(wanted) {
                        hint.offset = offset
                        return value
                    }
                    if wrapped && offset >= hint.offset { return nil }
                }
            }
        }

        private func value(_ key: Key) throws -> Int {
            guard let offset = try find(key) else {
                throw DecodingError.keyNotFound(
                    key, .init(codingPath: [], debugDescription: "relay message: no key \(key.stringValue)"))
            }
            return offset
        }

        var allKeys: [Key] {
            var keys: [Key] = []
            var offset = start
            while (try? reader.byte(at: offset)) ?? _Codec.end != _Codec.end {
                guard let name = try? reader.run(at: &offset), (try? reader.skip(at: &offset, depth: depth)) != nil
                else { break }
                if let key = Key(stringValue: String(decoding: name, as: UTF8.self)) { keys.append(key) }
            }
            return keys
        }

        func contains(_ key: Key) -> Bool { ((try? find(key)) ?? nil) != nil }

        func decodeNil(forKey key: Key) throws -> Bool { reader.isNil(at: try value(key)) }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
            var offset = try value(key)
            return try reader.bool(at: &offset)
        }
        func decode(_ type: String.Type, forKey key: Key) throws -> String {
            var offset = try value(key)
            return try reader.string(at: &offset)
        }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
            var offset = try value(key)
            return try reader.floating(at: &offset)
        }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
            var offset = try value(key)
            return Float(try reader.floating(at: &offset))
        }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
            var offset = try value(key)
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
            var offset = try value(key)
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
            var offset = try value(key)
            return try reader.integer(type, at: &offset)
        }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            var offset = try value(key)
            return try reader.decodeValue(type, at: &offset, depth: depth)
        }

        func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type, forKey key: Key
        ) throws -> KeyedDecodingContainer<NestedKey> {
            try _Decoder(reader: reader, offset: try value(key), depth: depth).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try _Decoder(reader: reader, offset: try value(key), depth: depth).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder {
            guard let offset = try find("super") else { throw _corrupt("no super entry") }
            return _SuperDecoder(base: _Decoder(reader: reader, offset: offset, depth: depth))
        }

        func superDecoder(forKey key: Key) throws -> any Decoder {
            _SuperDecoder(base: _Decoder(reader: reader, offset: try value(key), depth: depth))
        }
    }

    final class _Hint {
        var offset = 0
    }

    /// The decoder of a super encoder's slot (an unkeyed container that a keyed one may replace).
    private struct _SuperDecoder: Decoder {
        let base: _Decoder
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            try base.container(keyedBy: type)
        }
        func unkeyedContainer() throws -> any UnkeyedDecodingContainer { try base.unkeyedContainer() }
        func singleValueContainer() throws -> any SingleValueDecodingContainer {
            var offset = base.offset
            try base.reader.expect(_Codec.unkeyed, at: &offset)
            return _SingleDecoder(reader: base.reader, offset: offset, depth: base.depth + 1)
        }
    }

    struct _UnkeyedDecoder: UnkeyedDecodingContainer {
        let reader: _Reader
        var offset: Int
        let depth: Int
        var currentIndex = 0
        var codingPath: [any CodingKey] { [] }
        var count: Int? { nil }
        var isAtEnd: Bool { ((try? reader.byte(at: offset)) ?? _Codec.end) == _Codec.end }

        init(reader: _Reader, offset: Int, depth: Int) {
            self.reader = reader
            self.offset = offset
            self.depth = depth
        }

        private func notAtEnd() throws {
            if isAtEnd {
                throw DecodingError.valueNotFound(
                    Any.self, .init(codingPath: [], debugDescription: "relay message: unkeyed container is at its end"))
            }
        }

        mutating func decodeNil() throws -> Bool {
            try notAtEnd()
            guard reader.isNil(at: offset) else { return false }
            offset += 1
            currentIndex += 1
            return true
        }
        mutating func decode(_ type: Bool.Type) throws -> Bool {
            try notAtEnd()
            defer { currentIndex += 1 }
            return try reader.bool(at: &offset)
        }
        mutating func decode(_ type: String.Type) throws -> String {
            try notAtEnd()
            defer { currentIndex += 1 }
            return try reader.string(at: &offset)
        }
        mutating func decode(_ type: Double.Type) throws -> Double {
            try notAtEnd()
            defer { currentIndex += 1 }
            return try reader.floating(at: &offset)
        }
        mutating func decode(_ type: Int.Type) throws -> Int {
            try notAtEnd()
            defer { currentIndex += 1 }
            return try reader.integer(type, at: &offset)
        }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 {
            try notAtEnd()
            defer { currentIndex += 1 }
            return try reader.integer(type, at: &offset)
        }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try notAtEnd()
            let value = try reader.decodeValue(type, at: &offset, depth: depth)
            currentIndex += 1
            return value
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type
        ) throws -> KeyedDecodingContainer<NestedKey> {
            try notAtEnd()
            let start = offset
            try reader.skip(at: &offset, depth: depth)
            currentIndex += 1
            return try _Decoder(reader: reader, offset: start, depth: depth).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            try notAtEnd()
            let start = offset
            try reader.skip(at: &offset, depth: depth)
            currentIndex += 1
            return try _Decoder(reader: reader, offset: start, depth: depth).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder {
            try notAtEnd()
            let start = offset
            try reader.skip(at: &offset, depth: depth)
            currentIndex += 1
            return _SuperDecoder(base: _Decoder(reader: reader, offset: start, depth: depth))
        }
    }

    struct _SingleDecoder: SingleValueDecodingContainer {
        let reader: _Reader
        let offset: Int
        let depth: Int
        var codingPath: [any CodingKey] { [] }

        func decodeNil() -> Bool { reader.isNil(at: offset) }
        func decode(_ type: Bool.Type) throws -> Bool {
            var offset = offset
            return try reader.bool(at: &offset)
        }
        func decode(_ type: String.Type) throws -> String {
            var offset = offset
            return try reader.string(at: &offset)
        }
        func decode(_ type: Double.Type) throws -> Double {
            var offset = offset
            return try reader.floating(at: &offset)
        }
        func decode(_ type: Float.Type) throws -> Float {
            var offset = offset
            return Float(try reader.floating(at: &offset))
        }
        func decode(_ type: Int.Type) throws -> Int {
            var offset = offset
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: Int8.Type) throws -> Int8 {
            var offset = offset
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: Int16.Type) throws -> Int16 {
            var offset = offset
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: Int32.Type) throws -> Int32 {
            var offset = offset
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: Int64.Type) throws -> Int64 {
            var offset = offset
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: UInt.Type) throws -> UInt {
            var offset = offset
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: UInt8.Type) throws -> UInt8 {
            var offset = offset
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: UInt16.Type) throws -> UInt16 {
            var offset = offset
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: UInt32.Type) throws -> UInt32 {
            var offset = offset
            return try reader.integer(type, at: &offset)
        }
        func decode(_ type: UInt64.Type) throws -> UInt64 {
            var offset = offset
            return try reader.integer(type, at: &offset)
        }
        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            var offset = offset
            return try reader.decodeValue(type, at: &offset, depth: depth)
        }
    }
#endif
