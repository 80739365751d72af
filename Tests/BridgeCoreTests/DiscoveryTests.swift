import BinaryCoding
import BridgeConfig
import Testing
@testable import BridgeCore

@Suite struct DiscoveryTests {
    let ha = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "gatt2mqtt"), version: "0.1.0")

    func device(_ id: String, _ p: DeviceProfile, _ addr: String) -> DeviceConfig {
        var d = DeviceConfig(id: id, profile: p)
        d.address = addr
        return d
    }

    @Test func goproBatteryEntityIsExact() throws {
        let msgs = ha.messages(for: [device("camera", .gopro, "C0:FF:EE:00:00:01")])
        let battery = try #require(msgs.first { $0.topic == "homeassistant/sensor/gatt2mqtt_camera/battery/config" })
        #expect(battery.qos == 1 && battery.retain)
        let j = try JSONValue(parsing: battery.payload)
        #expect(j["unique_id"] == "gatt2mqtt_c0ffee000001_battery")
        #expect(j["default_entity_id"] == "sensor.camera_battery" && j["object_id"] == nil, "object_id is gone from HA (2026.4)")
        #expect(j["state_topic"] == "gatt2mqtt/camera")
        #expect(j["value_template"] == "{{ value_json.internal_battery_percentage }}")
        #expect(j["availability_mode"] == "all")
        #expect(j["availability"] == [["topic": "gatt2mqtt/bridge/state", "value_template": "{{ value_json.state }}"],
                                      ["topic": "gatt2mqtt/camera/availability", "value_template": "{{ value_json.state }}"]])
        #expect(j["device"]?["identifiers"] == ["gatt2mqtt_c0ffee000001"])
        #expect(j["origin"]?["name"] == "gatt2mqtt")
        let shutter = try #require(msgs.first { $0.topic == "homeassistant/switch/gatt2mqtt_camera/shutter/config" })
        #expect(try JSONValue(parsing: shutter.payload)["command_topic"] == "gatt2mqtt/camera/set/shutter")
    }

    /// Every device names `via_device: gatt2mqtt_bridge`, so the bridge is published as a device:
    /// its connection state (no availability of its own: it *is* the bridge's availability) and
    /// its version, both diagnostic.
    @Test func theBridgeIsADeviceWithConnectionStateAndVersion() throws {
        let msgs = ha.messages(for: [device("camera", .gopro, "C0:FF:EE:00:00:01")])
        let state = try #require(msgs.first { $0.topic == "homeassistant/binary_sensor/gatt2mqtt_bridge/connection_state/config" })
        let s = try JSONValue(parsing: state.payload)
        #expect(state.retain && s["state_topic"] == "gatt2mqtt/bridge/state" && s["payload_on"] == "online" && s["payload_off"] == "offline")
        #expect(s["device_class"] == "connectivity" && s["entity_category"] == "diagnostic" && s["availability"] == nil)
        #expect(s["device"]?["identifiers"] == ["gatt2mqtt_bridge"])
        let version = try #require(msgs.first { $0.topic == "homeassistant/sensor/gatt2mqtt_bridge/version/config" })
        let v = try JSONValue(parsing: version.payload)
        #expect(v["state_topic"] == "gatt2mqtt/bridge/info" && v["value_template"] == "{{ value_json.version }}")
        let battery = try #require(msgs.first { $0.topic == "homeassistant/sensor/gatt2mqtt_camera/battery/config" })
        #expect(try JSONValue(parsing: battery.payload)["device"]?["via_device"] == "gatt2mqtt_bridge")
    }

    @Test func rokidNumbersHaveRanges() throws {
        let msgs = ha.messages(for: [device("glasses", .rokid, "C0:FF:EE:00:00:02")])
        let b = try #require(msgs.first { $0.topic == "homeassistant/number/gatt2mqtt_glasses/brightness/config" })
        let j = try JSONValue(parsing: b.payload)
        #expect(j["min"] == 0 && j["max"] == 15 && j["command_topic"] == "gatt2mqtt/glasses/set/brightness")
    }

    @Test func removedDevicesAreClearedWithEmptyRetained() {
        let old = [device("camera", .gopro, "C0:FF:EE:00:00:01"), device("glasses", .rokid, "C0:FF:EE:00:00:02")]
        let published = Set(ha.messages(for: old).map(\.topic))
        let removals = ha.removals(previous: published, current: [old[0]])
        #expect(removals.count == 3)
        #expect(removals.allSatisfy { $0.payload.isEmpty && $0.retain && $0.topic.contains("gatt2mqtt_glasses") })
        #expect(ha.removals(previous: published, current: old).isEmpty)
    }
}
