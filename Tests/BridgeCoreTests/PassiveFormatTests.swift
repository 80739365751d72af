import AdvertisementCodec
import BinaryCoding
import BridgeConfig
import BridgeStore
import CoreMetrics
import DeviceProfiles
import Foundation
import MetricsTestKit
import TestSupport
import Testing
@testable import BridgeCore

/// Passive devices with the registered profiles (DeviceProfiles.all) over the core's fakes: a
/// user's layout format from a YAML configuration, its Home Assistant entities before anything
/// is heard, and an encrypted BTHome sensor's replay counter kept across a restart on one SQLite file.
@Suite struct PassiveFormatTests {
    typealias Scanner = PassiveDeviceTests.ScriptedScanner

    struct Harness {
        let mqtt = FakeMQTT()
        let central = Scanner()
        let bridge: Bridge

        init(yaml: String, store: BridgeStore) throws {
            let config = try Configuration(yaml: yaml, profiles: DeviceProfiles.all)
            bridge = try Bridge(configuration: config, store: store, mqtt: mqtt, central: central,
                                profiles: DeviceProfiles.catalog(), tick: .milliseconds(10), clock: ManualClock().bridgeClock)
        }

        func advertise(_ ad: Advertisement) async throws {
            let sent = await eventually { central.advertise(ad) }
            try #require(sent, "the bridge's discovery never ran")
        }
    }

    /// An invented soil probe: Tests/Layouts/soil-probe.yaml (manufacturer data of company
    /// 0xFFFF starting 0x50), written into the configuration under `advertisement_formats`.
    static var soilYAML: String {
        get throws {
            let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Layouts/soil-probe.yaml")
            let definition = try String(contentsOf: file, encoding: .utf8).split(separator: "\n").map { "    " + $0 }.joined(separator: "\n")
            return "homeassistant: {enabled: true}\nadvertisement_formats:\n  soil_probe:\n" + definition
                + "\ndevices:\n  - {id: bed, address: \"C0:FF:EE:00:00:09\", profile: advertisement, format: soil_probe}\n"
        }
    }

