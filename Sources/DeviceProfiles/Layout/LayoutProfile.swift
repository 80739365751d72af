import BinaryCoding
import BridgeConfig
import BridgeCore
import GattLayout

/// The `custom` profile: an ordinary GATT device described by characteristic mappings (a layout,
/// Caps or raw hex each; docs/layouts.md). Its driver is ``LayoutDriver``; such a device needs
/// mappings. A scan knows the SIG devices of ``templates`` by the service they advertise, and
/// `device/add` takes a template's name for its mappings; Home Assistant gets an entity per
/// decoded key (LayoutProfile+HomeAssistant.swift), a user interface a read per readable and a
/// write per writable mapping.
public struct LayoutProfile: DeviceProfile {
    public let id: ProfileID = .custom

    public init() {}

    public func validate(_ device: DeviceConfig, path: String) throws(ConfigError) {
        if device.characteristics.isEmpty { throw ConfigError(path: path, line: nil, message: "a custom device needs characteristics") }
    }

    public func makeDriver(for device: DeviceConfig, context: DriverContext) throws -> any DeviceDriver { try LayoutDriver(device: device) }

    /// A mapping's `layout`: `builtin:NAME` or an inline layout object.
    static func parseLayout(_ spec: JSONValue) throws -> GattLayout {
        guard let name = spec.stringValue else { return try GattLayout(json: spec) }
        guard name.hasPrefix("builtin:") else {
            throw GattLayoutError.invalidLayout(path: "", reason: "a string layout must be builtin:NAME")
        }
        return try GattLayout.builtin(named: String(name.dropFirst("builtin:".count)))
    }

    // MARK: Templates and guesses

    /// Template name → the SIG service that identifies it and the mappings it brings.
    public static let templates: [(name: String, service: String, characteristics: [JSONValue])] = [
        ("heart_rate", "180D", [mapping("2A37", "builtin:heart_rate_measurement", ["notify"], "heart_rate")]),
        ("environmental_sensing", "181A", [mapping("2A6E", "builtin:temperature", ["read", "notify"], "temperature"),
                                           mapping("2A6F", "builtin:humidity", ["read", "notify"], "humidity")]),
        ("health_thermometer", "1809", [mapping("2A1C", "builtin:temperature_measurement", ["notify"], "temperature")]),
        ("battery", "180F", [mapping("2A19", "builtin:battery_level", ["read", "notify"], "battery")]),
    ]

    static func mapping(_ uuid: String, _ layout: String, _ directions: [String], _ topic: String) -> JSONValue {
        ["uuid": .string(uuid), "codec": "layout", "layout": .string(layout),
         "direction": .array(directions.map { .string($0) }), "topic": .string(topic)]
    }

    public var templateNames: [String] { Self.templates.map(\.name) }

    /// A template's mappings, and the battery mapping too when `withBattery`.
    public func template(named name: String, withBattery: Bool) -> ProfileGuess? {
        guard let t = Self.templates.first(where: { $0.name == name }) else { return nil }
        let battery = withBattery && name != "battery" ? Self.templates.first { $0.name == "battery" }!.characteristics : []
        return ProfileGuess(name: name, profile: id, characteristics: t.characteristics + battery)
    }

    /// The first template whose service the device advertises (with the battery mapping when it
    /// advertises the Battery service too).
    public func matches(_ ad: Advertisement) -> ProfileGuess? {
        let services = ProfileGuess.services(ad)
        guard let t = Self.templates.first(where: { services.contains($0.service) }) else { return nil }
        return template(named: t.name, withBattery: services.contains("180F"))
    }

    // MARK: Home Assistant and user interfaces

    public func homeAssistantModel(for device: DeviceConfig, hardware: JSONObject) -> HomeAssistantDiscovery.Model {
        .init(manufacturer: "Bluetooth LE", model: "GATT device (layouts)")
    }

    /// A `get` per readable mapping, a `write` per writable one (with its codec).
    public func controls(for device: DeviceConfig, topics: Topics, besides named: Set<String>) -> [JSONValue] {
        var out: [JSONValue] = []
        for c in device.characteristics {
            if c.directions.contains(.read) {
                out.append(["component": "get", "object": .string(c.topic), "name": .string("Read \(c.topic)"),
                            "command_topic": .string(topics.base + "/\(device.id)/get")])
            }
            if c.directions.contains(.write) {
                out.append(["component": "write", "object": .string(c.topic), "name": .string("Write \(c.topic)"),
                            "command_topic": .string(topics.characteristic(device.id, c.topic) + "/write"), "codec": .string(c.codec.rawValue)])
            }
        }
        return out
    }
}
