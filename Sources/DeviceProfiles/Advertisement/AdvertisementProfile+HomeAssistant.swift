import AdvertisementCodec
import BinaryCoding
import BridgeConfig
import BridgeCore
import GattLayout

/// A passive device's entities (docs/homeassistant.md, "Passive devices"): one per field its
/// format declares (a layout format's fields: ATC, Ruuvi, Govee, the user's; known before the
/// first advertisement), then one per other field of its state — the fields it has sent (all of
/// BTHome's and MiBeacon's), kept in the store, so a restart publishes them at once — each described by its measurement name (the names every format uses): a number is a sensor
/// with the unit, device class and state class of ``measures``, a boolean a binary sensor with
/// the device class of ``binaryClasses``, a text (a button's or dimmer's event) a sensor. A name
/// that occurs more than once in one advertisement has `_2`, `_3`… after it and the first's
/// meaning. RSSI and last seen are every device's (the bridge's diagnostic entities).
extension AdvertisementProfile {
    /// A measurement's meaning for Home Assistant.
    struct Measure: Equatable {
        var deviceClass: String?
        var unit: String?
        var stateClass: String? = "measurement"
        var diagnostic = false
    }

    /// Measurement name → meaning (unit as the formats give the value: BTHome v2's).
    static let measures: [String: Measure] = [
        "temperature": Measure(deviceClass: "temperature", unit: "°C"),
        "dew_point": Measure(deviceClass: "temperature", unit: "°C"),
        "humidity": Measure(deviceClass: "humidity", unit: "%"),
        "battery": Measure(deviceClass: "battery", unit: "%"),
        "voltage": Measure(deviceClass: "voltage", unit: "V"),
        "pressure": Measure(deviceClass: "atmospheric_pressure", unit: "hPa"),
        "illuminance": Measure(deviceClass: "illuminance", unit: "lx"),
        "moisture": Measure(deviceClass: "moisture", unit: "%"),
        "conductivity": Measure(deviceClass: "conductivity", unit: "µS/cm"),
        "co2": Measure(deviceClass: "carbon_dioxide", unit: "ppm"),
        "tvoc": Measure(deviceClass: "volatile_organic_compounds", unit: "µg/m³"),
        "pm2_5": Measure(deviceClass: "pm25", unit: "µg/m³"),
        "pm10": Measure(deviceClass: "pm10", unit: "µg/m³"),
        "power": Measure(deviceClass: "power", unit: "W"),
        "energy": Measure(deviceClass: "energy", unit: "kWh", stateClass: "total_increasing"),
        "current": Measure(deviceClass: "current", unit: "A"),
        "mass_kg": Measure(deviceClass: "weight", unit: "kg"),
        "mass_lb": Measure(deviceClass: "weight", unit: "lb"),
        "distance_mm": Measure(deviceClass: "distance", unit: "mm"),
        "distance_m": Measure(deviceClass: "distance", unit: "m"),
        "duration": Measure(deviceClass: "duration", unit: "s"),
        "no_motion_time": Measure(deviceClass: "duration", unit: "s"),
        "count": Measure(),
        "rotation": Measure(unit: "°"),
        "speed": Measure(deviceClass: "speed", unit: "m/s"),
        "uv_index": Measure(),
        "volume_l": Measure(deviceClass: "volume", unit: "L"),
        "volume_ml": Measure(deviceClass: "volume", unit: "mL"),
        "water": Measure(deviceClass: "water", unit: "L", stateClass: "total_increasing"),
        "gas": Measure(deviceClass: "gas", unit: "m³", stateClass: "total_increasing"),
        "acceleration": Measure(unit: "m/s²"),
        "acceleration_x": Measure(unit: "m/s²"),
        "acceleration_y": Measure(unit: "m/s²"),
        "acceleration_z": Measure(unit: "m/s²"),
        "gyroscope": Measure(unit: "°/s"),
        "precipitation": Measure(deviceClass: "precipitation", unit: "mm"),
        "direction": Measure(unit: "°"),
        "volume_flow_rate": Measure(deviceClass: "volume_flow_rate", unit: "m³/h"),
        "formaldehyde": Measure(unit: "mg/m³"),
        "consumable": Measure(unit: "%"),
        "dimmer_steps": Measure(),
        "tx_power": Measure(deviceClass: "signal_strength", unit: "dBm", diagnostic: true),
        "movement_counter": Measure(stateClass: nil, diagnostic: true),
        "measurement_sequence": Measure(stateClass: nil, diagnostic: true),
        "packet_id": Measure(stateClass: nil, diagnostic: true),
    ]

