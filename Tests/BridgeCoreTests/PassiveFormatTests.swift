import BinaryCoding
import BridgeConfig
import BridgeStore
import DeviceProfiles
import Foundation
import TestSupport
import Testing
@testable import BridgeCore

/// Passive devices with the registered profiles (DeviceProfiles.all) over the core's fakes: a
/// user's layout format from a YAML configuration, its Home Assistant entities before anything
/// is heard.
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

    /// An invented soil probe (Tests/Layouts/soil-probe.yaml's format), written in the
    /// configuration: manufacturer data of company 0xFFFF starting 0x50.
    static let soilYAML = """
        homeassistant: {enabled: true}
        advertisement_formats:
          soil_probe:
            match: {manufacturer_id: 0xFFFF, prefix: "50"}
            packet_id: sequence
            layout:
              fields:
                - {type: pad, value: "50"}
                - {name: sequence, type: u8}
                - type: flags
                  size: 2
                  bits:
                    - {name: moisture, bit: 0, width: 10, scale: 1/10, invalid: 0x3FF, unit: "%"}
                    - {name: battery_low, bit: 15}
                - {name: temperature, type: i16, scale: 0.01, invalid: 0x7FFF, unit: °C}
                - {name: conductivity, type: u16, endian: big, unit: µS/cm}
        devices:
          - {id: bed, address: "C0:FF:EE:00:00:09", profile: advertisement, format: soil_probe}

        """

    @Test func aUsersLayoutFormatDecodesIntoTheState() async throws {
        let h = try Harness(yaml: Self.soilYAML, store: try BridgeStore.inMemory())
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
}
