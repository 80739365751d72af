import BinaryCoding
import BridgeConfig
import BridgeCore
import Foundation
import GattLayout

/// A layout device's entities (docs/homeassistant.md, "Layout devices"). The `LayoutDriver`
/// keeps each read/notify mapping's decoded object in the state under the mapping's topic
/// (`{"heart_rate":{"sensor_contact_detected":true,…,"heart_rate":88}}`), so each top-level key
/// of the layout (`GattLayout.keys`) is one entity reading `value_json.<topic>.<key>`:
/// numbers are sensors with the unit, device class and state class the SIG characteristic or the
/// layout's `unit` gives, value flags binary sensors, `enum` fields enum sensors, text fields
/// sensors. Arrays (the RR intervals) and structs (a time stamp) are no entities: they are the
/// attributes of the mapping's main entity (`json_attributes_topic`, the characteristic topic).
/// A raw or Caps mapping is one sensor with the whole value (cut to HA's 255-character state
/// limit; the whole value is its attribute `value`).
extension LayoutProfile {
    typealias Entity = HomeAssistantDiscovery.Entity
    typealias StateValue = HomeAssistantDiscovery.StateValue

    /// A numeric key's meaning for HA.
    struct Measure: Equatable {
        var deviceClass: String?
        var unit: String?
        var stateClass: String?
        var entityCategory: String?
        var icon: String?

        init(_ deviceClass: String?, _ unit: String?, _ stateClass: String? = "measurement", category: String? = nil, icon: String? = nil) {
            self.deviceClass = deviceClass
            self.unit = unit
            self.stateClass = stateClass
            entityCategory = category
            self.icon = icon
        }
    }

    public func homeAssistantEntities(for d: DeviceConfig, topics: Topics) -> [HomeAssistantDiscovery.Entity] {
        d.characteristics.filter { $0.directions.contains(.notify) || $0.directions.contains(.read) }.flatMap { mappingEntities(d, $0, topics) }
            + d.characteristics.compactMap { controlPointEntity(d, $0, topics) }
    }

    /// A writable mapping whose meaning the Bluetooth SIG fixes: the Heart Rate Control Point
    /// (`2A39`, raw), whose one defined value `01` resets the energy expended (HRS 1.0 §3.3.1), is
    /// a button writing `01` through the mapping's `…/write` topic. Other write-only mappings
    /// have no entity: their bytes mean nothing Home Assistant could offer.
    func controlPointEntity(_ d: DeviceConfig, _ c: CharacteristicMapping, _ topics: Topics) -> Entity? {
        guard c.directions.contains(.write), c.codec == .raw, Self.uuid16(c.uuid) == 0x2A39 else { return nil }
        return Entity(.button, HomeAssistantDiscovery.objectID("\(c.topic)_reset_energy_expended"), "Reset energy expended", nil,
                      ["command_topic": .string(topics.characteristic(d.id, c.topic) + "/write"), "payload_press": "01",
                       "entity_category": "config"])
    }