    /// Boolean measurement name → binary sensor device class (nil: none, `generic`).
    static let binaryClasses: [String: String?] = [
        "battery_low": "battery", "battery_charging": "battery_charging", "carbon_monoxide": "carbon_monoxide",
        "cold": "cold", "connectivity": "connectivity", "door": "door", "garage_door": "garage_door", "gas_detected": "gas",
        "generic": nil, "heat": "heat", "light": "light", "lock": "lock", "moisture_detected": "moisture", "motion": "motion",
        "moving": "moving", "occupancy": "occupancy", "opening": "opening", "plug": "plug", "power_on": "power",
        "presence": "presence", "problem": "problem", "running": "running", "safety": "safety", "smoke": "smoke",
        "sound": "sound", "tamper": "tamper", "vibration": "vibration", "window": "window",
    ]

    /// The keys of every device's state that are not the sensor's fields.
    static let bridgeKeys: Set<String> = ["rssi", "last_seen"]

    /// `temperature_2` → `temperature` (a second object of one kind in an advertisement).
    static func measurement(_ key: String) -> String {
        guard let i = key.lastIndex(of: "_"), Int(key[key.index(after: i)...]) != nil else { return key }
        let base = String(key[..<i])
        return measures[base] != nil || binaryClasses[base] != nil ? base : key
    }

    public func homeAssistantEntities(for device: DeviceConfig, topics: Topics, state: JSONObject) -> [HomeAssistantDiscovery.Entity] {
        homeAssistantEntities(for: device, topics: topics, state: state, formats: [:])
    }

    /// `formats`: the configuration's `advertisement_formats` (a user format's declared fields).
    public func homeAssistantEntities(for device: DeviceConfig, topics: Topics, state: JSONObject,
                                      formats: [String: JSONValue]) -> [HomeAssistantDiscovery.Entity] {
        let format = device.format.flatMap { try? resolver.format(named: $0, formats: formats) }
        let declared = format?.declaredFields ?? []
        let names = Set(declared.map(\.name))
        return declared.compactMap { key in Self.kind(key.kind).map { Self.entity(key.name, $0, unit: key.unit) } }
            + state.keys.filter { !Self.bridgeKeys.contains($0) && !names.contains($0) }.compactMap { key in Self.entity(key, state[key]) }
    }

    /// What a field's entity shows.
    enum ValueKind { case number, flag, text }

    /// A declared field's kind as an entity's (lists and objects: none).
    static func kind(_ kind: GattLayout.Key.Kind) -> ValueKind? {
        switch kind {
        case .number: .number
        case .boolean: .flag
        case .choice, .text: .text
        case .list, .object: nil
        }
    }

    /// The entity of a state's field, by its value.
    static func entity(_ key: String, _ value: JSONValue?) -> HomeAssistantDiscovery.Entity? {
        switch value {
        case .bool?: entity(key, .flag)
        case .int?, .uint?, .double?: entity(key, .number)
        case .string?: entity(key, .text)
        default: nil  // arrays, objects, null: no entity
        }
    }

    /// `unit`: the format's own unit for the field (a declared one), else the measurement's.
    static func entity(_ key: String, _ kind: ValueKind, unit: String? = nil) -> HomeAssistantDiscovery.Entity {
        let name = measurement(key)
        let object = HomeAssistantDiscovery.objectID(key), title = HomeAssistantDiscovery.title(key)
        switch kind {
        case .flag:
            var extra = JSONObject()
            if let dc = binaryClasses[name] ?? nil { extra["device_class"] = .string(dc) }
            return .init(.binarySensor, object, title, .flag([key]), extra)
        case .number:
            var extra = JSONObject()
            let m = measures[name] ?? Measure()
            if let v = m.deviceClass { extra["device_class"] = .string(v) }
            if let v = unit ?? m.unit { extra["unit_of_measurement"] = .string(v) }
            if let v = m.stateClass { extra["state_class"] = .string(v) }
            if m.diagnostic { extra["entity_category"] = "diagnostic" }
            return .init(.sensor, object, title, .number([key]), extra)
        case .text:
            // A button's or dimmer's event (`press`, `rotate_left`), a named value, other text: its last value.
            return .init(.sensor, object, title, .text([key]))
        }
    }
}
