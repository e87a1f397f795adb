import Testing

@testable import SubscriptionsRedis

/// The recovery bookkeeping alone: no socket, no server (the `_PacingMachine` pattern).
@Suite("History cursors: where each stream was read up to, and what a reconnection caught up")
struct HistoryCursorsTests {
    private func id(_ text: String) -> _StreamID { _StreamID(text)! }

    @Test func streamIDsParseOnlyTwoUnsignedNumbersAndOrderByBoth() {
        #expect(_StreamID("1700000000000-5") == _StreamID(milliseconds: 1_700_000_000_000, sequence: 5))
        #expect(_StreamID("0-0") == .zero)
        #expect(_StreamID("18446744073709551615-18446744073709551615") != nil)
        for bad in ["", "-", "1-", "-1", "1", "1-2-3", "a-1", "1-b", " 1-2", "18446744073709551616-0", "1--2", "+"] {
            #expect(_StreamID(bad) == nil, "\(bad)")
        }
        #expect(id("1-9") < id("2-0"))
        #expect(id("2-0") < id("2-1"))
        #expect(!(id("2-1") < id("2-1")))
        #expect(id("12-34").description == "12-34")
    }

    @Test func aNewChannelAsksForItsTipAndStartsThereWithoutRecovering() {
        var cursors = _HistoryCursors()
        cursors.sync(wanted: ["a", "b"])
        #expect(cursors.tipsNeeded == ["a", "b"])
        #expect(cursors.readPositions == nil)
        #expect(!cursors.isReady("a"))
        cursors.tip("a", last: id("5-0"))
        // No read while a tip is owed: it would skip channel b.
        #expect(cursors.readPositions == nil)
        cursors.tip("b", last: nil)
        #expect(cursors.isReady("a") && cursors.isReady("b"))
        let positions = cursors.readPositions?.map { "\($0.channel) \($0.after)" }
        #expect(positions == ["a 5-0", "b 0-0"])
        #expect(cursors.entry("a", id: id("6-0")) == .live)
        #expect(cursors.entry("a", id: id("6-0")) == .old)
        #expect(cursors.entry("a", id: id("4-0")) == .old)
        cursors.recovered(posts: 3)  // ignored: no catch-up in progress
        #expect(cursors.readFinished(entries: ["a": 1], limit: 10) == nil)
    }

    @Test func aReconnectionCatchesUpToTheTipAndReportsOnceEveryChannelIsCaughtUp() {
        var cursors = _HistoryCursors()
        cursors.sync(wanted: ["a", "b"])
        cursors.tip("a", last: id("1-0"))
        cursors.tip("b", last: id("1-0"))
        cursors.connectionLost()
        #expect(cursors.tipsNeeded == ["a", "b"])
        #expect(!cursors.isReady("a"))
        // Positions survive the loss: the next read starts where the last one stopped.
        cursors.tip("a", last: id("9-0"))
        cursors.tip("b", last: id("3-0"))
        #expect(cursors.readPositions?.map(\.after) == [id("1-0"), id("1-0")])
        // First read: a full page for a (more to come), all of b.
        #expect(cursors.entry("a", id: id("2-0")) == .caughtUp)
        cursors.recovered(posts: 64)
        #expect(cursors.entry("a", id: id("3-0")) == .caughtUp)
        cursors.recovered(posts: 1)
        #expect(cursors.entry("b", id: id("3-0")) == .caughtUp)
        cursors.recovered(posts: 1)
        #expect(cursors.readFinished(entries: ["a": 2, "b": 1], limit: 2) == nil)
        // Second read: a reaches its tip and goes past it; entries after the tip are live.
        #expect(cursors.entry("a", id: id("9-0")) == .caughtUp)
        cursors.recovered(posts: 1)
        #expect(cursors.entry("a", id: id("10-0")) == .live)
        cursors.recovered(posts: 0)
        #expect(cursors.readFinished(entries: ["a": 2], limit: 2) == 67)
        // Reported once.
        #expect(cursors.readFinished(entries: [:], limit: 2) == nil)
    }

    @Test func aReadOfSomeChannelsEndsOnlyTheirCatchUp() {
        var cursors = _HistoryCursors()
        cursors.sync(wanted: ["a", "b"])
        cursors.tip("a", last: id("1-0"))
        cursors.tip("b", last: id("1-0"))
        cursors.connectionLost()
        cursors.tip("a", last: id("5-0"))
        cursors.tip("b", last: id("5-0"))
        // A read of a alone (a window of the names): b, not read, is still catching up.
        #expect(cursors.entry("a", id: id("5-0")) == .caughtUp)
        cursors.recovered(posts: 1)
        #expect(cursors.readFinished(entries: ["a": 1], limit: 10, read: ["a"]) == nil)
        #expect(cursors.entry("b", id: id("5-0")) == .caughtUp)
        cursors.recovered(posts: 1)
        #expect(cursors.readFinished(entries: ["b": 1], limit: 10, read: ["b"]) == 2)
    }