    func mappingEntities(_ d: DeviceConfig, _ c: CharacteristicMapping, _ topics: Topics) -> [Entity] {
        let topic = c.topic
        let attributes: JSONObject = ["json_attributes_topic": .string(topics.characteristic(d.id, topic))]
        let keys = (c.codec == .layout ? Self.layout(c.layout)?.keys : nil)?.filter { $0.kind != .list && $0.kind != .object } ?? []
        guard !keys.isEmpty, let layout = Self.layout(c.layout) else {
            // Raw or GoPro (hex text), Caps (JSON), or a layout of arrays and structs only: the whole value,
            // cut to HA's state limit; the whole of it is the attributes. A raw mapping's topic
            // carries a JSON string and a Caps mapping's an array, which HA cannot take as
            // attributes ("JSON result was not a dictionary", at every message): a template makes
            // them `{"value": …}`. A layout's value is an object already.
            let value: StateValue = c.codec == .raw || c.codec == .gopro ? .longText([topic]) : .json([topic])
            var extra = attributes
            if c.codec != .layout { extra["json_attributes_template"] = "{{ {'value': value_json} | tojson }}" }
            return [Entity(.sensor, HomeAssistantDiscovery.objectID(topic), HomeAssistantDiscovery.title(topic), value, extra)]
        }
        let uuid16 = Self.uuid16(c.uuid) ?? layout.shortUUID
        let numbers = keys.filter { $0.kind == .number }.count
        var out: [Entity] = keys.map { key in
            let object = keys.count == 1 || key.name == topic ? topic : "\(topic)_\(key.name)"
            let name = keys.count == 1 ? HomeAssistantDiscovery.title(topic) : HomeAssistantDiscovery.title(key.name)
            let path = [topic, key.name]
            switch key.kind {
            case .boolean:
                var extra = JSONObject()
                if let dc = Self.binaryClass(uuid16: uuid16, key: key.name) { extra["device_class"] = .string(dc) }
                if uuid16 == 0x2A37, key.name == "sensor_contact_supported" { extra["entity_category"] = "diagnostic" }
                return Entity(.binarySensor, HomeAssistantDiscovery.objectID(object), name, .flag(path), extra)
            case let .choice(names):
                return Entity(.sensor, HomeAssistantDiscovery.objectID(object), name, .choice(path, options: names),
                              ["device_class": "enum", "options": .array(names.map { .string($0) })])
            case .text:
                return Entity(.sensor, HomeAssistantDiscovery.objectID(object), name, .text(path))
            case .number, .list, .object:
                let m = Self.measure(uuid16: uuid16, key: key, onlyNumber: numbers == 1)
                var extra = JSONObject()
                if let v = m.deviceClass { extra["device_class"] = .string(v) }
                if let v = m.unit { extra["unit_of_measurement"] = .string(v) }
                if let v = m.stateClass { extra["state_class"] = .string(v) }
                if let v = m.entityCategory { extra["entity_category"] = .string(v) }
                if let v = m.icon { extra["icon"] = .string(v) }
                return Entity(.sensor, HomeAssistantDiscovery.objectID(object), name, .number(path), extra)
            }
        }
        // The mapping's whole decoded value (arrays and structs included) as the attributes of
        // its main entity: the first number, else the first entity.
        let main = keys.firstIndex { $0.kind == .number } ?? 0
        out[main].extra.merge(attributes)
        return out
    }

    /// The mapping's layout, as the `LayoutDriver` parses it; nil when it does not parse (the
    /// driver then refuses the configuration at start).
    static func layout(_ spec: JSONValue?) -> GattLayout? { spec.flatMap { try? parseLayout($0) } }

    /// The 16-bit UUID of a configured characteristic (`2A37`, `0x2A37`, `00002a37` or the
    /// 128-bit form on the Bluetooth base), nil for a vendor UUID.
    static func uuid16(_ text: String) -> UInt16? {
        var s = text.lowercased()
        if s.hasPrefix("0x") { s.removeFirst(2) }
        if s.count == 4 { return UInt16(s, radix: 16) }
        if s.count == 8, s.hasPrefix("0000") { return UInt16(s.dropFirst(4), radix: 16) }
        let suffix = "-0000-1000-8000-00805f9b34fb"
        if s.count == 36, s.hasPrefix("0000"), s.hasSuffix(suffix) { return UInt16(s.dropFirst(4).prefix(4), radix: 16) }
        return nil
    }

    // MARK: Units and classes

