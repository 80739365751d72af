import Foundation
import Mosquitto
import Testing

/// A passive BTHome thermometer through the whole real stack (issue 23): the model's
/// advertisement on Bumble's radio (radio.py, non-connectable), the kernel and the real
/// bluetoothd 5.66, `gatt2mqtt run` with `profile: advertisement` — its readings reach MQTT as
/// the device's retained state, and a new reading changes it; beside it the encrypted BTHome and
/// Xiaomi advertisers (their longer payloads fit the 31 bytes and are read with their keys).
/// Nested in `RealStackTests` (one VM, one radio, its condition).
extension RealStackTests {
    @Suite struct PassiveBridge {
        static let address = "A4:C1:38:00:00:01"
        static let yaml = """
              - {id: porch, address: "A4:C1:38:00:00:01", profile: advertisement, format: bthome}
              - {id: shed, address: "A4:C1:38:00:00:02", profile: advertisement, format: bthome, bindkey: 231d39c1d7cc1ab1aee224cd096db932}
              - {id: bedroom, address: "A4:C1:38:00:00:03", profile: advertisement, format: xiaomi, bindkey: e9ea895fac7cca6d30532432a516f3a8}
            """

        static func temperature(_ payload: String) -> Double? {
            let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any]
            return object?["temperature"] as? Double
        }

        @Test func bthomeReadingsReachMQTTThroughBluetoothd() async throws {
            let stack = try RealStack(devices: ["bthome@\(Self.address)", "bthome-encrypted@A4:C1:38:00:00:02", "xiaomi@A4:C1:38:00:00:03"],
                                      modelOptions: ["--advertise-interval", "1"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            let state = try await hub.subscribe("gatt2mqtt/porch")
            let encrypted = try await hub.subscribe("gatt2mqtt/shed")
            let xiaomi = try await hub.subscribe("gatt2mqtt/bedroom")
            let started = ContinuousClock.now
            _ = try await stack.startOnline("porch", devices: Self.yaml, hub: hub)
            let online = ContinuousClock.now - started
            let first = await firstMessage(state) { Self.temperature($0) != nil }
            let t1 = first.flatMap { Self.temperature($0.payloadString) }
            #expect(t1.map { (19...24).contains($0) } == true,
                    "\(first?.payloadString ?? "no state"); bridge log:\n\(stack.bridgeLog.suffix(3000))")
            #expect(first?.payloadString.contains(#""humidity":"#) == true && first?.payloadString.contains(#""battery":"#) == true)
            // The next reading (one a second) changes the temperature by 0.05 °C.
            let second = await firstMessage(state, timeout: .seconds(30)) { p in Self.temperature(p).map { $0 != t1 } ?? false }
            let t2 = second.flatMap { Self.temperature($0.payloadString) }
            #expect(t1 != nil && t2 != nil && abs(t2! - t1!) < 1, "\(t1 as Any) → \(t2 as Any)")
            RealStackFigures.record("passive BTHome: bridge start to online", online)
            // The encrypted ones, decrypted with their keys (the demo keys the simulator uses).
            #expect(await firstMessage(encrypted) { Self.temperature($0) != nil } != nil, "encrypted BTHome: no state")
            #expect(await firstMessage(xiaomi) { Self.temperature($0) != nil } != nil, "Xiaomi: no state")
            // Retained: a late subscriber gets the state at once.
            let late = await firstMessage(try await hub.subscribe("gatt2mqtt/porch"), timeout: .seconds(5)) { Self.temperature($0) != nil }
            #expect(late?.retain == true)
            await hub.disconnect()
        }
    }
}
