import BinaryCoding
import Foundation
import Testing
@testable import BridgeCore

/// The device state on its own: merging, `last_seen`, RSSI steps.
@Suite struct DeviceStateTests {
    let noon = Date(timeIntervalSince1970: 1_748_779_200)  // 2025-06-01T12:00:00Z

    @Test func aChangeIsStampedAndAnEqualValueIsNoNews() throws {
        var s = DeviceState(["battery": 40])
        let empty = s.merge([:], at: noon)
        #expect(empty == nil)
        let same = s.merge(["battery": 40], at: noon)
        #expect(same == nil, "unchanged: nothing to store or publish")
        let merged = s.merge(["battery": 41], at: noon)
        let changed = try #require(merged)
        #expect(changed.json == #"{"battery":41,"last_seen":"2025-06-01T12:00:00Z"}"#)
        #expect(!changed.hardwareChanged)
        #expect(s.values["battery"] == 41)
    }

    @Test func hardwareChangesAreFlagged() throws {
        var s = DeviceState([:])
        let first = s.merge(["hardware": ["serial_number": "S1"]], at: noon)
        #expect(first?.hardwareChanged == true)
        let again = s.merge(["hardware": ["serial_number": "S1"]], at: noon)
        #expect(again == nil)
        let other = s.merge(["hardware": ["serial_number": "S2"], "battery": 1], at: noon)
        #expect(other?.hardwareChanged == true)
        let battery = s.merge(["battery": 2], at: noon)
        #expect(battery?.hardwareChanged == false)
    }

    @Test func stampAlwaysSetsLastSeen() {
        var s = DeviceState(["battery": 40])
        let first = s.stamp([:], at: noon)
        #expect(first == #"{"battery":40,"last_seen":"2025-06-01T12:00:00Z"}"#)
        let second = s.stamp(["rssi": -60], at: noon.addingTimeInterval(1))
        #expect(second == #"{"battery":40,"last_seen":"2025-06-01T12:00:01Z","rssi":-60}"#)
    }

    @Test func rssiIsNewsFirstThenOnlyByTheStep() {
        var s = DeviceState([:])
        #expect(s.rssiIsNews(-70))
        _ = s.stamp(["rssi": -70], at: noon)
        #expect(!s.rssiIsNews(-74) && !s.rssiIsNews(-66))
        #expect(s.rssiIsNews(-75) && s.rssiIsNews(-65))
        #expect(BridgeDefaults.rssiStep == 5)
    }

    /// A state whose `rssi` came from elsewhere (a device's own field, the store) may hold any
    /// integer: comparing with it does not overflow (Int64.max - -70 trapped).
    @Test func rssiIsNewsWhateverTheStateHolds() {
        for published: Int64 in [.max, .min, .min + 1] {
            var s = DeviceState([:])
            _ = s.stamp(["rssi": .int(published)], at: noon)
            #expect(s.rssiIsNews(-70) && s.rssiIsNews(20), "\(published)")
        }
    }
}
