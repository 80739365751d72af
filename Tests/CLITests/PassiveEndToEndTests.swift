import Foundation
import Mosquitto
import TestSupport
import Testing

/// Sensors that never connect (issue 23), end to end through the real parts: `mosquitto`,
/// `gatt2mqtt simulate` with an advertiser of every format (BTHome plain and encrypted, Xiaomi
/// MiBeacon encrypted, ATC1441, PVVX, RuuviTag, Govee) and `gatt2mqtt run` with a passive device
/// for each, as separate processes; the test speaks MQTT only.
@Suite(.serialized, .timeLimit(.minutes(3))) struct PassiveEndToEndTests {
    /// A key of our own for the encrypted BTHome sensor (passed as `…#KEY`), and the demo keys
    /// the simulator uses without one (docs/advertisements.md "Try it").
    static let shedKey = "00112233445566778899aabbccddeeff"
    static let xiaomiDemoKey = "e9ea895fac7cca6d30532432a516f3a8"

    /// One simulated advertiser and the passive device that reads it.
    struct Sensor {
        var id: String
        var simulate: String
        var format: String
        var bindkey: String? = nil
        /// The state's keys, each with its Home Assistant unit and device class.
        var fields: [(key: String, unit: String, deviceClass: String)]
        /// The resolution of the format's temperature and humidity (°C, %).
        var resolution: (celsius: Double, percent: Double) = (0.01, 0.01)

        var yaml: String {
            "  - {id: \(id), address: \"\(simulate.split(separator: "@")[1].prefix(17))\", profile: advertisement, format: \(format)"
                + (bindkey.map { ", bindkey: \($0)" } ?? "") + "}"
        }
    }

    static let thermometer = [("temperature", "°C", "temperature"), ("humidity", "%", "humidity"), ("battery", "%", "battery")]
    static let volts = ("voltage", "V", "voltage")

    static let sensors = [
        Sensor(id: "porch", simulate: "bthome@A4:C1:38:00:00:01", format: "bthome", fields: thermometer),
        Sensor(id: "shed", simulate: "bthome-encrypted@A4:C1:38:00:00:02#\(shedKey)", format: "bthome", bindkey: shedKey,
               fields: thermometer),
        Sensor(id: "bedroom", simulate: "xiaomi@A4:C1:38:00:00:03", format: "xiaomi", bindkey: xiaomiDemoKey,
               fields: thermometer, resolution: (0.1, 0.1)),
        Sensor(id: "atc", simulate: "atc@A4:C1:38:00:00:04", format: "atc", fields: thermometer + [volts], resolution: (0.1, 1)),
        Sensor(id: "pvvx", simulate: "pvvx@A4:C1:38:00:00:05", format: "atc", fields: thermometer + [volts]),
        Sensor(id: "ruuvi", simulate: "ruuvi@C0:FF:EE:00:00:06", format: "ruuvi",
               fields: [("temperature", "°C", "temperature"), ("humidity", "%", "humidity"), ("pressure", "hPa", "atmospheric_pressure"), volts]),
        Sensor(id: "govee", simulate: "govee@A4:C1:38:00:00:07", format: "govee", fields: thermometer, resolution: (0.1, 0.1)),
    ]
    /// An encrypted BTHome sensor on the demo key whose device has another key: refused.
    static let wrongKey = Sensor(id: "wrongkey", simulate: "bthome-encrypted@A4:C1:38:00:00:08", format: "bthome",
                                 bindkey: shedKey, fields: [])

    /// The simulator's readings after `n` steps (docs/bluez.md "Passive advertisers"): from
    /// 21.50 °C, 45.00 %, 92 %, +0.05 °C and +0.25 % a step (turning at 24 and 19 °C, 55 and
    /// 40 %), 1 % less battery every 100 steps.
    static func readings(after n: Int) -> (celsius: Double, percent: Double, battery: Int) {
        var c = 2150, p = 4500, b = 92, warming = true, drying = false
        for step in stride(from: 1, through: n, by: 1) {
            if warming, c >= 2400 { warming = false }
            if !warming, c <= 1900 { warming = true }
            c += warming ? 5 : -5
            if !drying, p >= 5500 { drying = true }
            if drying, p <= 4000 { drying = false }
            p += drying ? -25 : 25
            if step % 100 == 0, b > 5 { b -= 1 }
        }
        return (Double(c) / 100, Double(p) / 100, b)
    }

    /// Whether `state` holds readings the simulator sends at some step (within the format's
    /// resolution, and one step either side: a Xiaomi sensor sends one value per advertisement).
    static func plausible(_ state: [String: Any], _ sensor: Sensor) -> Bool {
        guard let t = state["temperature"] as? Double, let h = state["humidity"] as? Double else { return false }
        let battery = state["battery"] as? Int
        return (0..<400).contains { n in
            let r = readings(after: n)
            return abs(t - r.celsius) <= sensor.resolution.celsius + 0.051 && abs(h - r.percent) <= sensor.resolution.percent + 0.251
                && (battery == nil || battery == r.battery)
        }
    }

    static func json(_ m: MQTTMessage) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(m.payload)) as? [String: Any]) ?? [:]
    }

    @Test func everyFormatReachesMQTTAndHomeAssistant() async throws {
        let env = try await EndToEnd(simulate: (Self.sensors + [Self.wrongKey]).flatMap { ["--device", $0.simulate] }
            + ["--advertise-interval", "0.3", "--advertising-interval", "0.1"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let states = try await hub.subscribe("gatt2mqtt/+")
        let availability = try await hub.subscribe("gatt2mqtt/+/availability")
        let events = try await hub.subscribe("gatt2mqtt/bridge/event")
        let configs = try await hub.subscribe("homeassistant/+/+/+/config")
        _ = try env.startBridge(devices: (Self.sensors + [Self.wrongKey]).map(\.yaml).joined(separator: "\n"))

        // Every device online, with every field in its retained state (deadline, not a sleep).
        let ids = Set(Self.sensors.map(\.id))
        var online = Set<String>()
        _ = await collectUntil(availability, timeout: .seconds(30)) { m in
            if m.payloadString == #"{"state":"online"}"# { online.insert(String(m.topic.split(separator: "/")[1])) }
            return online.isSuperset(of: ids)
        }
        #expect(online == ids, "online: \(online); log: \(env.bridgeLog().suffix(2000))")
        var last: [String: [String: Any]] = [:]
        let complete = { (last: [String: [String: Any]]) in
            Self.sensors.allSatisfy { s in s.fields.allSatisfy { last[s.id]?[$0.key] != nil } }
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while !complete(last), ContinuousClock.now < deadline {
            for m in await collect(states, count: 1, timeout: deadline - .now) {
                let id = String(m.topic.dropFirst("gatt2mqtt/".count))
                var merged = last[id] ?? [:]
                merged.merge(Self.json(m)) { _, new in new }
                last[id] = merged
            }
        }
        for s in Self.sensors {
            let state = last[s.id] ?? [:]
            #expect(s.fields.allSatisfy { state[$0.key] is NSNumber }, "\(s.id): \(state)")
            #expect(Self.plausible(state, s), "\(s.id): \(state)")
            if let v = state["voltage"] as? Double { #expect((2.0...3.1).contains(v), "\(s.id): \(state)") }
            if let p = state["pressure"] as? Double { #expect((1013.0..<1014.0).contains(p), "\(s.id): \(state)") }
            #expect(state["rssi"] is Int, "\(s.id): \(state)")
        }

        // Home Assistant: a config per field, with its unit and device class.
        let wanted = Set(Self.sensors.flatMap { s in s.fields.map { "homeassistant/sensor/gatt2mqtt_\(s.id)/\($0.key)/config" } })
        var found: [String: [String: Any]] = [:]
        _ = await collectUntil(configs, timeout: .seconds(15)) { m in
            if wanted.contains(m.topic) { found[m.topic] = Self.json(m) }
            return found.count == wanted.count
        }
        for s in Self.sensors {
            for f in s.fields {
                let config = found["homeassistant/sensor/gatt2mqtt_\(s.id)/\(f.key)/config"]
                #expect(config?["unit_of_measurement"] as? String == f.unit && config?["device_class"] as? String == f.deviceClass
                        && config?["state_topic"] as? String == "gatt2mqtt/\(s.id)", "\(s.id).\(f.key): \(config ?? [:])")
            }
        }

        // The wrong bindkey: a device_error event naming the device and the cause, and no state.
        let error = await collectUntil(events, timeout: .seconds(10)) { $0.payloadString.contains(#""device":"wrongkey""#) }.last
        let event = error.map(Self.json) ?? [:], data = event["data"] as? [String: Any] ?? [:]
        #expect(event["type"] as? String == "device_error" && data["device"] as? String == "wrongkey"
                && (data["message"] as? String)?.contains("wrong bindkey") == true, "\(error?.payloadString ?? "no event")")
        // Retained messages come at subscribe time, before the marker this client publishes after.
        let retained = try await hub.subscribe("gatt2mqtt/#")
        try await hub.publish(topic: "gatt2mqtt/e2e_marker/end", payload: Array("end".utf8), qos: .atLeastOnce)
        let before = await collectUntil(retained, timeout: .seconds(30)) { $0.topic == "gatt2mqtt/e2e_marker/end" }
        #expect(before.last?.topic == "gatt2mqtt/e2e_marker/end" && before.contains { $0.topic == "gatt2mqtt/porch" && $0.retain },
                "\(before.map(\.topic))")
        #expect(!before.contains { $0.topic == "gatt2mqtt/wrongkey" }, "\(before.map(\.topic))")
        #expect(!before.contains { $0.topic == "gatt2mqtt/wrongkey/availability" && $0.payloadString.contains("online") })
        await hub.disconnect()
    }
}
