import BinaryCoding
import BridgeConfig
import BridgeCore
import BridgeStore
import DeviceProfiles
import DeviceSimulators
import Testing

/// Periodic battery notifies of the simulated glasses (rokid-caps.md `Dev_BatteryChanged`)
/// merged into the device state by the bridge core over BlueZCentral and the emulator.
@Suite(.serialized, .timeLimit(.minutes(1))) struct RokidBridgeTests {
    static let address = "C0:FF:EE:00:00:32"

    @Test func periodicBatteryNotifiesReachTheState() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        let glasses = SimulatedRokid(address: Self.address, batteryInterval: .milliseconds(100))
        try await withEmulator(options, devices: [glasses]) { env in
            var d = DeviceConfig(id: "glasses", profile: .rokid)
            d.address = Self.address
            let store = try BridgeStore.inMemory()
            try await withBridge(env, device: d, store: store, driver: { RokidDriver(now: { 0 }) }) { mqtt in
                // After authentication the glasses notify 89, 88, … every 100 ms; each lands in state.
                func batteries() -> [Int] {
                    mqtt.messages("gatt2mqtt/glasses").compactMap { try? JSONValue(parsing: $0.payload)["battery"]?.intValue }
                }
                #expect(await eventually(5) { Set(batteries()).count >= 3 })
                let seen = batteries()
                #expect(seen.first == 89)
                #expect(seen == seen.sorted(by: >))  // draining, 1 % per notify
                #expect((try? store.states()["glasses"]?["battery"]?.intValue) == seen.last)
                // The notifies are also events.
                #expect(mqtt.messages("gatt2mqtt/glasses/event").contains { $0.text.contains("Dev_BatteryChanged") })
            }
        }
    }
}