    @Test func aTrimmedCatchUpEndsWithTheFirstShortRead() {
        var cursors = _HistoryCursors()
        cursors.sync(wanted: ["a"])
        cursors.tip("a", last: id("1-0"))
        cursors.connectionLost()
        cursors.tip("a", last: id("50-0"))
        // Entries 2 to 40 were trimmed away: the read returns the last ten.
        for ms in 41...50 {
            #expect(cursors.entry("a", id: _StreamID(milliseconds: UInt64(ms), sequence: 0)) == .caughtUp)
        }
        cursors.recovered(posts: 10)
        #expect(cursors.readFinished(entries: ["a": 10], limit: 256) == 10)
    }

    @Test func aTipBehindThePositionMeansARecreatedHistoryReadFromTheStart() {
        var cursors = _HistoryCursors()
        cursors.sync(wanted: ["a"])
        cursors.tip("a", last: id("100-0"))
        #expect(cursors.entry("a", id: id("200-0")) == .live)
        cursors.connectionLost()
        cursors.tip("a", last: id("150-0"))
        #expect(cursors.readPositions?.map(\.after) == [.zero])
        #expect(cursors.entry("a", id: id("150-0")) == .caughtUp)
    }

    @Test func aNothingToCatchUpReconnectionReportsNothing() {
        var cursors = _HistoryCursors()
        cursors.sync(wanted: ["a"])
        cursors.tip("a", last: id("7-0"))
        cursors.connectionLost()
        cursors.tip("a", last: id("7-0"))
        #expect(cursors.readFinished(entries: [:], limit: 256) == nil)
        cursors.connectionLost()
        cursors.tip("a", last: nil)  // the history is gone: keep the position
        #expect(cursors.readPositions?.map(\.after) == [id("7-0")])
    }

    @Test func anUnrelayedChannelIsForgottenAndRelayingItAgainStartsAtItsTip() {
        var cursors = _HistoryCursors()
        cursors.sync(wanted: ["a", "b"])
        cursors.tip("a", last: id("1-0"))
        cursors.tip("b", last: id("1-0"))
        cursors.sync(wanted: ["a"])
        #expect(cursors.readPositions?.map(\.channel) == ["a"])
        #expect(cursors.entry("b", id: id("2-0")) == .old)
        cursors.sync(wanted: ["a", "b"])
        #expect(cursors.tipsNeeded == ["b"])
        cursors.sync(wanted: [])
        #expect(cursors.readPositions == nil)
    }

    @Test func readsWaitWhileHandlersHaveHalfTheLimitAndNeverAskForMoreThanFits() {
        #expect(_HistoryReading.count(pending: 0, limit: 100_000) == _HistoryReading.maxCount)
        #expect(_HistoryReading.count(pending: 100_000 - 640, limit: 100_000) == 10)
        #expect(_HistoryReading.count(pending: 100_000 - 64, limit: 100_000) == 1)
        #expect(_HistoryReading.count(pending: 100_000 - 63, limit: 100_000) == 0)
        #expect(_HistoryReading.count(pending: 0, limit: 640) == 10)
        #expect(_HistoryReading.count(pending: 0, limit: 1) == 1)
        #expect(_HistoryReading.count(pending: 1, limit: 64) == 0)
        // Several channels share the room; big messages bound the reply's size.
        #expect(_HistoryReading.count(pending: 0, limit: 6400, streams: 10) == 10)
        #expect(_HistoryReading.count(pending: 0, limit: 100_000, messageBytes: 1 << 20) == 64)
        #expect(_HistoryReading.count(pending: 0, limit: 100_000, streams: 1000, messageBytes: 1 << 20) == 1)
        #expect(_HistoryReading.count(pending: 0, limit: 100_000, streams: 2, messageBytes: .max) == 1)
        #expect(_HistoryReading.block(.seconds(5)) == 250)
        #expect(_HistoryReading.block(.milliseconds(150)) == 75)
        #expect(_HistoryReading.block(.microseconds(10)) == 1)
    }

    /// The read cap halves at each connection lost with a read unanswered, down to 1, and doubles
    /// back only after `regrowAfter` answered reads in a row (a loss in between starts the count
    /// again), up to the most a read asks for; the cursors keep it across connections.
    @Test func theReadCapHalvesAtEachInterruptedReadAndRegrowsSlowly() {
        var cap = _HistoryReadCap()
        #expect(cap.value == _HistoryReading.maxCount)
        for _ in 0..<20 { cap.cut() }
        #expect(cap.value == 1)
        cap.answered(_HistoryReadCap.regrowAfter - 1)
        #expect(cap.value == 1)
        cap.cut()
        cap.answered(_HistoryReadCap.regrowAfter - 1)
        #expect(cap.value == 1)
        cap.answered()
        #expect(cap.value == 2)
        for _ in 0..<20 { cap.answered(_HistoryReadCap.regrowAfter) }
        #expect(cap.value == _HistoryReading.maxCount)
        var cursors = _HistoryCursors()
        cursors.readCap.cut()
        cursors.connectionLost()
        #expect(cursors.readCap.value == _HistoryReading.maxCount / 2)
    }
}
