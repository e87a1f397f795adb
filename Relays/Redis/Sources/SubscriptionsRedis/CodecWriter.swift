// The encoding side of the relay's binary `Codable` format (`_Codec`): `_Writer`, the byte array
// an encoding streams into, and the open containers it has yet to end.
// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import Foundation

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
#endif
