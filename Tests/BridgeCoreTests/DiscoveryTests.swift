import BinaryCoding
import BridgeConfig
import DeviceProfiles
import GattLayout
import GoProCodec
import Testing
@testable import BridgeCore

@Suite struct DiscoveryTests {
    let ha = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "gatt2mqtt"), version: "0.1.0", profiles: DeviceProfiles.catalog())

    func device(_ id: String, _ p: ProfileID, _ addr: String) -> DeviceConfig {
        var d = DeviceConfig(id: id, profile: p)
        d.address = addr
        return d
    }

    /// The demo's heart-rate sensor (config/demo.yaml): heart rate and battery built-ins, and a
    /// write-only raw control point.
    var heartRate: DeviceConfig {
        var d = device("heart_rate", .custom, "C0:FF:EE:00:00:03")
        d.characteristics = [
            mapping("2A37", "heart_rate", layout: "builtin:heart_rate_measurement", [.notify]),
            mapping("2A19", "battery", layout: "builtin:battery_level", [.read, .notify]),
            CharacteristicMapping(uuid: "2A39", codec: .raw, directions: [.write], topic: "control"),
        ]
        return d
    }

    /// docs/layouts.md's complete example, inline, on a vendor characteristic.
    static let envSensorLayout: JSONValue = [
        "name": "env_sensor", "uuid": "12345678-1234-5678-1234-56789abcdef0",
        "fields": [
            ["type": "flags", "bits": [
                ["name": "has_humidity", "bit": 0], ["name": "has_label", "bit": 1], ["name": "low_battery", "bit": 2],
                ["name": "mode", "bit": 4, "width": 2, "enum": ["0": "idle", "1": "measuring", "2": "calibrating"]],
            ]],
            ["name": "temperature", "type": "i16", "scale": 0.01, "unit": "°C"],
            ["name": "humidity", "type": "u16", "scale": "1/10", "max": 100, "unit": "%", "present_if": "has_humidity"],
            ["name": "pressure", "type": "sfloat", "unit": "hPa"],
            ["name": "state", "type": "u8", "enum": ["0": "ok", "1": "warming_up", "0x10": "fault"]],
            ["name": "label", "type": "utf8", "present_if": "has_label"],
        ],
    ]

    var envSensor: DeviceConfig {
        var d = device("env", .custom, "A4:C1:38:00:00:01")
        d.characteristics = [
            mapping("12345678-1234-5678-1234-56789abcdef0", "climate", layout: Self.envSensorLayout, [.notify]),
            mapping("2A1C", "temperature", layout: "builtin:temperature_measurement", [.notify]),
            CharacteristicMapping(uuid: "FFF1", codec: .raw, directions: [.read], topic: "raw_value"),
            CharacteristicMapping(uuid: "FFF2", codec: .caps, directions: [.notify], topic: "caps_value"),
        ]
        return d
    }

    func mapping(_ uuid: String, _ topic: String, layout: JSONValue, _ directions: Set<CharacteristicMapping.Direction>) -> CharacteristicMapping {
        var c = CharacteristicMapping(uuid: uuid, codec: .layout, directions: directions, topic: topic)
        c.layout = layout
        return c
    }

    var camera: DeviceConfig { device("camera", .gopro, "C0:FF:EE:00:00:01") }
    var glasses: DeviceConfig { device("glasses", .rokid, "C0:FF:EE:00:00:02") }

    func payloads(_ msgs: [OutboundMessage]) throws -> [String: JSONValue] {
        Dictionary(uniqueKeysWithValues: try msgs.map { ($0.topic, try JSONValue(parsing: $0.payload)) })
    }

    /// The entity of `device` whose config topic ends `<component>/<node>/<object>/config`.
    func entity(_ d: DeviceConfig, _ component: String, _ object: String) throws -> HomeAssistantDiscovery.Entity {
        try #require(ha.entities(for: d).first { $0.component.rawValue == component && $0.object == object }, "\(component)/\(object)")
    }

    // MARK: Payloads, exactly

    @Test func goproBatteryEntityIsExact() throws {
        let msgs = ha.messages(for: [camera])
        let battery = try #require(msgs.first { $0.topic == "homeassistant/sensor/gatt2mqtt_camera/battery/config" })
        #expect(battery.qos == 1 && battery.retain)
        let j = try JSONValue(parsing: battery.payload)
        #expect(j["unique_id"] == "gatt2mqtt_c0ffee000001_battery")
        #expect(j["default_entity_id"] == "sensor.camera_battery" && j["object_id"] == nil, "object_id is gone from HA (2026.4)")
        #expect(j["state_topic"] == "gatt2mqtt/camera")
        #expect(j["value_template"] == "{% set v = value_json.get('internal_battery_percentage') %}{{ v if v is number else None }}")
        #expect(j["device_class"] == "battery" && j["unit_of_measurement"] == "%" && j["state_class"] == "measurement")
        #expect(j["availability_mode"] == "all")
        #expect(j["availability"] == [["topic": "gatt2mqtt/bridge/state", "value_template": "{{ value_json.state }}"],
                                      ["topic": "gatt2mqtt/camera/availability", "value_template": "{{ value_json.state }}"]])
        #expect(j["device"] == ["identifiers": ["gatt2mqtt_c0ffee000001"], "connections": [["bluetooth", "c0:ff:ee:00:00:01"]],
                                "name": "camera", "manufacturer": "GoPro", "model": "Open GoPro camera", "via_device": "gatt2mqtt_bridge"])
        #expect(j["origin"] == ["name": "gatt2mqtt", "sw_version": "0.1.0"])
        let shutter = try #require(msgs.first { $0.topic == "homeassistant/switch/gatt2mqtt_camera/shutter/config" })
        #expect(try JSONValue(parsing: shutter.payload)["command_topic"] == "gatt2mqtt/camera/set/shutter")
    }

    /// Every device names `via_device: gatt2mqtt_bridge`, so the bridge is published as a device:
    /// its connection state (no availability of its own: it *is* the bridge's availability), its
    /// version, a restart button and the log level select.
    @Test func theBridgeIsADeviceWithStateVersionRestartAndLogLevel() throws {
        let p = try payloads(ha.messages(for: [camera]))
        let s = try #require(p["homeassistant/binary_sensor/gatt2mqtt_bridge/connection_state/config"])
        #expect(s["state_topic"] == "gatt2mqtt/bridge/state" && s["payload_on"] == "online" && s["payload_off"] == "offline")
        #expect(s["device_class"] == "connectivity" && s["entity_category"] == "diagnostic" && s["availability"] == nil)
        #expect(s["device"]?["identifiers"] == ["gatt2mqtt_bridge"] && s["device"]?["sw_version"] == "0.1.0")
        let v = try #require(p["homeassistant/sensor/gatt2mqtt_bridge/version/config"])
        #expect(v["state_topic"] == "gatt2mqtt/bridge/info" && v["value_template"] == "{{ value_json.get('version') }}")
        #expect(v["availability"] == [["topic": "gatt2mqtt/bridge/state", "value_template": "{{ value_json.state }}"]])
        let restart = try #require(p["homeassistant/button/gatt2mqtt_bridge/restart/config"])
        #expect(restart["command_topic"] == "gatt2mqtt/bridge/request/restart" && restart["payload_press"] == "{}")
        #expect(restart["device_class"] == "restart" && restart["entity_category"] == "config")
        #expect(restart["unique_id"] == "gatt2mqtt_bridge_restart" && restart["default_entity_id"] == "button.gatt2mqtt_bridge_restart")
        let level = try #require(p["homeassistant/select/gatt2mqtt_bridge/log_level/config"])
        #expect(level["command_topic"] == "gatt2mqtt/bridge/request/options")
        #expect(level["command_template"] == #"{"log_level":"{{ value }}"}"#)
        #expect(level["options"] == ["trace", "debug", "info", "notice", "warning", "error", "critical"])
        #expect(level["state_topic"] == "gatt2mqtt/bridge/info" && level["entity_category"] == "config")
        let battery = try #require(p["homeassistant/sensor/gatt2mqtt_camera/battery/config"])
        #expect(battery["device"]?["via_device"] == "gatt2mqtt_bridge")
        // zigbee2mqtt's permit-join switch and restart-required sensor, for this bridge: the scan
        // request on and off, its state and the restart list from bridge/info.
        let scan = try #require(p["homeassistant/switch/gatt2mqtt_bridge/scan/config"])
        #expect(scan["command_topic"] == "gatt2mqtt/bridge/request/scan" && scan["state_topic"] == "gatt2mqtt/bridge/info")
        #expect(scan["payload_on"] == #"{"seconds":600}"# && scan["payload_off"] == #"{"seconds":0}"#)
        #expect(scan["state_on"] == "ON" && scan["state_off"] == "OFF" && scan["entity_category"] == "config")
        let restartRequired = try #require(p["homeassistant/binary_sensor/gatt2mqtt_bridge/restart_required/config"])
        #expect(restartRequired["state_topic"] == "gatt2mqtt/bridge/info" && restartRequired["device_class"] == "problem")
        let entities = ha.bridgeEntities()
        func shown(_ info: JSONObject) -> [String: String?] {
            Dictionary(uniqueKeysWithValues: entities.compactMap { e in e.state.map { ("\(e.component.rawValue)/\(e.object)", $0.rendered(in: info)) } })
        }
        var seen = shown(["scanning": false, "restart_required": []])
        #expect(seen["switch/scan"] == "OFF" && seen["binary_sensor/restart_required"] == "OFF")
        seen = shown(["scanning": true, "restart_required": ["mqtt.url"]])
        #expect(seen["switch/scan"] == "ON" && seen["binary_sensor/restart_required"] == "ON")
        #expect(shown(["restart_required": true])["binary_sensor/restart_required"] == "ON", "a boolean reads the same")
        #expect(shown([:])["binary_sensor/restart_required"] == .some(nil))
    }

    /// Two bridges with different base topics on one broker (issue 22: the bridge device was a
    /// fixed `gatt2mqtt_bridge`, the nodes `gatt2mqtt_<id>`, so one overwrote the other in HA):
    /// the base topic is in every node id, unique id and device identifier, so nothing of one
    /// is the other's. The default base topic keeps the ids of before.
    @Test func twoBaseTopicsOnOneBrokerDoNotCollide() throws {
        let upstairs = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "upstairs/gatt2mqtt"), version: "0.1.0",
                                              profiles: DeviceProfiles.catalog())
        let devices = [camera, glasses, heartRate, DeviceConfig(id: "bare", profile: .gopro)]
        func ids(_ h: HomeAssistantDiscovery) throws -> (topics: Set<String>, unique: Set<String>, devices: Set<String>) {
            let msgs = h.messages(for: devices)
            let payloads = try msgs.map { try JSONValue(parsing: $0.payload) }
            let identifiers = payloads.flatMap { $0["device"]?["identifiers"]?.arrayValue ?? [] }.compactMap(\.stringValue)
            return (Set(msgs.map(\.topic)), Set(payloads.compactMap { $0["unique_id"]?.stringValue }), Set(identifiers))
        }
        let (a, b) = (try ids(ha), try ids(upstairs))
        #expect(a.topics.count == b.topics.count && a.unique.count == b.unique.count && a.devices.count == 5)
        #expect(a.topics.isDisjoint(with: b.topics) && a.unique.isDisjoint(with: b.unique) && a.devices.isDisjoint(with: b.devices))
        let p = try payloads(upstairs.messages(for: [camera]))
        let battery = try #require(p["homeassistant/sensor/upstairs_gatt2mqtt_camera/battery/config"])
        #expect(battery["unique_id"] == "upstairs_gatt2mqtt_c0ffee000001_battery")
        #expect(battery["device"]?["identifiers"] == ["upstairs_gatt2mqtt_c0ffee000001"])
        #expect(battery["device"]?["via_device"] == "upstairs_gatt2mqtt_bridge")
        #expect(battery["state_topic"] == "upstairs/gatt2mqtt/camera")
        let restart = try #require(p["homeassistant/button/upstairs_gatt2mqtt_bridge/restart/config"])
        #expect(restart["unique_id"] == "upstairs_gatt2mqtt_bridge_restart" && restart["device"]?["identifiers"] == ["upstairs_gatt2mqtt_bridge"])
        #expect(restart["default_entity_id"] == "button.upstairs_gatt2mqtt_bridge_restart")
        // The default base topic: the ids of the versions before.
        #expect(a.unique.contains("gatt2mqtt_c0ffee000001_battery") && a.devices.contains("gatt2mqtt_bridge"))
        #expect(a.topics.contains("homeassistant/sensor/gatt2mqtt_camera/battery/config"))
    }

    /// A bridge whose base topic is not the default published under the old fixed ids before:
    /// at its next start those config topics (recorded in the store) are withdrawn.
    @Test func theOldIDsOfAnotherBaseTopicAreWithdrawn() throws {
        let home = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "home"), version: "0.1.0",
                                          profiles: DeviceProfiles.catalog())
        let before = Set(ha.messages(for: [camera]).map(\.topic))
        let removals = home.removals(previous: before, current: [camera])
        #expect(Set(removals.map(\.topic)) == before && removals.allSatisfy { $0.payload.isEmpty && $0.retain })
        #expect(removals.contains { $0.topic == "homeassistant/button/gatt2mqtt_bridge/restart/config" })
        #expect(home.removals(previous: Set(home.messages(for: [camera]).map(\.topic)), current: [camera]).isEmpty)
    }

    /// With the frontend on, HA's device pages link to its pages (`configuration_url`, as
    /// zigbee2mqtt links its frontend): the bridge's page and each device's.
    @Test func frontendURLIsTheDevicesConfigurationURL() throws {
        let linked = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "gatt2mqtt"), version: "0.1.0",
                                            frontendURL: "https://gw.example/gatt2mqtt/", profiles: DeviceProfiles.catalog())
        let p = try payloads(linked.messages(for: [camera, glasses]))
        #expect(p["homeassistant/sensor/gatt2mqtt_camera/battery/config"]?["device"]?["configuration_url"]
            == "https://gw.example/gatt2mqtt/#/device/camera")
        #expect(p["homeassistant/sensor/gatt2mqtt_glasses/battery/config"]?["device"]?["configuration_url"]
            == "https://gw.example/gatt2mqtt/#/device/glasses")
        #expect(p["homeassistant/button/gatt2mqtt_bridge/restart/config"]?["device"]?["configuration_url"]
            == "https://gw.example/gatt2mqtt/#/bridge")
        // Without the frontend: no link.
        for m in ha.messages(for: [camera]) { #expect(try JSONValue(parsing: m.payload)["device"]?["configuration_url"] == nil) }
    }

    @Test func supportURLGoesIntoOrigin() throws {
        let withURL = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "gatt2mqtt"), version: "1.2.3",
                                             supportURL: "https://example.org/gatt2mqtt", profiles: DeviceProfiles.catalog())
        for m in withURL.messages(for: [glasses]) {
            #expect(try JSONValue(parsing: m.payload)["origin"] == ["name": "gatt2mqtt", "sw_version": "1.2.3",
                                                                     "support_url": "https://example.org/gatt2mqtt"])
        }
    }

    @Test func deviceWithoutAddressHasIDBasedIdentityAndNoConnections() throws {
        let d = DeviceConfig(id: "cam2", profile: .gopro)
        let j = try JSONValue(parsing: try #require(ha.messages(for: d).first).payload)
        #expect(j["unique_id"]?.stringValue?.hasPrefix("gatt2mqtt_cam2_") == true)
        #expect(j["device"]?["identifiers"] == ["gatt2mqtt_cam2"] && j["device"]?["connections"] == nil)
    }

    // MARK: Layout devices

    /// The heart-rate sensor: one entity per decoded key (not the whole object), with the SIG
    /// characteristic's units and classes; the RR intervals are attributes, not an entity; the
    /// write-only control point (2A39) is a button writing `01`, "reset energy expended".
    @Test func heartRateSensorHasOneEntityPerField() throws {
        let p = try payloads(ha.messages(for: heartRate))
        #expect(Set(p.keys) == [
            "homeassistant/binary_sensor/gatt2mqtt_heart_rate/heart_rate_sensor_contact_detected/config",
            "homeassistant/binary_sensor/gatt2mqtt_heart_rate/heart_rate_sensor_contact_supported/config",
            "homeassistant/sensor/gatt2mqtt_heart_rate/heart_rate/config",
            "homeassistant/sensor/gatt2mqtt_heart_rate/heart_rate_energy_expended/config",
            "homeassistant/sensor/gatt2mqtt_heart_rate/battery/config",
            "homeassistant/sensor/gatt2mqtt_heart_rate/rssi/config",
            "homeassistant/sensor/gatt2mqtt_heart_rate/last_seen/config",
            "homeassistant/button/gatt2mqtt_heart_rate/control_reset_energy_expended/config",
        ])
        let reset = try #require(p["homeassistant/button/gatt2mqtt_heart_rate/control_reset_energy_expended/config"])
        #expect(reset["command_topic"] == "gatt2mqtt/heart_rate/control/write" && reset["payload_press"] == "01")
        let hr = try #require(p["homeassistant/sensor/gatt2mqtt_heart_rate/heart_rate/config"])
        #expect(hr["name"] == "Heart rate" && hr["unique_id"] == "gatt2mqtt_c0ffee000003_heart_rate")
        #expect(hr["value_template"] == "{% set v = value_json.get('heart_rate', {}).get('heart_rate') %}{{ v if v is number else None }}")
        #expect(hr["unit_of_measurement"] == "bpm" && hr["state_class"] == "measurement" && hr["device_class"] == nil)
        #expect(hr["json_attributes_topic"] == "gatt2mqtt/heart_rate/heart_rate")
        let energy = try #require(p["homeassistant/sensor/gatt2mqtt_heart_rate/heart_rate_energy_expended/config"])
        #expect(energy["device_class"] == "energy" && energy["unit_of_measurement"] == "kJ" && energy["state_class"] == "total_increasing")
        #expect(energy["json_attributes_topic"] == nil)
        let contact = try #require(p["homeassistant/binary_sensor/gatt2mqtt_heart_rate/heart_rate_sensor_contact_detected/config"])
        #expect(contact["value_template"]
            == "{% set v = value_json.get('heart_rate', {}).get('sensor_contact_detected') %}{{ None if v is none else ('ON' if v else 'OFF') }}")
        #expect(p["homeassistant/binary_sensor/gatt2mqtt_heart_rate/heart_rate_sensor_contact_supported/config"]?["entity_category"] == "diagnostic")
        let battery = try #require(p["homeassistant/sensor/gatt2mqtt_heart_rate/battery/config"])
        #expect(battery["name"] == "Battery" && battery["device_class"] == "battery" && battery["unit_of_measurement"] == "%")
        #expect(battery["json_attributes_topic"] == "gatt2mqtt/heart_rate/battery")
        #expect(battery["device"]?["model"] == "GATT device (layouts)")
    }

    /// The templates read the state as the `LayoutDriver` builds it (each mapping's decoded
    /// object under its topic): a notification decoded by the built-in gives HA 88 bpm, not the
    /// whole object; absent keys and missing mappings are unknown.
    @Test func heartRateTemplatesReadTheDecodedState() throws {
        let hrm = try GattLayout.builtin(named: "heart_rate_measurement")
        // Flags 0x1C: u8 rate, contact supported but not detected, energy and one RR interval.
        var state: JSONObject = ["heart_rate": try hrm.decode(try Hex.decode("1c5878052003"))]
        var seen = render(heartRate, state)
        #expect(seen["sensor/heart_rate"] == "88" && seen["sensor/heart_rate_energy_expended"] == "1400")
        #expect(seen["binary_sensor/heart_rate_sensor_contact_detected"] == "OFF")
        #expect(seen["binary_sensor/heart_rate_sensor_contact_supported"] == "ON")
        #expect(seen["sensor/battery"] == .some(nil) && seen["sensor/rssi"] == .some(nil) && seen["sensor/last_seen"] == .some(nil))
        state["heart_rate"] = try hrm.decode(try Hex.decode("0648"))  // 72 bpm, no energy field
        state["battery"] = try GattLayout.builtin(named: "battery_level").decode([90])
        state["rssi"] = -61
        state["last_seen"] = "2025-06-01T12:00:00Z"
        seen = render(heartRate, state)
        #expect(seen["sensor/heart_rate"] == "72" && seen["sensor/heart_rate_energy_expended"] == .some(nil))
        #expect(seen["binary_sensor/heart_rate_sensor_contact_detected"] == "ON" && seen["sensor/battery"] == "90")
        #expect(seen["sensor/rssi"] == "-61" && seen["sensor/last_seen"] == "2025-06-01T12:00:00Z")
    }

    /// A user's layout: the `unit` of docs/layouts.md reaches HA with the device class it implies;
    /// flags become binary sensors, `enum` fields enum sensors with their names as options.
    @Test func inlineLayoutUnitsReachHomeAssistant() throws {
        let p = try payloads(ha.messages(for: envSensor))
        func config(_ component: String, _ object: String) throws -> JSONValue {
            try #require(p["homeassistant/\(component)/gatt2mqtt_env/\(object)/config"], "\(component)/\(object)")
        }
        let t = try config("sensor", "climate_temperature")
        #expect(t["name"] == "Temperature" && t["device_class"] == "temperature" && t["unit_of_measurement"] == "°C")
        #expect(t["state_class"] == "measurement" && t["json_attributes_topic"] == "gatt2mqtt/env/climate")
        let h = try config("sensor", "climate_humidity")
        #expect(h["device_class"] == "humidity" && h["unit_of_measurement"] == "%")
        let pressure = try config("sensor", "climate_pressure")
        #expect(pressure["device_class"] == "pressure" && pressure["unit_of_measurement"] == "hPa")
        let state = try config("sensor", "climate_state")
        #expect(state["device_class"] == "enum" && state["options"] == ["ok", "warming_up", "fault"] && state["unit_of_measurement"] == nil)
        #expect(try config("sensor", "climate_mode")["options"] == ["idle", "measuring", "calibrating"])
        #expect(try config("binary_sensor", "climate_low_battery")["device_class"] == "battery")
        let label = try config("sensor", "climate_label")
        #expect(label["device_class"] == nil && label["unit_of_measurement"] == nil && label["state_class"] == nil)
        #expect(p["homeassistant/binary_sensor/gatt2mqtt_env/climate_has_humidity/config"] == nil, "presence bits are no keys")
        // The temperature measurement built-in: °C or °F by its flags, the type an enum, no time stamp entity.
        let c = try config("sensor", "temperature_temperature_celsius")
        #expect(c["device_class"] == "temperature" && c["unit_of_measurement"] == "°C")
        #expect(try config("sensor", "temperature_temperature_fahrenheit")["unit_of_measurement"] == "°F")
        #expect(try config("sensor", "temperature_temperature_type")["options"]?.arrayValue?.count == 9)
        #expect(!p.keys.contains { $0.contains("time_stamp") })
        // Raw and Caps mappings: the whole value, as text and as JSON, cut to HA's state limit.
        #expect(try config("sensor", "raw_value")["value_template"] == """
            {% set v = value_json.get('raw_value') %}{% if v is none %}None{% else %}{% set s = v | string %}\
            {{ s if s | length <= 255 else s[:252] ~ '...' }}{% endif %}
            """)
        #expect(try config("sensor", "caps_value")["value_template"] == """
            {% set v = value_json.get('caps_value') %}{% if v is none %}None{% else %}{% set s = v | tojson %}\
            {{ s if s | length <= 255 else s[:252] ~ '...' }}{% endif %}
            """)
    }

    /// Issue 22: HA logged "JSON result was not a dictionary" at every message of a raw mapping
    /// (its topic carries a JSON string) or a Caps one (an array), and refused states over 255
    /// characters (a Caps array, raw hex over 127 bytes) as unknown. Their attributes are
    /// `{"value": …}` now, and their states cut; a layout's topic carries an object: no template.
    @Test func rawAndCapsMappingsHaveObjectAttributesAndShortStates() throws {
        let p = try payloads(ha.messages(for: envSensor))
        for object in ["raw_value", "caps_value"] {
            let c = try #require(p["homeassistant/sensor/gatt2mqtt_env/\(object)/config"])
            #expect(c["json_attributes_topic"] == .string("gatt2mqtt/env/\(object)"))
            #expect(c["json_attributes_template"] == "{{ {'value': value_json} | tojson }}", "\(object)")
        }
        let climate = try #require(p["homeassistant/sensor/gatt2mqtt_env/climate_temperature/config"])
        #expect(climate["json_attributes_topic"] == "gatt2mqtt/env/climate" && climate["json_attributes_template"] == nil)
        // 128 bytes of hex (256 characters) and a Caps array of 300 characters: 255 characters,
        // the end `...`; 127 bytes fit whole.
        let long = String(repeating: "ab", count: 128), fits = String(repeating: "cd", count: 127)
        let caps: JSONValue = [["type": "S", "value": .string(String(repeating: "x", count: 300))]]
        var seen = render(envSensor, ["raw_value": .string(long), "caps_value": caps])
        #expect(seen["sensor/raw_value"]??.count == 255 && seen["sensor/raw_value"]??.hasSuffix("...") == true)
        #expect(seen["sensor/raw_value"]??.hasPrefix(String(long.prefix(252))) == true)
        #expect(seen["sensor/caps_value"]??.count == 255 && seen["sensor/caps_value"]??.hasPrefix(#"[{"type":"S""#) == true)
        seen = render(envSensor, ["raw_value": .string(fits), "caps_value": [["type": "u", "value": 1]]])
        #expect(seen["sensor/raw_value"] == .some(fits) && seen["sensor/caps_value"] == #"[{"type":"u","value":1}]"#)
        #expect(render(envSensor, [:])["sensor/raw_value"] == .some(nil))
    }

    @Test func inlineLayoutTemplatesReadTheDecodedState() throws {
        let layout = try GattLayout(json: Self.envSensorLayout)
        var state: JSONObject = ["climate": try layout.decode(try Hex.decode("176608c701f503106869"))]
        var seen = render(envSensor, state)
        #expect(seen["sensor/climate_temperature"] == "21.5" && seen["sensor/climate_humidity"] == "45.5")
        #expect(seen["sensor/climate_pressure"] == "1013" && seen["sensor/climate_state"] == "fault")
        #expect(seen["sensor/climate_mode"] == "measuring" && seen["sensor/climate_label"] == "hi")
        #expect(seen["binary_sensor/climate_low_battery"] == "ON")
        // SFLOAT NaN and an unnamed enum value (7) are unknown, not a bogus state.
        state["climate"] = try layout.decode(try Hex.decode("00ceffff0707"))
        seen = render(envSensor, state)
        #expect(seen["sensor/climate_temperature"] == "-0.5" && seen["sensor/climate_pressure"] == .some(nil))
        #expect(seen["sensor/climate_state"] == .some(nil) && seen["sensor/climate_humidity"] == .some(nil))
        #expect(seen["binary_sensor/climate_low_battery"] == "OFF" && seen["sensor/climate_mode"] == "idle")
    }

    // MARK: GoPro

    /// The camera's state as the `GoProDriver` merges it: a register-status answer's and a
    /// register-setting answer's named values (`GoProQueryResponse.namedValues`).
    func goproState() throws -> JSONObject {
        func query(_ id: UInt8, _ elements: [(UInt8, [UInt8])]) throws -> JSONObject {
            var message: [UInt8] = [id, 0]
            for (element, value) in elements { message += [element, UInt8(value.count)] + value }
            guard case let .query(q) = try GoProResponse(decoding: message, on: .queryResponse) else { throw Unexpected() }
            return q.namedValues
        }
        var s = try query(0x53, [(70, [84]), (2, [4]), (10, [1]), (8, [0]), (6, [0]), (85, [0]), (113, [1]), (45, [0]),
                                 (54, [0, 0, 0, 0, 0x01, 0x95, 0x82, 0x60]), (35, [0, 0, 0x1C, 0x20]), (34, [0, 0, 0x03, 0xE8]),
                                 (13, [0, 0, 0, 12]), (33, [0]), (96, [0, 0, 0x03, 0xE8])])
        s.merge(try query(0x52, [(2, [1]), (3, [8]), (121, [4])]))
        return s
    }

    struct Unexpected: Error {}

    @Test func goproTemplatesReadTheDriversState() throws {
        var state = try goproState()
        var seen = render(camera, state)
        #expect(seen["sensor/battery"] == "84" && seen["binary_sensor/charging"] == "ON")
        #expect(seen["sensor/sd_card_remaining"] == "26575456" && seen["sensor/remaining_video_time"] == "7200")
        #expect(seen["sensor/remaining_photos"] == "1000" && seen["sensor/video_encoding_duration"] == "12")
        #expect(seen["sensor/sd_card"] == "OK")
        #expect(seen["binary_sensor/encoding"] == "ON" && seen["binary_sensor/busy"] == "OFF")
        #expect(seen["binary_sensor/overheating"] == "OFF" && seen["binary_sensor/cold"] == "OFF")
        #expect(seen["binary_sensor/turbo_transfer"] == "ON")
        #expect(seen["switch/shutter"] == "ON" && seen["switch/locate"] == "OFF")
        #expect(seen["select/preset_group"] == "video" && seen["select/video_resolution"] == "4K")
        #expect(seen["select/frames_per_second"] == "30.0" && seen["select/video_lens"] == "Linear")
        // An option the table does not name stays a number in the state: the select shows unknown.
        state["video_resolution"] = 250
        state["preset_group"] = 2000
        state["internal_battery_bars"] = "Three"
        seen = render(camera, state)
        #expect(seen["select/video_resolution"] == .some(nil) && seen["select/preset_group"] == .some(nil))
        #expect(seen["binary_sensor/charging"] == "OFF")
    }

    @Test func goproSelectsOfferTheSettingTablesOptions() throws {
        let p = try payloads(ha.messages(for: camera))
        for name in ["video_resolution", "frames_per_second", "video_lens"] {
            let s = try #require(p["homeassistant/select/gatt2mqtt_camera/\(name)/config"])
            let setting = try #require(GoProSetting.setting(named: name))
            #expect(s["options"] == .array(setting.options.map { .string($0.name) }))
            #expect(s["command_topic"] == "gatt2mqtt/camera/set")
            #expect(s["command_template"] == .string(#"{"setting":"\#(name)","value":"{{ value }}"}"#))
        }
        let group = try #require(p["homeassistant/select/gatt2mqtt_camera/preset_group/config"])
        #expect(group["options"] == ["video", "photo", "timelapse"])
        #expect(group["value_template"] == "{{ {1000: 'video', 1001: 'photo', 1002: 'timelapse'}.get(value_json.get('preset_group')) }}")
        #expect(group["command_template"] == #"{"command":"load_preset_group","group":"{{ value }}"}"#)
        let buttons = p.filter { $0.key.hasPrefix("homeassistant/button/gatt2mqtt_camera/") }.mapValues { $0["payload_press"] }
        #expect(buttons == [
            "homeassistant/button/gatt2mqtt_camera/shutter_start/config": #"{"command":"set_shutter","value":true}"#,
            "homeassistant/button/gatt2mqtt_camera/shutter_stop/config": #"{"command":"set_shutter","value":false}"#,
            "homeassistant/button/gatt2mqtt_camera/hilight/config": #"{"command":"hilight_moment"}"#,
            "homeassistant/button/gatt2mqtt_camera/sleep/config": #"{"command":"sleep"}"#,
            "homeassistant/button/gatt2mqtt_camera/power_down/config": #"{"command":"power_down"}"#,
        ])
        let locate = try #require(p["homeassistant/switch/gatt2mqtt_camera/locate/config"])
        #expect(locate["payload_on"] == #"{"command":"locate_camera","value":true}"# && locate["state_on"] == "ON")
    }

    /// Get Hardware Info's answer, kept in the state as `hardware`, is the HA device's model,
    /// model id, firmware and serial number.
    @Test func goproDeviceCarriesTheHardwareInfo() throws {
        let state: JSONObject = ["hardware": ["model_number": 62, "model_name": "HERO12 Black", "firmware_version": "H23.01.01.99.56",
                                              "serial_number": "C3501324500702"]]
        for m in ha.messages(for: camera, state: state) {
            let device = try JSONValue(parsing: m.payload)["device"]
            #expect(device?["model"] == "HERO12 Black" && device?["model_id"] == "62")
            #expect(device?["sw_version"] == "H23.01.01.99.56" && device?["serial_number"] == "C3501324500702")
            #expect(device?["hw_version"] == "62")
        }
        // The config topics do not depend on the state: nothing to withdraw when it changes.
        #expect(ha.messages(for: camera, state: state).map(\.topic) == ha.messages(for: camera).map(\.topic))
        let stored = try payloads(ha.messages(for: [camera], states: ["camera": state]))
        #expect(stored["homeassistant/sensor/gatt2mqtt_camera/battery/config"]?["device"]?["serial_number"] == "C3501324500702")
    }

    // MARK: Rokid

    @Test func rokidNumbersHaveRangesAndTheCustomViewIsAnEnum() throws {
        let p = try payloads(ha.messages(for: glasses))
        let b = try #require(p["homeassistant/number/gatt2mqtt_glasses/brightness/config"])
        #expect(b["min"] == 0 && b["max"] == 15 && b["step"] == 1 && b["command_topic"] == "gatt2mqtt/glasses/set/brightness")
        #expect(p["homeassistant/number/gatt2mqtt_glasses/volume/config"]?["command_topic"] == "gatt2mqtt/glasses/set/volume")
        let view = try #require(p["homeassistant/sensor/gatt2mqtt_glasses/custom_view/config"])
        #expect(view["device_class"] == "enum" && view["options"] == ["open", "closed", "failed"])
        #expect(p["homeassistant/button/gatt2mqtt_glasses/close_custom_view/config"]?["payload_press"] == #"{"command":"close_custom_view"}"#)
        let seen = render(glasses, ["battery": 77, "brightness": 8, "volume": 3, "custom_view": "open"])
        #expect(seen["sensor/battery"] == "77" && seen["number/brightness"] == "8" && seen["number/volume"] == "3")
        #expect(seen["sensor/custom_view"] == "open")
    }

    // MARK: Diagnostics

    /// RSSI and last seen: diagnostic, and available whenever the bridge is (they describe the
    /// last sighting, which stays true while the device is away).
    @Test func everyDeviceHasRSSIAndLastSeen() throws {
        for d in [camera, glasses, heartRate] {
            let p = try payloads(ha.messages(for: d))
            let rssi = try #require(p["homeassistant/sensor/gatt2mqtt_\(d.id)/rssi/config"])
            #expect(rssi["device_class"] == "signal_strength" && rssi["unit_of_measurement"] == "dBm")
            #expect(rssi["state_class"] == "measurement" && rssi["entity_category"] == "diagnostic")
            #expect(rssi["availability"] == [["topic": "gatt2mqtt/bridge/state", "value_template": "{{ value_json.state }}"]])
            let seen = try #require(p["homeassistant/sensor/gatt2mqtt_\(d.id)/last_seen/config"])
            #expect(seen["device_class"] == "timestamp" && seen["entity_category"] == "diagnostic" && seen["unit_of_measurement"] == nil)
            #expect(seen["value_template"] == "{{ value_json.get('last_seen') }}")
            // Disabled until the user enables them, as zigbee2mqtt's are.
            #expect(rssi["enabled_by_default"] == false && seen["enabled_by_default"] == false)
        }
    }

    // MARK: Removal

    @Test func removedDevicesAreClearedWithEmptyRetained() {
        let old = [camera, heartRate]
        let published = Set(ha.messages(for: old).map(\.topic))
        let removals = ha.removals(previous: published, current: [old[0]])
        #expect(removals.count == ha.messages(for: heartRate).count && removals.count == 8)
        #expect(removals.allSatisfy { $0.payload.isEmpty && $0.retain && $0.qos == 1 && $0.topic.contains("gatt2mqtt_heart_rate") })
        #expect(ha.removals(previous: published, current: old).isEmpty)
    }

    /// A mapping removed from a device that stays withdraws exactly its own entities; so does
    /// an entity whose component changed (the GoPro's resolution was a sensor, now a select).
    @Test func removedMappingAndChangedComponentAreWithdrawn() {
        var smaller = heartRate
        smaller.characteristics.removeAll { $0.topic == "heart_rate" }
        let published = Set(ha.messages(for: [heartRate]).map(\.topic))
        #expect(ha.removals(previous: published, current: [smaller]).map(\.topic) == [
            "homeassistant/binary_sensor/gatt2mqtt_heart_rate/heart_rate_sensor_contact_detected/config",
            "homeassistant/binary_sensor/gatt2mqtt_heart_rate/heart_rate_sensor_contact_supported/config",
            "homeassistant/sensor/gatt2mqtt_heart_rate/heart_rate/config",
            "homeassistant/sensor/gatt2mqtt_heart_rate/heart_rate_energy_expended/config",
        ])
        let old = published.union(["homeassistant/sensor/gatt2mqtt_camera/video_resolution/config"])
        #expect(ha.removals(previous: old, current: [heartRate, camera]).map(\.topic)
            == ["homeassistant/sensor/gatt2mqtt_camera/video_resolution/config"])
    }

    // MARK: Helpers

    /// What HA shows for each entity of `d` (`component/object` → state, nil: unknown) given
    /// the device state, by the templates' semantics (``HomeAssistantDiscovery/StateValue``).
    func render(_ d: DeviceConfig, _ state: JSONObject) -> [String: String?] {
        var out: [String: String?] = [:]
        for e in ha.entities(for: d) {
            guard let value = e.state else { continue }
            out["\(e.component.rawValue)/\(e.object)"] = .some(value.rendered(in: state))
        }
        return out
    }
}

extension HomeAssistantDiscovery.StateValue {
    /// What the template renders from `state`, in Swift: `value_json.get(a, {}).get(b)` is
    /// the value at the path or `None`; nil here is `None`, which HA shows as unknown.
    func rendered(in state: JSONObject) -> String? {
        var value: JSONValue? = .object(state)
        for key in path { value = value?.objectValue?[key] }
        if value?.isNull == true { value = nil }
        switch self {
        case .number:
            guard let v = value else { return nil }
            switch v {
            case .int, .uint, .double: return v.jsonText
            default: return nil
            }
        case .text:
            guard let v = value else { return nil }
            if let b = v.boolValue { return b ? "True" : "False" }
            return v.stringValue ?? v.jsonText
        case .longText:
            guard let v = value else { return nil }
            return Self.cut(v.stringValue ?? v.jsonText)
        case let .choice(_, options):
            return value?.stringValue.flatMap { options.contains($0) ? $0 : nil }
        case let .mapped(_, labels):
            return value?.int64Value.flatMap { n in labels.first { $0.value == n }?.label }
        case .flag:
            guard let v = value else { return nil }
            let truthy: Bool
            switch v {
            case let .bool(b): truthy = b
            case let .int(n): truthy = n != 0
            case let .string(s): truthy = !s.isEmpty
            case let .array(a): truthy = !a.isEmpty
            default: truthy = true
            }
            return truthy ? "ON" : "OFF"
        case let .equals(_, expected):
            guard let v = value else { return nil }
            return v.stringValue == expected ? "ON" : "OFF"
        case .json:
            return value.map { Self.cut($0.jsonText) }
        }
    }

    /// The state limit's cut: the first 252 characters and `...`.
    static func cut(_ s: String) -> String {
        s.count <= HomeAssistantDiscovery.StateValue.stateLimit ? s : String(s.prefix(HomeAssistantDiscovery.StateValue.stateLimit - 3)) + "..."
    }
}
