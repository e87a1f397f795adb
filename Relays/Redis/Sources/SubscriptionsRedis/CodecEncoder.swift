// The `Encoder` of the relay's binary `Codable` format (`_Codec`) and its keyed, unkeyed,
// single-value and super-encoder containers, all writing through one `_Writer`.
// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Foundation

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
#endif
