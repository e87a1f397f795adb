import Testing

@testable import SubscriptionsRedis

@Suite("Options: the documented defaults")
struct OptionsTests {
    /// The defaults that `RedisRelay.Options`' doc comments and the README's Limits table state.
    @Test func theOptionsDefaultsAreTheDocumentedOnes() {
        let options = RedisRelay.Options()
        #expect(options.connectTimeout == .seconds(2))
        #expect(options.reconnectDelay == .milliseconds(20) ... .seconds(1))
        #expect(options.pipelineDepth == 128)
        #expect(options.maxQueuedPosts == 100_000)
        #expect(options.maxQueuedBytes == 64 * 1024 * 1024)
        #expect(options.maximumMessageBytes == 1024 * 1024)
        #expect(options.pingInterval == .seconds(5))
        #expect(options.closeTimeout == .seconds(2))
        #expect(options.tlsCAFile == nil && options.tlsServerName == nil && options.signingKey == nil)
        #expect(!options.waitsForServer)
        #expect(options.maxPendingPosts == 100_000)
        let key = Array(repeating: UInt8(1), count: 32)
        #expect(RedisRelay.Options(signingKey: key).signingKey == key)
        #expect(RedisRelay.Options(signingKey: key).maximumMessageBytes == 1024 * 1024)
    }
}
