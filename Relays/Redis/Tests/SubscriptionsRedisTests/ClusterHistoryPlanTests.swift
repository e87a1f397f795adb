import Testing

@testable import SubscriptionsRedis

/// History mode in a cluster without a server: on which primary each stream is read, what a move
/// or a lost node does to the plan, and that a moved stream reads on from its kept position.
@Suite("Cluster history: where each stream is read, and reading on after a move")
struct ClusterHistoryPlanTests {
    let a = _Address(host: "127.0.0.1", port: 7001)
    let b = _Address(host: "127.0.0.1", port: 7002)
    let c = _Address(host: "127.0.0.1", port: 7003)

    /// Three equal slot ranges, a/b/c.
    private func thirds() -> _SlotMap {
        var owners = [_Address?](repeating: nil, count: _ClusterSlot.count)
        for slot in 0..<_ClusterSlot.count { owners[slot] = slot < 5461 ? a : slot < 10923 ? b : c }
        return _SlotMap(owners: owners)
    }

    private func id(_ text: String) -> _StreamID { _StreamID(text)! }

    /// `foo` is in slot 12182 (c), `bar` in 5061 (a): each stream is read on its slot's owner, and
    /// only the nodes that own a wanted name need a connection.
    @Test func eachStreamIsReadOnThePrimaryOwningItsSlot() {
        var plan = _ClusterHistoryPlan()
        let (placed, moved) = plan.update(wanted: ["foo", "bar"], map: thirds())
        #expect(placed == ["bar", "foo"])
        #expect(moved.isEmpty)
        #expect(plan.placed == ["foo": c, "bar": a])
        #expect(plan.nodes == [a, c])
        // Unchanged map: nothing to do.
        let again = plan.update(wanted: ["foo", "bar"], map: thirds())
        #expect(again.placed.isEmpty && again.moved.isEmpty)
        // A name no longer relayed is no longer read.
        _ = plan.update(wanted: ["foo"], map: thirds())
        #expect(plan.nodes == [c])
    }

    /// A cluster refuses an XREAD of keys in several slots: one group per slot, and names that share
    /// a hash tag (in the prefix) share one.
    @Test func onePrimarysStreamsAreReadOneSlotPerCommandAndHashTagsShareOne() {
        var plan = _ClusterHistoryPlan()
        var owners = [_Address?](repeating: a, count: _ClusterSlot.count)
        owners[0] = a
        let allOnA = _SlotMap(owners: owners)
        _ = plan.update(wanted: ["{app}:x", "{app}:y", "foo", "bar"], map: allOnA)
        let groups = plan.slotGroups(on: a)
        #expect(groups.count == 3)
        #expect(groups.contains(["{app}:x", "{app}:y"]))
        #expect(groups.contains(["foo"]) && groups.contains(["bar"]))
        // In slot order: bar (5061) before {app} and foo (12182) last.
        #expect(groups.first == ["bar"] && groups.last == ["foo"])
        #expect(plan.slotGroups(on: b).isEmpty)
    }

    /// A reshard gives foo's slot to b: foo is placed there and reported moved; bar stays.
    @Test func aMovedSlotPlacesItsStreamOnTheNewOwnerAndSaysItMoved() {
        var plan = _ClusterHistoryPlan()
        _ = plan.update(wanted: ["foo", "bar"], map: thirds())
        var map = thirds()
        map.assign(_ClusterSlot.of("foo"), to: b)
        let (placed, moved) = plan.update(wanted: ["foo", "bar"], map: map)
        #expect(placed == ["foo"])
        #expect(moved == ["foo"])
        #expect(plan.placed["foo"] == b && plan.placed["bar"] == a)
        #expect(plan.nodes == [a, b])
    }

    /// `-MOVED` on a read displaces the name; placed again after the map was read, elsewhere it is a
    /// move, on the same node (a lagging map) it is read again there, unmoved. A redirect from a
    /// node the name already left changes nothing.
    @Test func aRedirectedReadDisplacesTheNameUntilTheMapIsReadAgain() {
        var plan = _ClusterHistoryPlan()
        _ = plan.update(wanted: ["foo"], map: thirds())
        let notReadThere = plan.lost("foo", on: a)
        #expect(!notReadThere)
        let redirected = plan.lost("foo", on: c)
        #expect(redirected)
        #expect(plan.placed["foo"] == nil && plan.displaced["foo"] == c)
        #expect(plan.nodes.isEmpty)
        var map = thirds()
        map.assign(_ClusterSlot.of("foo"), to: b)
        let elsewhere = plan.update(wanted: ["foo"], map: map)
        #expect(elsewhere.placed == ["foo"] && elsewhere.moved == ["foo"])
        let again = plan.lost("foo", on: b)
        #expect(again)
        let sameNode = plan.update(wanted: ["foo"], map: map)
        #expect(sameNode.placed == ["foo"] && sameNode.moved.isEmpty)
    }

