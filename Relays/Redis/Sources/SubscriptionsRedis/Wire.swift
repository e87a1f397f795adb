/// The message format on a relayed channel: `SR1` magic, the sender relay's origin id as 16
/// lowercase hex digits, a kind byte, then the body.
///
/// - kind `t`: a typed post; the body is the payload encoded as JSON.
/// - kind `p`: a plain post; the body is the `PostObject`'s flag in UTF-8.
///
/// Anything else on a relayed channel (other publishers, other versions) is foreign: counted in
/// `RedisRelay.rejectedMessages` and skipped.
enum _Wire {
    static let magic: [UInt8] = Array("SR1".utf8)
    static let originLength = 16
    static let headerLength = magic.count + originLength + 1
    static let typed = UInt8(ascii: "t")
    static let plain = UInt8(ascii: "p")

    /// The header of every message a relay with `origin` publishes, without the kind byte.
    static func header(origin: UInt64) -> [UInt8] {
        let hex = Array(String(origin, radix: 16).utf8)
        return magic + Array(repeating: UInt8(ascii: "0"), count: originLength - hex.count) + hex
    }

    /// A message: `header`, `kind`, `body`.
    static func message(header: [UInt8], kind: UInt8, body: some Collection<UInt8>) -> [UInt8] {
        var message: [UInt8] = []
        message.reserveCapacity(header.count + 1 + body.count)
        message += header
        message.append(kind)
        message += body
        return message
    }

    /// What a received message is.
    enum Parsed {
        case mine
        case foreign
        case post(kind: UInt8, body: UnsafeRawBufferPointer)
    }

    /// Splits `bytes` into kind and body; `header` is the receiving relay's own header, to
    /// recognise its own posts.
    static func parse(_ bytes: UnsafeRawBufferPointer, ownHeader header: [UInt8]) -> Parsed {
        guard bytes.count >= headerLength, bytes.starts(with: magic) else { return .foreign }
        let origin = bytes[magic.count..<(magic.count + originLength)]
        guard origin.allSatisfy({ _isLowerHex($0) }) else { return .foreign }
        if origin.elementsEqual(header[magic.count...]) { return .mine }
        let kind = bytes[headerLength - 1]
        guard kind == typed || kind == plain else { return .foreign }
        return .post(kind: kind, body: UnsafeRawBufferPointer(rebasing: bytes[headerLength...]))
    }
}

private func _isLowerHex(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
}
