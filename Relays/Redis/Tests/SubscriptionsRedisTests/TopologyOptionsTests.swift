import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// The topology option, the URL's seeds and Sentinel's answers, without a server.
@Suite("Topology: options, seeds, Sentinel's answers")
struct TopologyOptionsTests {
    @Test func theTopologyIsStandaloneByDefault() {
        #expect(RedisRelay.Options().topology == .standalone)
    }

    /// Several comma-separated hosts are seeds; credentials and TLS are the URL's, for each.
    @Test func aURLMayListSeveralHosts() throws {
        let endpoint = try _Endpoint(url: "rediss://app:p%40ss@127.0.0.1:7001,[::1]:7002,cache.internal/0")
        #expect(
            endpoint.seeds == [
                _Address(host: "127.0.0.1", port: 7001), _Address(host: "::1", port: 7002),
                _Address(host: "cache.internal", port: 6379),
            ])
        #expect(endpoint.host == "127.0.0.1" && endpoint.port == 7001)
        let second = endpoint.at(endpoint.seeds[1])
        #expect(second.host == "::1" && second.port == 7002)
        #expect(second.user == "app" && second.password == "p@ss" && second.tls)
        #expect(!second.description.contains("p@ss"))
        #expect(_Address(host: "::1", port: 7002).description == "[::1]:7002")
        #expect(try _Endpoint(url: "redis://h:1").seeds == [_Address(host: "h", port: 1)])
    }

    @Test func anEmptyOrMalformedSeedIsRefused() {
        for url in ["redis://a:1,,b:2", "redis://a:1,b:99999", "redis://a:1,"] {
            #expect(throws: RedisRelayError.self) { try _Endpoint(url: url) }
        }
    }

    /// Several hosts without a cluster or Sentinel topology are a mistake, said at once.
    @Test func severalHostsNeedAClusterOrSentinel() throws {
        let endpoint = try _Endpoint(url: "redis://127.0.0.1:7001,127.0.0.1:7002")
        #expect(throws: RedisRelayError.self) { try _TopologyStart(endpoint, topology: .standalone) }
        #expect(try _TopologyStart(endpoint, topology: .cluster).commands.2 == "SPUBLISH")
        #expect(try _TopologyStart(endpoint, topology: .sentinel(masterName: "relay")).masterName == "relay")
        #expect(try _TopologyStart(try _Endpoint(url: "redis://h"), topology: .standalone).commands.2 == "PUBLISH")
    }

    @Test func sentinelAnswersAreRead() {
        let answer = _Reply.array([.string(Array("127.0.0.1".utf8)), .string(Array("6380".utf8))])
        #expect(_Sentinel.primary(from: answer) == _Address(host: "127.0.0.1", port: 6380))
        #expect(_Sentinel.primary(from: .null) == nil)
        #expect(_Sentinel.primary(from: .array([.string([]), .string(Array("1".utf8))])) == nil)
        #expect(_Sentinel.primary(from: .array([.string(Array("h".utf8)), .string(Array("0".utf8))])) == nil)
        #expect(_Sentinel.isPrimary(.array([.string(Array("master".utf8)), .integer(0), .array([])])))
        #expect(!_Sentinel.isPrimary(.array([.string(Array("slave".utf8)), .string(Array("h".utf8))])))
        #expect(
            _Sentinel.switched("relay 127.0.0.1 6380 127.0.0.1 6381", masterName: "relay")
                == _Address(host: "127.0.0.1", port: 6381))
        #expect(_Sentinel.switched("other 127.0.0.1 6380 127.0.0.1 6381", masterName: "relay") == nil)
        #expect(_Sentinel.switched("relay 127.0.0.1 6380 127.0.0.1", masterName: "relay") == nil)
    }
}