    /// SIG characteristics (Bluetooth GATT Specification Supplement) whose values HA has a class
    /// for: by key name, or `*` for the characteristic's only number whatever the layout calls it.
    static let sigMeasures: [UInt16: [String: Measure]] = [
        0x2A19: ["*": Measure("battery", "%")],  // Battery Level
        0x2A37: [  // Heart Rate Measurement
            "heart_rate": Measure(nil, "bpm", icon: "mdi:heart-pulse"),
            // Energy expended since the last reset (GSS): a total that only grows until it resets.
            "energy_expended": Measure("energy", "kJ", "total_increasing"),
        ],
        0x2A1C: ["temperature_celsius": Measure("temperature", "°C"), "temperature_fahrenheit": Measure("temperature", "°F")],
        0x2A1E: ["temperature_celsius": Measure("temperature", "°C"), "temperature_fahrenheit": Measure("temperature", "°F")],
        0x2A1F: ["*": Measure("temperature", "°C")],  // Temperature Celsius
        0x2A20: ["*": Measure("temperature", "°F")],  // Temperature Fahrenheit
        0x2A6C: ["*": Measure("distance", "m")],  // Elevation
        0x2A6D: ["*": Measure("pressure", "Pa")],  // Pressure
        0x2A6E: ["*": Measure("temperature", "°C")],  // Temperature
        0x2A6F: ["*": Measure("humidity", "%")],  // Humidity
        0x2B18: ["*": Measure("voltage", "V")],  // Voltage
    ]

    /// A numeric key's measure: the SIG table, else from the layout's `unit`.
    static func measure(uuid16: UInt16?, key: GattLayout.Key, onlyNumber: Bool) -> Measure {
        if let uuid16, let table = sigMeasures[uuid16], let m = table[key.name] ?? (onlyNumber ? table["*"] : nil) { return m }
        guard let raw = key.unit?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else { return Measure(nil, nil) }
        let unit = unitAliases[raw] ?? raw
        let name = key.name.lowercased()
        let deviceClass: String?
        if unit == "%" {
            deviceClass = name.contains("battery") ? "battery" : name.contains("humidity") ? "humidity"
                : name.contains("moisture") ? "moisture" : nil
        } else if unit == "ppm" {
            deviceClass = name.contains("co2") ? "carbon_dioxide" : nil
        } else if unit == "µg/m³" {
            deviceClass = name.contains("pm25") || name.contains("pm2_5") ? "pm25" : name.contains("pm10") ? "pm10"
                : name.contains("pm1") ? "pm1" : nil
        } else {
            deviceClass = unitClasses[unit]
        }
        // Energy, like a meter, is a total (HA allows no `measurement` for it).
        return Measure(deviceClass, unit, deviceClass == "energy" ? "total" : "measurement")
    }

    /// Spellings of HA units a layout may use.
    static let unitAliases: [String: String] = [
        "C": "°C", "degC": "°C", "celsius": "°C", "F": "°F", "degF": "°F", "fahrenheit": "°F",
        "percent": "%", "lux": "lx", "ug/m3": "µg/m³", "µg/m3": "µg/m³", "sec": "s", "seconds": "s",
    ]

    /// The HA device class a unit implies on its own (HA's `DEVICE_CLASS_UNITS` the other way round).
    static let unitClasses: [String: String] = {
        var t: [String: String] = [:]
        for (dc, units) in [
            ("temperature", ["°C", "°F", "K"]),
            ("pressure", ["Pa", "hPa", "kPa", "bar", "cbar", "mbar", "mmHg", "inHg", "psi"]),
            ("voltage", ["V", "mV", "µV", "kV"]),
            ("current", ["A", "mA"]),
            ("power", ["mW", "W", "kW"]),
            ("energy", ["J", "kJ", "MJ", "Wh", "kWh", "cal", "kcal"]),
            ("duration", ["d", "h", "min", "s", "ms"]),
            ("distance", ["mm", "cm", "m", "km"]),
            ("frequency", ["Hz", "kHz", "MHz", "GHz"]),
            ("signal_strength", ["dBm"]),
            ("illuminance", ["lx"]),
            ("weight", ["g", "kg"]),
            ("data_size", ["B", "kB", "MB", "GB"]),
        ] {
            for u in units { t[u] = dc }
        }
        return t
    }()

    /// A value flag's binary sensor class, from its name.
    static func binaryClass(uuid16: UInt16?, key: String) -> String? {
        let name = key.lowercased()
        if name.contains("low_battery") || name.contains("battery_low") { return "battery" }
        if name.contains("charging") { return "battery_charging" }
        return nil
    }
}
