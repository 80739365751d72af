import BinaryCoding
import BridgeConfig
import DeviceProfiles
import Testing
@testable import BridgeCore

/// Every discovery payload against Home Assistant's MQTT discovery schema, written down from
/// HA's documentation and the MQTT integration's own schemas (HA core 2025.10–2026.x:
/// `mqtt/schemas.py` — `MQTT_ENTITY_COMMON_SCHEMA`, the device and origin schemas, the
/// availability list; `mqtt/sensor.py`, `binary_sensor.py`, `button.py`, `select.py`,
/// `number.py`, `switch.py`; `sensor/const.py` — `DEVICE_CLASS_UNITS`,
/// `DEVICE_CLASS_STATE_CLASSES`; `validate_sensor_state_and_device_class_config`).
/// HA drops a payload that fails its schema with only a log line, so this is the test that
/// an entity exists at all.
@Suite struct DiscoverySchemaTests {
    enum Kind { case string, number, integer, boolean, template, topic, stringList, object, list }

    struct Component {
        var required: Set<String>
        var options: [String: Kind]
        var deviceClasses: Set<String>
    }

    /// Options every entity platform takes (`MQTT_ENTITY_COMMON_SCHEMA` + availability; QoS and
    /// encoding from `MQTT_BASE_SCHEMA`). `object_id` is not here: HA 2026.4 removed it.
    static let common: [String: Kind] = [
        "name": .string, "unique_id": .string, "default_entity_id": .string, "device": .object, "origin": .object,
        "availability": .list, "availability_mode": .string, "availability_topic": .topic, "availability_template": .template,
        "payload_available": .string, "payload_not_available": .string, "enabled_by_default": .boolean,
        "entity_category": .string, "entity_picture": .string, "icon": .string, "json_attributes_topic": .topic,
        "json_attributes_template": .template, "qos": .integer, "encoding": .string,
    ]

    static let sensorDeviceClasses: Set<String> = [
        "date", "enum", "timestamp", "absolute_humidity", "apparent_power", "aqi", "area", "atmospheric_pressure", "battery",
        "blood_glucose_concentration", "carbon_monoxide", "carbon_dioxide", "conductivity", "current", "data_rate", "data_size",
        "distance", "duration", "energy", "energy_distance", "energy_storage", "frequency", "gas", "humidity", "illuminance",
        "irradiance", "moisture", "monetary", "nitrogen_dioxide", "nitrogen_monoxide", "nitrous_oxide", "ozone", "ph", "pm1",
        "pm10", "pm25", "power_factor", "power", "precipitation", "precipitation_intensity", "pressure", "reactive_energy",
        "reactive_power", "signal_strength", "sound_pressure", "speed", "sulphur_dioxide", "temperature",
        "volatile_organic_compounds", "volatile_organic_compounds_parts", "voltage", "volume", "volume_storage",
        "volume_flow_rate", "water", "weight", "wind_direction", "wind_speed",
    ]

    static let components: [String: Component] = [
        "sensor": Component(
            required: ["state_topic"],
            options: ["state_topic": .topic, "value_template": .template, "device_class": .string, "state_class": .string,
                      "unit_of_measurement": .string, "expire_after": .integer, "force_update": .boolean,
                      "last_reset_value_template": .template, "options": .stringList, "suggested_display_precision": .integer],
            deviceClasses: sensorDeviceClasses),
        "binary_sensor": Component(
            required: ["state_topic"],
            options: ["state_topic": .topic, "value_template": .template, "device_class": .string, "payload_on": .string,
                      "payload_off": .string, "expire_after": .integer, "force_update": .boolean, "off_delay": .integer],
            deviceClasses: ["battery", "battery_charging", "carbon_monoxide", "cold", "connectivity", "door", "garage_door", "gas",
                            "heat", "light", "lock", "moisture", "motion", "moving", "occupancy", "opening", "plug", "power",
                            "presence", "problem", "running", "safety", "smoke", "sound", "tamper", "update", "vibration", "window"]),
        "button": Component(
            required: ["command_topic"],
            options: ["command_topic": .topic, "command_template": .template, "payload_press": .string, "retain": .boolean,
                      "device_class": .string],
            deviceClasses: ["identify", "restart", "update"]),
        "select": Component(
            required: ["command_topic", "options"],
            options: ["command_topic": .topic, "command_template": .template, "options": .stringList, "state_topic": .topic,
                      "value_template": .template, "optimistic": .boolean, "retain": .boolean],
            deviceClasses: []),
        "number": Component(
            required: ["command_topic"],
            options: ["command_topic": .topic, "command_template": .template, "state_topic": .topic, "value_template": .template,
                      "min": .number, "max": .number, "step": .number, "mode": .string, "device_class": .string,
                      "unit_of_measurement": .string, "payload_reset": .string, "optimistic": .boolean, "retain": .boolean],
            deviceClasses: sensorDeviceClasses.subtracting(["date", "enum", "timestamp", "monetary"])),
        "switch": Component(
            required: ["command_topic"],
            options: ["command_topic": .topic, "state_topic": .topic, "value_template": .template, "payload_on": .string,
                      "payload_off": .string, "state_on": .string, "state_off": .string, "device_class": .string,
                      "optimistic": .boolean, "retain": .boolean],
            deviceClasses: ["outlet", "switch"]),
    ]

