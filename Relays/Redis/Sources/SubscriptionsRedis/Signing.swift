// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    import COpenSSL

    /// Signs and checks messages with HMAC-SHA256 (RFC 2104 over OpenSSL's SHA-256), keyed by
    /// `RedisRelay.Options.signingKey`; see `_Wire` for what is signed.
    ///
    /// `@unchecked Sendable`: the pads are immutable after `init`; each call makes its own digest
    /// context, so any thread may sign or check at any time.
    final class _Signer: @unchecked Sendable {
        private let innerPad: [UInt8]
        private let outerPad: [UInt8]

        init(key: [UInt8]) {
            var block = key.count > 64 ? _Signer.sha256([key[...]]) : key
            block += [UInt8](repeating: 0, count: 64 - block.count)
            innerPad = block.map { $0 ^ 0x36 }
            outerPad = block.map { $0 ^ 0x5c }
        }

        /// The HMAC of the channel's bytes, a zero byte, then `message`.
        func signature(channel: some Collection<UInt8>, message: ArraySlice<UInt8>) -> [UInt8] {
            mac([ArraySlice(channel), [0], message])
        }

        /// HMAC-SHA256 of the concatenated `parts` (RFC 2104).
        func mac(_ parts: [ArraySlice<UInt8>]) -> [UInt8] {
            let inner = Self.sha256([innerPad[...]] + parts)
            return Self.sha256([outerPad[...], inner[...]])
        }

        /// Appends the signature of the message that starts at `start` and runs to the end of `bytes`.
        func sign(channel: [UInt8], frameAt start: Int, in bytes: inout [UInt8]) {
            bytes += signature(channel: channel, message: bytes[start...])
        }

        /// Whether the last `_Wire.signatureLength` bytes of `message` sign the rest, for `channel`.
        /// Compares in constant time.
        func isSigned(_ message: UnsafeRawBufferPointer, channel: UnsafeRawBufferPointer) -> Bool {
            guard message.count >= _Wire.signatureLength else { return false }
            let split = message.count - _Wire.signatureLength
            let expected = signature(channel: channel, message: ArraySlice(message[..<split]))
            var difference: UInt8 = 0
            for index in 0..<_Wire.signatureLength { difference |= expected[index] ^ message[split + index] }
            return difference == 0
        }

        /// SHA-256 of the concatenated `parts`.
        private static func sha256(_ parts: [ArraySlice<UInt8>]) -> [UInt8] {
            guard let context = EVP_MD_CTX_new() else { fatalError("SubscriptionsRedis: EVP_MD_CTX_new failed") }
            defer { EVP_MD_CTX_free(context) }
            _ = EVP_DigestInit_ex(context, EVP_sha256(), nil)
            for part in parts { _ = part.withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, $0.count) } }
            var digest = [UInt8](repeating: 0, count: 32)
            var length: UInt32 = 0
            _ = EVP_DigestFinal_ex(context, &digest, &length)
            return digest
        }
    }
#endif
