// Built only with the package trait "Redis" (see the root Package.swift).
#if Redis
    extension RedisRelay {
        /// In history mode (``Options/historyLength`` > 0): how many posts of other relays were made
        /// while this relay was away (disconnected, partitioned, thrown out by the server, or while its
        /// server restarted with persistence) and delivered once it was back, read from the server's
        /// history. Each is delivered once, in order per sender; those older than the history are in
        /// ``missedPosts`` instead. Always zero in pub/sub mode. Read from any thread; it only grows.
        public var recoveredPosts: Int { core.recovered.load(ordering: .relaxed) }
    }

    /// Tries, on the initializer's first connections, the commands history mode needs on the stream
    /// named by the prefix alone, none of which writes anything: `XADD … NOMKSTREAM` (the stream does
    /// not exist, so nothing is added), `XREVRANGE` and `XREAD`. A refusal throws
    /// ``RedisRelayError/permissionDenied(_:)`` with the server's text.
    func _requireHistoryCommands(
        _ publishing: _Connection, _ subscribing: _Connection, _ prefix: String, _ endpoint: _Endpoint
    ) throws(RedisRelayError) {
        let key = Array(prefix.utf8)
        let bytes = { (text: String) in Array(text.utf8) }
        try publishing.require(
            [bytes("XADD"), key, bytes("NOMKSTREAM"), bytes("MAXLEN"), bytes("1"), bytes("*"), bytes("m"), []],
            endpoint)
        try subscribing.require(
            [bytes("XREVRANGE"), key, bytes("+"), bytes("-"), bytes("COUNT"), bytes("1")], endpoint)
        try subscribing.require(
            [bytes("XREAD"), bytes("COUNT"), bytes("1"), bytes("STREAMS"), key, bytes("0-0")], endpoint)
    }
#endif