    /// `DEVICE_CLASS_UNITS` (sensor/const.py) for the classes this bridge can publish; a class
    /// missing here fails the test, so a new one gets its units written down.
    static let units: [String: Set<String?>] = [
        "battery": ["%"], "humidity": ["%"], "moisture": ["%"],
        "temperature": ["°C", "°F", "K"],
        "pressure": ["Pa", "hPa", "kPa", "bar", "cbar", "mbar", "mmHg", "inHg", "psi", "inH₂O", "mmH₂O"],
        "voltage": ["V", "mV", "µV", "kV", "MV"], "current": ["A", "mA"],
        "power": ["mW", "W", "kW", "MW", "GW", "TW"],
        "energy": ["J", "kJ", "MJ", "GJ", "mWh", "Wh", "kWh", "MWh", "GWh", "TWh", "cal", "kcal", "Mcal", "Gcal"],
        "duration": ["d", "h", "min", "s", "ms", "µs"],
        "distance": ["km", "m", "cm", "mm", "mi", "nmi", "yd", "ft", "in"],
        "frequency": ["Hz", "kHz", "MHz", "GHz"],
        "signal_strength": ["dB", "dBm"], "illuminance": ["lx"],
        "carbon_dioxide": ["ppm"], "pm25": ["µg/m³"], "pm10": ["µg/m³"], "pm1": ["µg/m³"],
        "weight": ["kg", "g", "mg", "µg", "oz", "lb", "st"],
        "data_size": ["bit", "kbit", "Mbit", "Gbit", "B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB",
                      "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"],
        "timestamp": [nil], "enum": [nil],
    ]

    /// `DEVICE_CLASS_STATE_CLASSES` for the same classes (nil: no state class).
    static let stateClasses: [String: Set<String?>] = [
        "battery": ["measurement", nil], "humidity": ["measurement", nil], "moisture": ["measurement", nil],
        "temperature": ["measurement", nil], "pressure": ["measurement", nil], "voltage": ["measurement", nil],
        "current": ["measurement", nil], "power": ["measurement", nil], "energy": ["total", "total_increasing", nil],
        "duration": ["measurement", "total", "total_increasing", nil], "distance": ["measurement", "total", "total_increasing", nil],
        "frequency": ["measurement", nil], "signal_strength": ["measurement", nil], "illuminance": ["measurement", nil],
        "carbon_dioxide": ["measurement", nil], "pm25": ["measurement", nil], "pm10": ["measurement", nil], "pm1": ["measurement", nil],
        "weight": ["measurement", "total", "total_increasing", nil], "data_size": ["measurement", "total", "total_increasing", nil],
        "timestamp": [nil], "enum": [nil],
    ]

    static let device: [String: Kind] = [
        "identifiers": .stringList, "connections": .list, "manufacturer": .string, "model": .string, "model_id": .string,
        "name": .string, "hw_version": .string, "serial_number": .string, "sw_version": .string, "via_device": .string,
        "suggested_area": .string, "configuration_url": .string,
    ]

