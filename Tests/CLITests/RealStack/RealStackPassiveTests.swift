import Foundation
import Mosquitto
import Testing

/// A passive BTHome thermometer through the whole real stack (issue 23): the model's
/// advertisement on Bumble's radio (radio.py, non-connectable), the kernel and the real
/// bluetoothd 5.66, `gatt2mqtt run` with `profile: advertisement` — its readings reach MQTT as
/// the device's retained state, and a new reading changes it. Nested in `RealStackTests` (one
/// VM, one radio, its condition).
extension RealStackTests {
    @Suite struct PassiveBridge {
        static let address = "A4:C1:38:00:00:01"
        static let yaml = #"  - {id: porch, address: "A4:C1:38:00:00:01", profile: advertisement, format: bthome}"#

        static func temperature(_ payload: String) -> Double? {
            let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any]
            return object?["temperature"] as? Double
        }

        @Test func bthomeReadingsReachMQTTThroughBluetoothd() async throws {
            let stack = try RealStack(devices: ["bthome@\(Self.address)"], modelOptions: ["--advertise-interval", "1"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            let state = try await hub.subscribe("gatt2mqtt/porch")
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
            // Retained: a late subscriber gets the state at once.
            let late = await firstMessage(try await hub.subscribe("gatt2mqtt/porch"), timeout: .seconds(5)) { Self.temperature($0) != nil }
            #expect(late?.retain == true)
            await hub.disconnect()
        }
    }
}
