import Foundation
import Mosquitto
import TestSupport
import Testing

/// Issue 22 item 2: every value a Home Assistant entity shows is in the state soon after the
/// device is `online`, without any command — read, queried or registered for at connect by the
/// device's driver — and again after a reconnect. The demo's devices (`gatt2mqtt simulate`:
/// GoPro, Rokid glasses, heart-rate sensor) through `gatt2mqtt run`, a hub client on MQTT only.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ValuesAtConnectTests {
    static let camera = "C0:FF:EE:00:00:03"
    static let glasses = "C0:FF:EE:00:00:02"
    static let heart = "C0:FF:EE:00:00:01"
    static let simulate = ["--device", "gopro@\(camera)", "--device", "rokid@\(glasses)", "--device", "hr@\(heart)", "--rokid-battery-interval", "0"]
    /// The heart-rate sensor's battery is a `[read, notify]` mapping (``EndToEnd/heart``).
    static let devices = """
          - {id: camera, address: "\(camera)", profile: gopro}
          - {id: glasses, address: "\(glasses)", profile: rokid}
        """ + "\n" + EndToEnd.heart
    /// The state keys the devices' Home Assistant entities read (docs/homeassistant.md), each
    /// device's own besides `rssi` and `last_seen`. The heart rate comes by notification.
    static let keys: [String: [String]] = [
        "camera": ["internal_battery_percentage", "internal_battery_bars", "sd_card_remaining", "remaining_video_time", "remaining_photos",
                   "video_encoding_duration", "primary_storage", "encoding", "busy", "overheating", "cold", "turbo_transfer", "locate",
                   "preset_group", "video_resolution", "frames_per_second", "video_lens"],
        "glasses": ["battery", "brightness", "volume"],
        "heart": ["battery"],
    ]
    /// Within this of `online` (the Home Assistant test's bound).
    static let bound: Duration = .seconds(15)

    static func object(_ m: MQTTMessage) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(m.payload)) as? [String: Any]) ?? [:]
    }

    /// Whether state `m` has a value for every key of `device`.
    static func complete(_ device: String, _ m: MQTTMessage) -> Bool {
        let o = object(m)
        return keys[device]!.allSatisfy { o[$0] != nil && !(o[$0] is NSNull) }
    }

    @Test func everyEntityHasAValueSoonAfterOnline() async throws {
        let env = try await EndToEnd(simulate: Self.simulate)
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        var states: [String: MQTTSubscription] = [:]
        for device in Self.keys.keys.sorted() { states[device] = try await hub.subscribe("gatt2mqtt/\(device)") }
        let availability = try await hub.subscribe("gatt2mqtt/+/availability")
        let bridge = try env.startBridge(devices: Self.devices)
        let online = await collect(availability, count: 3, timeout: .seconds(20))
        #expect(online.count == 3 && online.allSatisfy { $0.payloadString == #"{"state":"online"}"# }, "\(online.map(\.payloadString))")
        let clock = ContinuousClock()
        let start = clock.now
        for device in Self.keys.keys.sorted() {
            let seen = await collectUntil(states[device]!, timeout: Self.bound) { Self.complete(device, $0) }
            let last = seen.last.map(Self.object) ?? [:]
            #expect(seen.last.map { Self.complete(device, $0) } == true,
                    "\(device) lacks \(Self.keys[device]!.filter { last[$0] == nil }) \(clock.now - start) after online: \(last)")
        }
        print("values at connect: every entity's value within \(clock.now - start) of the last online")
        kill(bridge.processIdentifier, SIGTERM)
        await bridge.exited()
        await hub.disconnect()
    }

    /// After a reconnect the values are read again: the camera's status changed while it was
    /// away (no push: its registrations ended with the link) is in the state, the sensor's
    /// battery is read (and published on its topic) again, and the glasses' answer to
    /// `Dev_GetGlassInfo` puts back the battery level a stray notification had changed.
    @Test func valuesAreReadAgainAfterAReconnect() async throws {
        let env = try await EndToEnd(simulate: Self.simulate)
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let camera = try await hub.subscribe("gatt2mqtt/camera")
        let glasses = try await hub.subscribe("gatt2mqtt/glasses")
        let battery = try await hub.subscribe("gatt2mqtt/heart/battery")
        let availability = try await hub.subscribe("gatt2mqtt/+/availability")
        let bridge = try env.startBridge(devices: Self.devices)
        #expect(await collect(availability, count: 3, timeout: .seconds(20)).count == 3)
        #expect(await collectUntil(camera, timeout: Self.bound) { Self.object($0)["cold"] as? Bool == false }.isEmpty == false)
        #expect(await collectUntil(glasses, timeout: Self.bound) { Self.object($0)["battery"] as? Int == 90 }.last
            .map { Self.object($0)["battery"] as? Int } == 90)
        #expect(await collect(battery, count: 1, timeout: Self.bound).first?.payloadString == #"{"battery_level":85}"#)

        // A NOTIFY Dev_BatteryChanged {"level":87} (the bytes of CapsCLITests' vector) that the
        // glasses' own level (90) does not match: the state follows the notification.
        let notify = "[byte " + stride(from: 0, to: Self.batteryNotify.count, by: 2).map { i in
            "0x" + Self.batteryNotify.dropFirst(i).prefix(2)
        }.joined(separator: ", ") + "]"
        #expect(try env.control("Notify", Self.glasses, "9202", notify).contains("true"))
        #expect(await collectUntil(glasses, timeout: .seconds(10)) { Self.object($0)["battery"] as? Int == 87 }.last
            .map { Self.object($0)["battery"] as? Int } == 87)

        // All three away; the camera gets cold meanwhile (status 85; not pushed: unregistered).
        for address in [Self.camera, Self.glasses, Self.heart] { try env.control("SetInRange", address, "false") }
        let offline = await collect(availability, count: 3, timeout: .seconds(20))
        #expect(offline.allSatisfy { $0.payloadString == #"{"state":"offline"}"# }, "\(offline.map(\.payloadString))")
        try env.control("SetStatus", Self.camera, "85", "[byte 0x01]", interface: "org.gatt2mqtt.SimulatedGoPro1")
        for address in [Self.camera, Self.glasses, Self.heart] { try env.control("SetInRange", address, "true") }
        let back = await collect(availability, count: 3, timeout: .seconds(30))
        #expect(back.count == 3 && back.allSatisfy { $0.payloadString == #"{"state":"online"}"# }, "\(back.map(\.payloadString))")

        let cold = await collectUntil(camera, timeout: Self.bound) { Self.object($0)["cold"] as? Bool == true }
        #expect(cold.last.map { Self.object($0)["cold"] as? Bool } == true, "\(cold.map(\.payloadString))")
        let info = await collectUntil(glasses, timeout: Self.bound) { Self.object($0)["battery"] as? Int == 90 }
        #expect(info.last.map { Self.object($0)["battery"] as? Int } == 90, "\(info.map(\.payloadString))")
        #expect(await collect(battery, count: 1, timeout: Self.bound).first?.payloadString == #"{"battery_level":85}"#)
        kill(bridge.processIdentifier, SIGTERM)
        await bridge.exited()
        await hub.disconnect()
    }

    /// NOTIFY(Dev, Dev_BatteryChanged {"level":87}) as the glasses send it (hex).
    static let batteryNotify = "00000037050375534f8320034465760000002805025353124465765f426174746572794368616e6765640c7b226c6576656c223a38377d"
}
