import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

@Suite("Signed messages (Options.signingKey)")
struct SigningTests {
    @Test func theMACIsHMACSHA256() {
        // RFC 4231, test cases 1 and 6 (a key longer than the block).
        let one = _Signer(key: Array(repeating: 0x0b, count: 20)).mac([Array("Hi There".utf8)[...]])
        #expect(
            one.map { String(format: "%02x", $0) }.joined()
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        let six = _Signer(key: Array(repeating: 0xaa, count: 131)).mac([
            Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)[...]
        ])
        #expect(
            six.map { String(format: "%02x", $0) }.joined()
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    @Test func aKeyOfExactlyTheBlockSizeIsUsedAsItIs() {
        // RFC 2104 hashes only a key longer than the 64-byte block. The expected values are those
        // of another implementation (Python's hmac module), for keys of 64 and 65 bytes.
        func hex(_ key: [UInt8]) -> String {
            _Signer(key: key).mac([Array("Hi There".utf8)[...]]).map { String(format: "%02x", $0) }.joined()
        }
        #expect(
            hex(Array(repeating: 0x0b, count: 64))
                == "21cd586aeca0579d99a1c938127c92525a371f807bc5ba6eb78bc825bd4f2be3")
        #expect(
            hex(Array(repeating: 0x0b, count: 65))
                == "727b82fba264393c5d67fd6d6ad783e9019a1fa6a857fccb70f5852f04be5d5d")
    }

    @Test func aSignatureAlteredInAnyByteIsRefused() {
        let signer = _Signer(key: Array("a shared secret of thirty-two by".utf8))
        let channel = Array("subscriptions:chat".utf8)
        let message = _Wire.message(header: otherRelayHeader, kind: _Wire.typed, body: [1, 2, 3])
        var signed = message
        signer.sign(channel: channel, frameAt: 0, in: &signed)
        #expect(signed.count == message.count + _Wire.signatureLength)
        func accepted(_ bytes: [UInt8], _ channel: [UInt8]) -> Bool {
            bytes.withUnsafeBytes { bytes in channel.withUnsafeBytes { signer.isSigned(bytes, channel: $0) } }
        }
        #expect(accepted(signed, channel))
        #expect(!accepted(signed, Array("subscriptions:other".utf8)))
        #expect(!accepted(Array(signed.dropLast()), channel))
        // Every byte counts, those of the message and each of the signature's 32.
        for index in signed.indices {
            var altered = signed
            altered[index] ^= 0x01
            #expect(!accepted(altered, channel), "byte \(index) of \(signed.count) altered")
        }
    }

    @Test func withAKeyOnlyMessagesSignedForTheirChannelAreAccepted() async throws {
        let key = Array("a shared secret of thirty-two by".utf8)
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, url: "redis://127.0.0.1:\(port)", channelPrefix: prefix, options: .init(signingKey: key))
        let relayB = try RedisRelay(
            center: b, url: "redis://127.0.0.1:\(port)", channelPrefix: prefix, options: .init(signingKey: key))
        var events = EventReader(relayB)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        #expect(await events.next() == .connected)

        for seq in 0..<300 { a.post(.chat, Message(seq: seq, text: "signed")) }
        #expect(eventually { received.count >= 300 })
        #expect(received.values == Array(0..<300))

        // What an attacker with PUBLISH rights can send: unsigned, forged, moved from another
        // channel, oversized.
        let signer = _Signer(key: key)
        let wrong = _Signer(key: Array("not the key".utf8))
        let body = try binary(Message(seq: 1000, text: "injected"))
        var signedHeader = otherRelayHeader
        signedHeader.replaceSubrange(0..<3, with: Array("SS4".utf8))
        let message = signedHeader + [_Wire.typed] + body
        let chat = Array((prefix + "chat").utf8)
        let forged: [[UInt8]] = [
            frame(0, _Wire.typed, body),  // unsigned (SR4)
            message,  // signed magic, no signature
            message + wrong.signature(channel: chat, message: message[...]),  // another key
            message + signer.signature(channel: Array((prefix + "other").utf8), message: message[...]),  // moved
            Array(message.dropLast()) + [0x00] + signer.signature(channel: chat, message: message[...]),  // altered
            Array(repeating: 0x41, count: (1 << 20) + 1),  // oversized
        ]
        try publishRaw(port: port, channel: prefix + "chat", forged)
        // The same message, signed right, is accepted: everything before it was handled.
        try publishRaw(
            port: port, channel: prefix + "chat", [message + signer.signature(channel: chat, message: message[...])])
        #expect(eventually { received.count >= 301 })
        #expect(received.values == Array(0..<300) + [1000])
        #expect(relayB.rejectedMessages == forged.count)
        var reasons: [String] = []
        // One event per rejection counted (waiting for one more would wait out the bound).
        for _ in 0..<relayB.rejectedMessages {
            guard case .rejected(let reason) = await events.next() else { break }
            reasons.append(reason)
        }
        #expect(reasons.count == forged.count, "\(reasons)")
        #expect(reasons.filter { $0.contains("signature") }.count == 3, "\(reasons)")
        withExtendedLifetime(tokens) {}
    }

    @Test func aRelayWithoutTheKeyRejectsSignedMessagesAndARelayWithItUnsignedOnes() throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let key = Array(repeating: UInt8(7), count: 32)
        let signed = PostCenter()
        let plain = PostCenter()
        let relaySigned = try RedisRelay(
            center: signed, url: "redis://127.0.0.1:\(port)", channelPrefix: prefix, options: .init(signingKey: key))
        let relayPlain = try RedisRelay(center: plain, url: "redis://127.0.0.1:\(port)", channelPrefix: prefix)
        let atSigned = Collector<Int>()
        let atPlain = Collector<Int>()
        let tokens = [
            relaySigned.relay(.chat), relayPlain.relay(.chat), signed.subscribe(.chat) { atSigned.append($0.seq) },
            plain.subscribe(.chat) { atPlain.append($0.seq) },
        ]
        #expect(relaySigned.waitUntilReady(timeout: .seconds(10)) && relayPlain.waitUntilReady(timeout: .seconds(10)))
        signed.post(.chat, Message(seq: 1, text: ""))
        plain.post(.chat, Message(seq: 2, text: ""))
        #expect(eventually { relaySigned.rejectedMessages == 1 && relayPlain.rejectedMessages == 1 })
        #expect(atSigned.values == [1] && atPlain.values == [2])  // each saw only its own, locally
        withExtendedLifetime(tokens) {}
    }
}
