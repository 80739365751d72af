@testable import BridgeCore
import Testing

/// The core's instants (a `Duration` since a fixed instant of the continuous clock) against the
/// continuous clock's own.
@Suite struct BridgeInstantTests {
    @Test("an instant of the continuous clock comes back exactly, before and after the origin")
    func roundTrip() {
        let now = ContinuousClock.now
        for offset: Duration in [.zero, .nanoseconds(1), .seconds(-3600), .seconds(86_400 * 365), .milliseconds(-1)] {
            let instant = now + offset
            #expect(BridgeInstant(instant).continuous == instant)
            #expect(BridgeInstant(instant) - BridgeInstant(now) == offset)
        }
    }

    @Test("arithmetic and order follow the continuous clock's")
    func arithmeticAndOrder() {
        let a = BridgeInstant(ContinuousClock.now)
        let b = a + .milliseconds(1500)
        #expect(a < b && !(b < a) && a != b)
        #expect(b - a == .milliseconds(1500) && a.duration(to: b) == .milliseconds(1500))
        #expect(b - .milliseconds(1500) == a && a.advanced(by: .milliseconds(1500)) == b)
        var c = a
        c += .seconds(2)
        #expect(c.continuous == a.continuous + .seconds(2))
        #expect([b, c, a].min() == a && [b, c, a].max() == c)
        #expect(BridgeInstant.now >= a)
    }
}
