import Testing

@testable import Subscriptions

/// Guarantee: the slots of dead protocol observers are reclaimed lazily, within a constant factor
/// of the live registrations, also after a peak of observers has gone.
@Suite("Protocol registry sweep")
struct ProtocolRegistrySweepTests {
    @Test func deadSlotsStayWithinAConstantFactorOfTheLiveOnesAfterAPeak() {
        let center = PostCenter()
        let log = Log()
        let keepers = (0..<3).map { Named("keeper\($0)", log) }
        for keeper in keepers { center.addObserver(keeper, for: Greeter.self) }
        // A peak of 1,000 registrations, then all removed explicitly.
        let peak = (0..<1_000).map { Named("peak\($0)", log) }
        for observer in peak { center.addObserver(observer, for: Greeter.self) }
        for observer in peak { center.removeObserver(observer, for: Greeter.self) }
        // Then observers that die without being removed or notified. Unowned references keep
        // their memory, so no new observer reuses an address: only the sweep finds them.
        var zombies: [Zombie] = []
        var most = 0
        for i in 0..<500 {
            let temporary = Named("t\(i)", log)
            center.addObserver(temporary, for: Greeter.self)
            zombies.append(Zombie(temporary))
            most = max(most, center._protocolSlotCount(for: Greeter.self))
        }
        // 3 live observers: the sweep threshold is at most max(8, 2 x the array after the last
        // compaction), so the array never holds more than 16 slots. Following only the peak,
        // it would grow to the peak's size.
        #expect(most <= 16, "\(most) slots for 3 live observers")
        #expect(center.notify(Greeter.self) { $0.greet("x") } == 3)
        withExtendedLifetime((keepers, zombies)) {}
    }
}
