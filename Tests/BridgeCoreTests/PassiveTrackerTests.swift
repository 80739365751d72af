import BinaryCoding
import Testing
@testable import BridgeCore

/// ``PassiveTracker``: what a passive device's readings come to, on a clock the test moves.
@Suite struct PassiveTrackerTests {
    let t0 = ContinuousClock.now

    func reading(_ temperature: Double, id: UInt32? = nil, counter: UInt32? = nil) -> PassiveReading {
        PassiveReading(values: ["temperature": .double(temperature)], packetID: id, counter: counter)
    }

    @Test func publishesChangesOnlyAndGoesOnline() {
        var t = PassiveTracker(minInterval: .zero, silence: .seconds(900))
        #expect(!t.online)
        #expect(t.accept(reading(21.5), at: t0) == .publish(["temperature": .double(21.5)]))
        #expect(t.online)
        #expect(t.accept(reading(21.5), at: t0 + .seconds(1)) == .unchanged)
        #expect(t.accept(reading(21.6), at: t0 + .seconds(2)) == .publish(["temperature": .double(21.6)]))
    }

    @Test func dropsARepeatedPacketID() {
        var t = PassiveTracker(minInterval: .zero, silence: .seconds(900))
        #expect(t.accept(reading(20, id: 7), at: t0) == .publish(["temperature": .double(20)]))
        // The same packet again (a sensor sends each reading several times), even with other bytes.
        #expect(t.accept(reading(30, id: 7), at: t0 + .milliseconds(100)) == .repeated)
        #expect(t.state["temperature"] == .double(20))
        #expect(t.accept(reading(30, id: 8), at: t0 + .seconds(1)) == .publish(["temperature": .double(30)]))
    }

    @Test func refusesAReplayedCounter() {
        var t = PassiveTracker(minInterval: .zero, silence: .seconds(900), lastCounter: 100)
        // Restored from the store: the window does not reopen after a restart.
        #expect(t.accept(reading(20, counter: 100), at: t0) == .replayed(counter: 100))
        #expect(t.accept(reading(20, counter: 99), at: t0) == .replayed(counter: 99))
        #expect(!t.online)
        #expect(t.accept(reading(20, counter: 101), at: t0) == .publish(["temperature": .double(20)]))
        #expect(t.lastCounter == 101)
        #expect(t.accept(reading(25, counter: 101), at: t0 + .seconds(1)) == .replayed(counter: 101))
        #expect(t.state["temperature"] == .double(20))
    }

    @Test func minIntervalHoldsTheNewestAndPublishesItWhenDue() {
        var t = PassiveTracker(minInterval: .seconds(60), silence: .seconds(900))
        #expect(t.accept(reading(20), at: t0) == .publish(["temperature": .double(20)]))
        #expect(t.accept(reading(21), at: t0 + .seconds(10)) == .held)
        #expect(t.accept(reading(22), at: t0 + .seconds(20)) == .held)
        #expect(t.nextDue == t0 + .seconds(60))
        #expect(t.tick(at: t0 + .seconds(59)) == [])
        #expect(t.tick(at: t0 + .seconds(60)) == [.publish(["temperature": .double(22)])])
        #expect(t.tick(at: t0 + .seconds(200)) == [])  // nothing held any more
        // Back to the first value within the interval: the held change is dropped, nothing to publish.
        #expect(t.accept(reading(23), at: t0 + .seconds(210)) == .publish(["temperature": .double(23)]))
        #expect(t.accept(reading(24), at: t0 + .seconds(215)) == .held)
        #expect(t.accept(reading(23), at: t0 + .seconds(216)) == .unchanged)
        #expect(t.tick(at: t0 + .seconds(300)) == [])
    }

    @Test func silenceMakesItOfflineOnce() {
        var t = PassiveTracker(minInterval: .zero, silence: .seconds(900))
        #expect(t.tick(at: t0 + .seconds(5000)) == [])  // never heard: not online, nothing to say
        _ = t.accept(reading(20), at: t0)
        #expect(t.tick(at: t0 + .seconds(899)) == [])
        #expect(t.tick(at: t0 + .seconds(900)) == [.offline])
        #expect(!t.online)
        #expect(t.tick(at: t0 + .seconds(2000)) == [])
        // A repeat still says the device is there.
        _ = t.accept(reading(20, id: 1), at: t0 + .seconds(2001))
        #expect(t.online)
        #expect(t.accept(reading(20, id: 1), at: t0 + .seconds(2800)) == .repeated)
        #expect(t.tick(at: t0 + .seconds(3000)) == [])
        #expect(t.tick(at: t0 + .seconds(3700)) == [.offline])
    }
}