    @Test func aUsersLayoutFormatDecodesIntoTheState() async throws {
        let h = try Harness(yaml: try Self.soilYAML, store: try BridgeStore.inMemory())
        try await h.bridge.running {
            // Home Assistant's entities come from the format's fields, before anything is heard.
            let moisture = try await h.mqtt.wait(for: "homeassistant/sensor/gatt2mqtt_bed/moisture/config")
            let config = try JSONValue(parsing: moisture[0].payload)
            #expect(config["device_class"] == "moisture" && config["unit_of_measurement"] == "%", "\(moisture[0].text)")
            _ = try await h.mqtt.wait(for: "homeassistant/binary_sensor/gatt2mqtt_bed/battery_low/config")
            _ = try await h.mqtt.wait(for: "homeassistant/sensor/gatt2mqtt_bed/conductivity/config")
            #expect(h.mqtt.messages("gatt2mqtt/bed").isEmpty)
            #expect(!h.mqtt.sent.contains { $0.topic.contains("/sequence/") }, "the packet id is no entity")
            try await h.advertise(Advertisement(address: "C0:FF:EE:00:00:09", rssi: -70,
                                                manufacturerData: [0xFFFF: [0x50, 0x2A, 0xC7, 0x81, 0x3A, 0x07, 0x01, 0x5E]]))
            let state = try #require(try JSONValue(parsing: try await h.mqtt.wait(for: "gatt2mqtt/bed")[0].payload).objectValue)
            #expect(state["moisture"] == 45.5 && state["battery_low"] == true && state["temperature"] == 18.5 && state["conductivity"] == 350,
                    "\(state)")
            #expect(state["sequence"] == nil)
        }
    }

    /// A `config/reload` that changes `advertisement_formats` says a restart is required (the
    /// formats' Home Assistant entities are those of the start).
    @Test func changedFormatsOnReloadNeedARestart() async throws {
        let yaml = try Self.soilYAML
        let changed = yaml.replacingOccurrences(of: "unit: µS/cm", with: "unit: mS/cm")
        #expect(changed != yaml)
        let mqtt = FakeMQTT()
        let bridge = try Bridge(configuration: try Configuration(yaml: yaml, profiles: DeviceProfiles.all), store: try BridgeStore.inMemory(),
                                mqtt: mqtt, central: Scanner(), profiles: DeviceProfiles.catalog(), tick: .milliseconds(10),
                                clock: ManualClock().bridgeClock,
                                control: BridgeControl(reloadConfiguration: { try Configuration(yaml: changed, profiles: DeviceProfiles.all) }))
        try await bridge.running {
            let answer = try await BridgeRequestTests.request(bridge, mqtt, "config/reload", "")
            #expect(answer["data"]?["restart_required"] == ["advertisement_formats"], "\(answer)")
        }
    }

    static let key: [UInt8] = (0..<16).map { UInt8($0 * 17) }
    static let address = "A4:C1:38:00:00:51"

    static func encrypted(counter: UInt32, temperature: Double) throws -> Advertisement {
        let data = try BTHome.encode([(0x02, .number(temperature))],
                                     encryption: .init(key: key, counter: counter, address: address))
        return Advertisement(address: address, rssi: -60, serviceData: [AdvertisementPacket.uuid(0xFCD2): data])
    }

    static func yaml(key: [UInt8]) -> String {
        "devices:\n  - {id: porch, address: \"\(address)\", profile: advertisement, format: bthome, bindkey: \(Hex.encode(key))}\n"
            + "  - {id: shed, address: \"\(shedAddress)\", profile: advertisement, format: bthome}\n"
    }

    /// A second sensor, unencrypted: what it publishes shows how far the scan was delivered.
    static let shedAddress = "A4:C1:38:00:00:52"

    /// Returns once the `porch` session handled every advertisement sent before this call: the
    /// bridge hands the scan's advertisements to the sessions in order, so once `shed`'s (sent
    /// after them) is published, porch's were posted to its session, and `settled` waits for them.
    static func delivered(_ h: Harness, shedTemperature: Int) async throws {
        let data = try BTHome.encode([(0x02, .number(Double(shedTemperature)))])
        try await h.advertise(Advertisement(address: shedAddress, rssi: -60, serviceData: [AdvertisementPacket.uuid(0xFCD2): data]))
        _ = try await h.mqtt.wait(for: "gatt2mqtt/shed") { $0.contains { $0.text.contains(#""temperature":\#(shedTemperature)"#) } }
        await h.bridge.session("porch")!.settled()
    }

    static func decodeErrors(_ m: TestMetrics) -> Int64 {
        (try? m.expectCounter(BridgeMetrics.Name.decodeErrors, [("device", "porch")]).totalValue) ?? 0
    }

    /// The last accepted counter is stored with the state: after a restart on the same SQLite
    /// file the advertisement accepted before is a repeat (nothing published) and an older one is
    /// refused as a replay (counted as a decode error),
    /// a newer one is accepted; under another key the stored counter is not this key's.
    @Test func aReplayIsRefusedAcrossARestart() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gatt2mqtt-replay-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("state.sqlite").path
        let first = try Self.encrypted(counter: 1000, temperature: 21.5)
        do {
            let h = try Harness(yaml: Self.yaml(key: Self.key), store: try BridgeStore(path: path))
            try await h.bridge.running {
                try await h.advertise(first)
                let state = try await h.mqtt.wait(for: "gatt2mqtt/porch")
                #expect(try JSONValue(parsing: state[0].payload)["temperature"] == 21.5)
            }
        }
        do {
            let m = TestMetrics()
            let h = try withMetricsFactory(m) { () throws in try Harness(yaml: Self.yaml(key: Self.key), store: try BridgeStore(path: path)) }
            try await h.bridge.running {
                // The advertisement accepted before the restart, heard again: a repeat (the
                // sensor sends each several times), not published, not an error.
                try await h.advertise(first)
                try await Self.delivered(h, shedTemperature: 10)
                #expect(Self.decodeErrors(m) == 0)
                #expect(h.mqtt.messages("gatt2mqtt/porch").isEmpty)
                // An older one recorded earlier: a replay, refused and counted.
                try await h.advertise(try Self.encrypted(counter: 999, temperature: 30))
                try await Self.delivered(h, shedTemperature: 11)
                #expect(Self.decodeErrors(m) == 1, "the replay is refused and counted")
                try await h.advertise(try Self.encrypted(counter: 1001, temperature: 22))
                let state = try await h.mqtt.wait(for: "gatt2mqtt/porch")
                #expect(try JSONValue(parsing: state[0].payload)["temperature"] == 22)
            }
        }
        // A new key (a replaced sensor) starts from its own first counter.
        let newKey = Self.key.map { $0 ^ 0xFF }
        do {
            let h = try Harness(yaml: Self.yaml(key: newKey), store: try BridgeStore(path: path))
            try await h.bridge.running {
                let data = try BTHome.encode([(0x02, .number(5))], encryption: .init(key: newKey, counter: 1, address: Self.address))
                try await h.advertise(Advertisement(address: Self.address, rssi: -60, serviceData: [AdvertisementPacket.uuid(0xFCD2): data]))
                let state = try await h.mqtt.wait(for: "gatt2mqtt/porch") { $0.contains { $0.text.contains(#""temperature":5"#) } }
                #expect(!state.isEmpty)
            }
        }
    }
}
