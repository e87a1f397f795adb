// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    /// The payload codec of typed posts (`_Codec`), reachable from `RelayBenchmarks` through
    /// `@_spi(Benchmarks) import SubscriptionsRedis`, so that its cost can be measured against
    /// Foundation's encoders in the same run (issue 39, item 8). Not API: it may change or go away in
    /// any release. Stateless, safe from any thread.
    @_spi(Benchmarks) public enum _PayloadCodec {
        /// Appends `value`'s encoding in the relay's binary format to `bytes`.
        public static func encode<T: Encodable>(_ value: T, into bytes: inout [UInt8]) throws {
            try _Codec.encode(value, into: &bytes)
        }

        /// Decodes a `T` from `bytes`, all of them (trailing bytes throw).
        public static func decode<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) throws -> T {
            try _Codec.decode(type, from: bytes)
        }
    }
#endif
