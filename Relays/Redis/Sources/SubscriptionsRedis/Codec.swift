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

    // MARK: Encoding

    final class _Writer {
        var bytes: [UInt8]
        /// How many containers are open (their end byte not written yet).
        var open = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        /// Ends the open containers deeper than `depth`.
        @inline(__always) func close(to depth: Int) {
            while open > depth {
                bytes.append(_Codec.end)
                open -= 1
            }
        }

        @inline(__always) func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        func signed(_ value: Int64) {
            bytes.append(_Codec.signed)
            varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
        }

        func unsigned(_ value: UInt64) {
            bytes.append(_Codec.unsigned)
            varint(value)
        }

        func string(_ value: String) {
            var value = value
            value.withUTF8 { utf8 in
                varint(UInt64(utf8.count))
                bytes.append(contentsOf: utf8)
            }
        }

        func bool(_ value: Bool) { bytes.append(value ? _Codec.yes : _Codec.no) }

        func double(_ value: Double) {
            bytes.append(_Codec.double)
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }

        func float(_ value: Float) {
            bytes.append(_Codec.float)
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }

        /// Writes one value at `depth` (inside `depth` open containers).
        func encodeValue<T: Encodable>(_ value: T, depth: Int) throws {
            close(to: depth)
            if let data = value as? Data {
                bytes.append(_Codec.data)
                varint(UInt64(data.count))
                bytes.append(contentsOf: data)
                return
            }
            let before = bytes.count
            try value.encode(to: _Encoder(writer: self, depth: depth))
            close(to: depth)
            // A type that encodes nothing still takes a slot, like JSONEncoder's `{}`.
            if bytes.count == before { bytes += [_Codec.keyed, _Codec.end] }
        }
    }

    struct _Encoder: Encoder {
        let writer: _Writer
        let depth: Int
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        /// Opens a container at this encoder's slot, or reuses the one it opened already (a type may
        /// ask twice).
        private func openContainer(_ tag: UInt8) {
            if writer.open > depth {
                writer.close(to: depth + 1)
            } else {
                writer.bytes.append(tag)
                writer.open = depth + 1
            }
        }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            openContainer(_Codec.keyed)
            return KeyedEncodingContainer(_KeyedEncoder<Key>(writer: writer, depth: depth + 1))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            openContainer(_Codec.unkeyed)
            return _UnkeyedEncoder(writer: writer, depth: depth + 1)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer { _SingleEncoder(writer: writer, depth: depth) }
    }

    struct _KeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let writer: _Writer
        let depth: Int
        var codingPath: [any CodingKey] { [] }

        @inline(__always) private func key(_ key: Key) {
            writer.close(to: depth)
            writer.string(key.stringValue)
        }

        mutating func encodeNil(forKey key: Key) throws {
            self.key(key)
            writer.bytes.append(_Codec.null)
        }
        mutating func encode(_ value: Bool, forKey key: Key) throws {
            self.key(key)
            writer.bool(value)
        }
        mutating func encode(_ value: String, forKey key: Key) throws {
            self.key(key)
            writer.bytes.append(_Codec.string)
            writer.string(value)
        }
        mutating func encode(_ value: Double, forKey key: Key) throws {
            self.key(key)
            writer.double(value)
        }
        mutating func encode(_ value: Float, forKey key: Key) throws {
            self.key(key)
            writer.float(value)
        }
        mutating func encode(_ value: Int, forKey key: Key) throws {
            self.key(key)
            writer.signed(Int64(value))
        }
        mutating func encode(_ value: Int8, forKey key: Key) throws {
            self.key(key)
            writer.signed(Int64(value))
        }
        mutating func encode(_ value: Int16, forKey key: Key) throws {
            self.key(key)
            writer.signed(Int64(value))
        }
        mutating func encode(_ value: Int32, forKey key: Key) throws {
            self.key(key)
            writer.signed(Int64(value))
        }
        mutating func encode(_ value: Int64, forKey key: Key) throws {
            self.key(key)
            writer.signed(value)
        }
        mutating func encode(_ value: UInt, forKey key: Key) throws {
            self.key(key)
            writer.unsigned(UInt64(value))
        }
        mutating func encode(_ value: UInt8, forKey key: Key) throws {
            self.key(key)
            writer.unsigned(UInt64(value))
        }
        mutating func encode(_ value: UInt16, forKey key: Key) throws {
            self.key(key)
            writer.unsigned(UInt64(value))
        }
        mutating func encode(_ value: UInt32, forKey key: Key) throws {
            self.key(key)
            writer.unsigned(UInt64(value))
        }
        mutating func encode(_ value: UInt64, forKey key: Key) throws {
            self.key(key)
            writer.unsigned(value)
        }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            self.key(key)
            try writer.encodeValue(value, depth: depth)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type, forKey key: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            self.key(key)
            writer.bytes.append(_Codec.keyed)
            writer.open = depth + 1
            return KeyedEncodingContainer(_KeyedEncoder<NestedKey>(writer: writer, depth: depth + 1))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            self.key(key)
            writer.bytes.append(_Codec.unkeyed)
            writer.open = depth + 1
            return _UnkeyedEncoder(writer: writer, depth: depth + 1)
        }

        mutating func superEncoder() -> any Encoder {
            writer.close(to: depth)
            writer.string("super")
            return _SlotEncoder(writer: writer, depth: depth)
        }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            self.key(key)
            return _SlotEncoder(writer: writer, depth: depth)
        }
    }

    /// A super encoder's slot: opened as a keyed container at once, so that the slot holds a value
    /// even when the super class encodes nothing, and reused by whatever container it asks for.
    private func _SlotEncoder(writer: _Writer, depth: Int) -> any Encoder {
        writer.bytes.append(_Codec.unkeyed)
        writer.open = depth + 1
        return _SuperEncoder(writer: writer, depth: depth, tagAt: writer.bytes.count - 1)
    }

    /// Encodes into a slot that already holds an open unkeyed container: a keyed container asked of
    /// it replaces the tag.
    private struct _SuperEncoder: Encoder {
        let writer: _Writer
        let depth: Int
        let tagAt: Int
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            if writer.open == depth + 1 && writer.bytes.count == tagAt + 1 { writer.bytes[tagAt] = _Codec.keyed }
            return _Encoder(writer: writer, depth: depth).container(keyedBy: type)
        }
        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            _Encoder(writer: writer, depth: depth).unkeyedContainer()
        }
        func singleValueContainer() -> any SingleValueEncodingContainer {
            // The slot is the open unkeyed container: a single value goes in it as its only element.
            _SingleEncoder(writer: writer, depth: depth + 1)
        }
    }

    struct _UnkeyedEncoder: UnkeyedEncodingContainer {
        let writer: _Writer
        let depth: Int
        var count = 0
        var codingPath: [any CodingKey] { [] }

        init(writer: _Writer, depth: Int) {
            self.writer = writer
            self.depth = depth
        }

        @inline(__always) private mutating func slot() {
            writer.close(to: depth)
            count += 1
        }

        mutating func encodeNil() throws {
            slot()
            writer.bytes.append(_Codec.null)
        }
        mutating func encode(_ value: Bool) throws {
            slot()
            writer.bool(value)
        }
        mutating func encode(_ value: String) throws {
            slot()
            writer.bytes.append(_Codec.string)
            writer.string(value)
        }
        mutating func encode(_ value: Double) throws {
            slot()
            writer.double(value)
        }
        mutating func encode(_ value: Float) throws {
            slot()
            writer.float(value)
        }
        mutating func encode(_ value: Int) throws {
            slot()
            writer.signed(Int64(value))
        }
        mutating func encode(_ value: Int64) throws {
            slot()
            writer.signed(value)
        }
        mutating func encode(_ value: UInt8) throws {
            slot()
            writer.unsigned(UInt64(value))
        }
        mutating func encode(_ value: UInt64) throws {
            slot()
            writer.unsigned(value)
        }
        mutating func encode<T: Encodable>(_ value: T) throws {
            slot()
            try writer.encodeValue(value, depth: depth)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type
        ) -> KeyedEncodingContainer<NestedKey> {
            slot()
            writer.bytes.append(_Codec.keyed)
            writer.open = depth + 1
            return KeyedEncodingContainer(_KeyedEncoder<NestedKey>(writer: writer, depth: depth + 1))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            slot()
            writer.bytes.append(_Codec.unkeyed)
            writer.open = depth + 1
            return _UnkeyedEncoder(writer: writer, depth: depth + 1)
        }

        mutating func superEncoder() -> any Encoder {
            slot()
            return _SlotEncoder(writer: writer, depth: depth)
        }
    }

    struct _SingleEncoder: SingleValueEncodingContainer {
        let writer: _Writer
        let depth: Int
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil() throws {
            writer.close(to: depth)
            writer.bytes.append(_Codec.null)
        }
        mutating func encode(_ value: Bool) throws {
            writer.close(to: depth)
            writer.bool(value)
        }
        mutating func encode(_ value: String) throws {
            writer.close(to: depth)
            writer.bytes.append(_Codec.string)
            writer.string(value)
        }
        mutating func encode(_ value: Double) throws {
            writer.close(to: depth)
            writer.double(value)
        }
        mutating func encode(_ value: Float) throws {
            writer.close(to: depth)
            writer.float(value)
        }
        mutating func encode(_ value: Int) throws {
            writer.close(to: depth)
            writer.signed(Int64(value))
        }
        mutating func encode(_ value: Int8) throws {
            writer.close(to: depth)
            writer.signed(Int64(value))
        }
        mutating func encode(_ value: Int16) throws {
            writer.close(to: depth)
            writer.signed(Int64(value))
        }
        mutating func encode(_ value: Int32) throws {
            writer.close(to: depth)
            writer.signed(Int64(value))
        }
        mutating func encode(_ value: Int64) throws {
            writer.close(to: depth)
            writer.signed(value)
        }
        mutating func encode(_ value: UInt) throws {
            writer.close(to: depth)
            writer.unsigned(UInt64(value))
        }
        mutating func encode(_ value: UInt8) throws {
            writer.close(to: depth)
            writer.unsigned(UInt64(value))
        }
        mutating func encode(_ value: UInt16) throws {
            writer.close(to: depth)
            writer.unsigned(UInt64(value))
        }
        mutating func encode(_ value: UInt32) throws {
            writer.close(to: depth)
            writer.unsigned(UInt64(value))
        }
        mutating func encode(_ value: UInt64) throws {
            writer.close(to: depth)
            writer.unsigned(value)
        }
        mutating func encode<T: Encodable>(_ value: T) throws {
            try writer.encodeValue(value, depth: depth)
        }
    }

    // MARK: Decoding

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
