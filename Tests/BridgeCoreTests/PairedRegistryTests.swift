import BridgeCore
import BridgeStore
import Foundation
import Testing

/// The registry's `paired` (set when the bridge pairs a device, gopro.md §2) survives a restart
/// while the configured address is unchanged; another address is another device.
@Suite struct PairedRegistryTests {
    @Test func pairedSurvivesRestartUnlessTheAddressChanged() async throws {
        let store = try BridgeStore.inMemory()
        try store.upsertDevice(DeviceRecord(id: "dev", address: "C0:FF:EE:00:00:09", profile: "custom"))
        try store.markPaired("dev")
        let seen = Date(timeIntervalSince1970: 1_800_000_000)
        try store.markSeen("dev", at: seen)
        let h = try BridgeTests.Harness(present: false, store: store)
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/bridge/devices")
        }
        let kept = try #require(try store.devices().first)
        #expect(kept.paired && kept.lastSeen == seen)

        try store.upsertDevice(DeviceRecord(id: "dev", address: "C0:FF:EE:00:00:99", profile: "custom", paired: true))
        let moved = try BridgeTests.Harness(present: false, store: store)  // configured address …:09 again
        try await moved.running {
            _ = try await moved.mqtt.wait(for: "gatt2mqtt/bridge/devices")
        }
        let reset = try #require(try store.devices().first)
        #expect(!reset.paired && reset.address == "C0:FF:EE:00:00:09")
    }
}
