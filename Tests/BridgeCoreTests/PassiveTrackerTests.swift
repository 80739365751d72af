import BinaryCoding
import Synchronization
import Testing
@testable import BridgeCore

/// ``PassiveTracker``: what a passive device's readings come to, on a clock the test moves.
@Suite struct PassiveTrackerTests {
    let t0 = BridgeInstant.now

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
        // The last accepted counter again: a repeat (sensors send each advertisement several
        // times), neither an error nor a sign of life; an older one: a replay.
        #expect(t.accept(reading(20, counter: 100), at: t0) == .repeated)
        #expect(t.accept(reading(20, counter: 99), at: t0) == .replayed(counter: 99))
        #expect(!t.online)
        #expect(t.accept(reading(20, counter: 101), at: t0) == .publish(["temperature": .double(20)]))
        #expect(t.lastCounter == 101)
        #expect(t.accept(reading(25, counter: 101), at: t0 + .seconds(1)) == .repeated)
        #expect(t.lastGood == t0)  // the repeat did not keep it alive
        #expect(t.accept(reading(25, counter: 100), at: t0 + .seconds(1)) == .replayed(counter: 100))
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

/// ``LastDecoded``: an advertisement with the bytes of the last one read is not decoded again.
@Suite struct LastDecodedTests {
    /// Reads the first byte of service data 0xFCD2 as `temperature`; empty bytes are an error.
    /// Counts its calls.
    final class CountingDecoder: PassiveDecoder {
        let calls = Mutex(0)
        func decode(_ ad: Advertisement) throws(PassiveDecodeError) -> PassiveReading? {
            calls.withLock { $0 += 1 }
            guard let bytes = ad.serviceData["0000fcd2-0000-1000-8000-00805f9b34fb"] else { return nil }
            guard let first = bytes.first else { throw PassiveDecodeError("empty") }
            return PassiveReading(values: ["temperature": .int(Int64(first))], packetID: UInt32(bytes.count))
        }
    }

    func ad(_ bytes: [UInt8]?, address: String = "A4:C1:38:00:00:01", rssi: Int = -70) -> Advertisement {
        Advertisement(address: address, rssi: rssi, serviceData: bytes.map { ["0000fcd2-0000-1000-8000-00805f9b34fb": $0] } ?? [:])
    }

    @Test func decodesTheSameBytesOnce() throws {
        let counting = CountingDecoder()
        var d = LastDecoded(counting)
        let first = try d.decode(ad([21]))
        #expect(first == PassiveReading(values: ["temperature": .int(21)], packetID: 1))
        // The same bytes at another RSSI: the reading of the last decode, the decoder not called.
        #expect(try d.decode(ad([21], rssi: -80)) == first)
        #expect(counting.calls.withLock { $0 } == 1)
        // Other bytes, or the same bytes from another address: decoded.
        #expect(try d.decode(ad([22]))?.values["temperature"] == .int(22))
        #expect(try d.decode(ad([22], address: "A4:C1:38:00:00:02"))?.values["temperature"] == .int(22))
        #expect(counting.calls.withLock { $0 } == 3)
    }

    @Test func keepsNoErrorAndNoOtherFormat() throws {
        let counting = CountingDecoder()
        var d = LastDecoded(counting)
        for _ in 0..<2 { #expect(throws: PassiveDecodeError("empty")) { try d.decode(ad([])) } }
        for _ in 0..<2 { #expect(try d.decode(ad(nil)) == nil) }
        #expect(counting.calls.withLock { $0 } == 4)
    }
}