    /// A lost connection displaces every name read there; a failover (the replica owns the slots
    /// now) places them on it, moved; names gone meanwhile are forgotten.
    @Test func aLostNodesNamesArePlacedOnWhoeverOwnsTheirSlotsNext() {
        var plan = _ClusterHistoryPlan()
        _ = plan.update(wanted: ["foo", "bar", "baz"], map: thirds())
        let onC = plan.placed.filter { $0.value == c }.keys.sorted()
        #expect(plan.lost(node: c) == onC)
        #expect(plan.nodes.isDisjoint(with: [c]))
        let replica = _Address(host: "127.0.0.1", port: 7006)
        var owners = thirds().owners
        for slot in 10923..<_ClusterSlot.count { owners[slot] = replica }
        let (placed, moved) = plan.update(wanted: ["foo", "bar", "baz"], map: _SlotMap(owners: owners))
        #expect(placed == onC && moved == onC)
        for name in onC { #expect(plan.placed[name] == replica) }
        #expect(plan.lost(node: replica) == onC)
        _ = plan.update(wanted: [], map: _SlotMap(owners: owners))
        #expect(plan.displaced.isEmpty && plan.placed.isEmpty)
    }

    /// The cursors of the names that moved ask for their tip where they are now and keep their
    /// position: the first read there starts after the last entry read on the old owner, and what
    /// the new owner added meanwhile is caught up. The other names keep reading undisturbed.
    @Test func aMovedStreamReadsOnFromItsPositionAndTheOthersAreUndisturbed() {
        var cursors = _HistoryCursors()
        cursors.sync(wanted: ["foo", "bar"])
        cursors.tip("foo", last: id("5-0"))
        cursors.tip("bar", last: id("7-0"))
        #expect(cursors.entry("foo", id: id("6-0")) == .live)
        cursors.lost(["foo", "unknown"])
        #expect(cursors.tipsNeeded == ["foo"])
        #expect(!cursors.isReady("foo") && cursors.isReady("bar"))
        #expect(cursors.readPositions(of: ["foo"]) == nil)
        #expect(cursors.readPositions(of: ["bar"])?.map { "\($0.channel) \($0.after)" } == ["bar 7-0"])
        // An entry of the old node's read in flight is not taken while the tip is owed.
        #expect(cursors.entry("foo", id: id("6-1")) == .old)
        cursors.tip("foo", last: id("9-0"))
        #expect(
            cursors.readPositions(of: ["foo", "bar"])?.map { "\($0.channel) \($0.after)" } == ["bar 7-0", "foo 6-0"])
        #expect(cursors.entry("foo", id: id("6-1")) == .caughtUp)
        cursors.recovered(posts: 2)
        #expect(cursors.entry("foo", id: id("9-0")) == .caughtUp)
        cursors.recovered(posts: 1)
        #expect(cursors.readFinished(entries: ["foo": 2], limit: 10, read: ["foo"]) == 3)
        #expect(cursors.readPositions(of: ["nothing"]) == nil)
    }

    /// A failover's new primary lacks the last entries read on the old one (asynchronous
    /// replication): its tip is older than the position, so the stream is read from its start,
    /// where the sequence numbers skip what was delivered already.
    @Test func aNewOwnerThatLacksReadEntriesIsReadFromItsStart() {
        var cursors = _HistoryCursors()
        cursors.sync(wanted: ["foo"])
        cursors.tip("foo", last: id("5-0"))
        #expect(cursors.entry("foo", id: id("8-0")) == .live)
        cursors.lost(["foo"])
        cursors.tip("foo", last: id("7-0"))
        #expect(cursors.readPositions(of: ["foo"])?.first?.after == .zero)
    }

    /// The cluster's passing states are waited out; a refusal is not.
    @Test func onlyTheClustersPassingStatesAreWaitedOut() {
        #expect(_ClusterHistoryPlan.isTransient("CLUSTERDOWN The cluster is down"))
        #expect(_ClusterHistoryPlan.isTransient("TRYAGAIN Multiple keys request during rehashing of slot"))
        #expect(_ClusterHistoryPlan.isTransient("LOADING Redis is loading the dataset in memory"))
        #expect(!_ClusterHistoryPlan.isTransient("NOPERM this user has no permissions to access the key"))
        #expect(!_ClusterHistoryPlan.isTransient("WRONGTYPE Operation against a key holding the wrong kind of value"))
    }
}