    static let ha = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "gatt2mqtt"), version: "0.1.0",
                                           supportURL: "https://example.org/gatt2mqtt", frontendURL: "http://gw.lan:8080",
                                           profiles: DeviceProfiles.catalog())

    /// Every registered kind of device (the GoPro with hardware info known), with every kind of
    /// mapping, and the bridge.
    static var everything: [OutboundMessage] {
        let t = DiscoveryTests()
        let hardware: JSONObject = ["hardware": ["model_number": 62, "model_name": "HERO12 Black", "firmware_version": "H23.01.01.99.56",
                                                 "serial_number": "C3501324500702"]]
        return ha.messages(for: [t.camera, t.glasses, t.heartRate, t.envSensor, DeviceConfig(id: "bare", profile: .gopro)],
                           states: ["camera": hardware])
    }

    @Test func everyPayloadFitsItsComponentsSchema() throws {
        let messages = Self.everything
        #expect(messages.count > 80)
        var problems: [String] = []
        for m in messages {
            do { try Self.check(m) } catch { problems.append("\(m.topic): \(error)") }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    @Test func topicsUniqueIDsAndEntityIDsAreUnique() throws {
        let messages = Self.everything
        #expect(Set(messages.map(\.topic)).count == messages.count)
        let payloads = try messages.map { try JSONValue(parsing: $0.payload) }
        let uniqueIDs = payloads.compactMap { $0["unique_id"]?.stringValue }
        #expect(uniqueIDs.count == messages.count && Set(uniqueIDs).count == uniqueIDs.count)
        let entityIDs = payloads.compactMap { $0["default_entity_id"]?.stringValue }
        #expect(Set(entityIDs).count == messages.count)
    }

    /// A select's state is one of its options or `None` (unknown): HA logs an error for any
    /// other value. The value templates' outputs, by their construction, against `options`.
    @Test func selectTemplatesProduceOnlyTheirOptions() throws {
        let t = DiscoveryTests()
        var checked = 0
        for d in [t.camera, t.glasses, t.heartRate, t.envSensor] {
            for e in Self.ha.entities(for: d) where e.component == .select || e.extra["device_class"] == "enum" {
                let options = try #require(e.extra["options"]?.arrayValue).compactMap { $0.stringValue }
                switch e.state {
                case let .choice(_, produced)?: #expect(Set(produced).isSubset(of: options), "\(e.object)")
                case let .mapped(_, labels)?: #expect(Set(labels.map(\.label)).isSubset(of: options), "\(e.object)")
                default: Issue.record("\(d.id)/\(e.object): a select or enum sensor whose template is not bounded by its options")
                }
                checked += 1
            }
        }
        // The GoPro's four selects and SD card status, the glasses' custom view, the env sensor's
        // mode, state and temperature type.
        #expect(checked == 5 + 1 + 3)
    }

    /// The checker refuses what HA refuses: each of these changes to a valid payload breaks it.
    @Test func theCheckerHasTeeth() throws {
        let messages = Self.everything
        func mutated(_ topic: String, _ change: (inout JSONObject) -> Void) throws -> OutboundMessage {
            let m = try #require(messages.first { $0.topic == topic })
            var o = try #require(try JSONValue(parsing: m.payload).objectValue)
            change(&o)
            return OutboundMessage(topic: m.topic, json: .object(o), qos: 1, retain: true)
        }
        let battery = "homeassistant/sensor/gatt2mqtt_camera/battery/config"
        let select = "homeassistant/select/gatt2mqtt_camera/video_resolution/config"
        let bad: [OutboundMessage] = [
            try mutated(battery) { $0["object_id"] = "camera_battery" },
            try mutated(battery) { $0["unit_of_measurement"] = "mAh" },
            try mutated(battery) { $0["state_class"] = "total_increasing" },
            try mutated(battery) { $0["entity_category"] = "config" },
            try mutated(battery) { $0["state_topic"] = nil },
            try mutated(battery) { $0["default_entity_id"] = "switch.camera_battery" },
            try mutated(battery) { $0["device"] = ["name": "no identity"] },
            try mutated(battery) { $0["origin"] = ["sw_version": "1"] },
            try mutated(battery) { $0["availability_mode"] = "most" },
            try mutated(battery) { $0["options"] = ["a"] },
            try mutated(select) { $0["options"] = nil },
            try mutated(select) { $0["command_template"] = #"{"setting":"video_resolution","value":{{ value }}}"# },
            try mutated("homeassistant/number/gatt2mqtt_glasses/brightness/config") { $0["min"] = 20 },
            try mutated("homeassistant/switch/gatt2mqtt_camera/locate/config") { $0["state_on"] = nil },
            try mutated("homeassistant/button/gatt2mqtt_camera/sleep/config") { $0["device_class"] = "sleep" },
            try mutated("homeassistant/binary_sensor/gatt2mqtt_camera/overheating/config") { $0["device_class"] = "hot" },
            try mutated(battery) {
                var d = $0["device"]?.objectValue ?? [:]
                d["configuration_url"] = "gw.lan:8080"
                $0["device"] = .object(d)
            },
            try mutated(battery) { $0["enabled_by_default"] = "no" },
        ]
        for m in bad {
            #expect(throws: Invalid.self, "\(m.text)") { try Self.check(m) }
        }
    }

    // MARK: The checks

    struct Invalid: Error, CustomStringConvertible { let description: String }

    static func fail(_ s: String) -> Invalid { Invalid(description: s) }

    static func check(_ m: OutboundMessage) throws {
        guard m.retain, m.qos == 1 else { throw fail("config must be retained (QoS 1)") }
        let parts = m.topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 5, parts[0] == "homeassistant", parts[4] == "config" else { throw fail("topic shape") }
        let idPattern = { (s: String) in !s.isEmpty && s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") } }
        guard idPattern(parts[2]), idPattern(parts[3]) else { throw fail("node or object id outside [a-zA-Z0-9_-]") }
        let component = parts[1]
        guard let schema = components[component] else { throw fail("component \(component) not published by this bridge") }
        let j = try JSONValue(parsing: m.payload)
        guard let o = j.objectValue else { throw fail("payload is not an object") }

        for key in schema.required where o[key] == nil { throw fail("missing required \(key)") }
        for (key, value) in o {
            guard let kind = schema.options[key] ?? common[key] else { throw fail("\(key) is not an option of \(component)") }
            try checkKind(key, value, kind)
        }
        guard o["unique_id"] != nil, o["name"] != nil, o["device"] != nil, o["origin"] != nil else {
            throw fail("unique_id, name, device and origin are all wanted")
        }
        // default_entity_id: "<domain>.<slug>", the domain the component's.
        let entityID = o["default_entity_id"]?.stringValue ?? ""
        let slug = entityID.dropFirst(component.count + 1)
        guard entityID.hasPrefix(component + "."), !slug.isEmpty,
              slug.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") }) else {
            throw fail("default_entity_id \(entityID) is not \(component).<slug>")
        }
        try checkDevice(o["device"]!)
        try checkOrigin(o["origin"]!)
        try checkAvailability(o)

        if let category = o["entity_category"]?.stringValue {
            guard ["config", "diagnostic"].contains(category) else { throw fail("entity_category \(category)") }
            // HA refuses `config` for read-only platforms.
            if category == "config", ["sensor", "binary_sensor"].contains(component) { throw fail("config category on a \(component)") }
        }
        if let icon = o["icon"]?.stringValue, !icon.hasPrefix("mdi:") { throw fail("icon \(icon)") }
        let deviceClass = o["device_class"]?.stringValue
        if let deviceClass, !schema.deviceClasses.contains(deviceClass) { throw fail("\(component) device_class \(deviceClass)") }

        switch component {
        case "sensor": try checkSensor(o, deviceClass)
        case "select":
            guard let options = o["options"]?.arrayValue, !options.isEmpty else { throw fail("select without options") }
            if let t = o["command_template"]?.stringValue {
                // Each option rendered into the command template must be a JSON command.
                for option in options.compactMap(\.stringValue) {
                    let rendered = t.replacingOccurrences(of: "{{ value }}", with: option)
                    guard (try? JSONValue(parsing: rendered))?.objectValue != nil else { throw fail("\(option) renders \(rendered)") }
                }
            }
        case "number":
            let min = o["min"]?.doubleValue ?? 1, max = o["max"]?.doubleValue ?? 100, step = o["step"]?.doubleValue ?? 1
            guard min < max, step > 0 else { throw fail("number range \(min)…\(max) step \(step)") }
            if let mode = o["mode"]?.stringValue, !["auto", "box", "slider"].contains(mode) { throw fail("number mode \(mode)") }
        case "button":
            if let p = o["payload_press"]?.stringValue, p.hasPrefix("{"), (try? JSONValue(parsing: p)) == nil { throw fail("payload_press \(p)") }
        case "switch":
            // A JSON command as payload_on needs explicit state_on/state_off (they default to the payloads).
            if o["payload_on"]?.stringValue?.hasPrefix("{") == true, o["state_on"] == nil || o["state_off"] == nil {
                throw fail("switch with JSON payloads and no state_on/state_off")
            }
        default: break
        }
    }

    static func checkKind(_ key: String, _ v: JSONValue, _ kind: Kind) throws {
        switch kind {
        case .string: guard v.stringValue?.isEmpty == false || key.hasPrefix("payload") else { throw fail("\(key) must be a non-empty string") }
        case .number: guard v.doubleValue != nil else { throw fail("\(key) must be a number") }
        case .integer: guard v.int64Value != nil else { throw fail("\(key) must be an integer") }
        case .boolean: guard v.boolValue != nil else { throw fail("\(key) must be a boolean") }
        case .template: guard let t = v.stringValue, t.contains("{{") else { throw fail("\(key) must be a template") }
        case .topic:
            guard let t = v.stringValue, !t.isEmpty, !t.contains("+"), !t.contains("#") else { throw fail("\(key) must be a topic") }
        case .stringList:
            guard let a = v.arrayValue, a.allSatisfy({ $0.stringValue != nil }) else { throw fail("\(key) must be a list of strings") }
        case .object: guard v.objectValue != nil else { throw fail("\(key) must be an object") }
        case .list: guard v.arrayValue != nil else { throw fail("\(key) must be a list") }
        }
    }

    static func checkDevice(_ v: JSONValue) throws {
        guard let d = v.objectValue else { throw fail("device is not an object") }
        for (key, value) in d {
            guard let kind = device[key] else { throw fail("device.\(key) is not a device option") }
            try checkKind("device.\(key)", value, kind)
        }
        // HA takes an http(s) URL or a `homeassistant://` path.
        if let url = d["configuration_url"]?.stringValue,
           !(url.hasPrefix("http://") || url.hasPrefix("https://") || url.hasPrefix("homeassistant://")) {
            throw fail("device.configuration_url \(url)")
        }
        let identifiers = d["identifiers"]?.arrayValue ?? []
        let connections = d["connections"]?.arrayValue ?? []
        guard !identifiers.isEmpty || !connections.isEmpty else { throw fail("device needs identifiers or connections") }
        for c in connections {
            guard let pair = c.arrayValue, pair.count == 2, pair.allSatisfy({ $0.stringValue != nil }) else {
                throw fail("device connection \(c) is not [type, id]")
            }
            if pair[0] == "bluetooth", let mac = pair[1].stringValue, mac != mac.lowercased() || mac.count != 17 {
                throw fail("bluetooth connection \(mac) is not a lowercase MAC")
            }
        }
    }

    static func checkOrigin(_ v: JSONValue) throws {
        guard let o = v.objectValue, o["name"]?.stringValue != nil else { throw fail("origin needs a name") }
        for key in o.keys where !["name", "sw_version", "support_url"].contains(key) { throw fail("origin.\(key)") }
        if let url = o["support_url"]?.stringValue, !(url.hasPrefix("http://") || url.hasPrefix("https://")) { throw fail("support_url") }
    }

    static func checkAvailability(_ o: JSONObject) throws {
        guard let list = o["availability"] else { return }
        guard o["availability_topic"] == nil else { throw fail("availability and availability_topic are exclusive") }
        guard let items = list.arrayValue, !items.isEmpty else { throw fail("availability must be a non-empty list") }
        for item in items {
            guard let a = item.objectValue, a["topic"]?.stringValue != nil else { throw fail("availability item without topic") }
            for key in a.keys where !["topic", "payload_available", "payload_not_available", "value_template"].contains(key) {
                throw fail("availability.\(key)")
            }
        }
        if let mode = o["availability_mode"]?.stringValue, !["all", "any", "latest"].contains(mode) { throw fail("availability_mode \(mode)") }
    }

    /// `validate_sensor_state_and_device_class_config` and the device class tables.
    static func checkSensor(_ o: JSONObject, _ deviceClass: String?) throws {
        let unit = o["unit_of_measurement"]?.stringValue
        let stateClass = o["state_class"]?.stringValue
        if let stateClass, !["measurement", "measurement_angle", "total", "total_increasing"].contains(stateClass) {
            throw fail("state_class \(stateClass)")
        }
        if let options = o["options"] {
            guard deviceClass == "enum", !(options.arrayValue ?? []).isEmpty, unit == nil, stateClass == nil else {
                throw fail("options need device class enum, no unit and no state class")
            }
        }
        if deviceClass == "enum", o["options"] == nil { throw fail("an enum sensor needs options") }
        guard let deviceClass else { return }
        guard let allowed = units[deviceClass], let states = stateClasses[deviceClass] else {
            throw fail("device class \(deviceClass) not in this test's unit tables")
        }
        guard allowed.contains(unit) else { throw fail("unit \(unit ?? "none") is not valid with device class \(deviceClass)") }
        guard states.contains(stateClass) else { throw fail("state class \(stateClass ?? "none") is not valid with device class \(deviceClass)") }
    }
}
