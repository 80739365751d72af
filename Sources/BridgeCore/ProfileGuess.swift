import BinaryCoding
import BridgeConfig

/// What a scanned device probably is, from its advertisement alone (`bridge/request/scan`), and
/// the device templates `bridge/request/device/add` takes as a `profile`: GoPro (its service
/// FEA6 or GoPro's company id), Rokid glasses (service 0x9100), or a built-in layout device from
/// the SIG services it advertises.
public struct ProfileGuess: Sendable, Equatable {
    /// `gopro`, `rokid`, or a template name (``templates``).
    public var name: String
    public var profile: DeviceProfile
    /// For templates: the mappings, in the shape of a `characteristics[]` entry.
    public var characteristics: [JSONValue]

    /// GoPro, Inc.'s Bluetooth SIG company identifier.
    public static let goProCompanyID: UInt16 = 0x02F2

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

    /// The profiles and templates `device/add` accepts by name.
    public static var names: [String] { ["gopro", "rokid", "custom"] + templates.map(\.name) }

    /// A profile or template by name; a template also brings the battery mapping when
    /// `withBattery` (the device advertises the Battery service too).
    public static func named(_ name: String, withBattery: Bool = false) -> ProfileGuess? {
        switch name {
        case "gopro": return ProfileGuess(name: name, profile: .gopro, characteristics: [])
        case "rokid": return ProfileGuess(name: name, profile: .rokid, characteristics: [])
        default:
            guard let t = templates.first(where: { $0.name == name }) else { return nil }
            let battery = withBattery && name != "battery" ? templates.first { $0.name == "battery" }!.characteristics : []
            return ProfileGuess(name: name, profile: .custom, characteristics: t.characteristics + battery)
        }
    }

    /// The guess for one advertisement, nil when nothing in it is known.
    public static func guess(_ ad: Advertisement) -> ProfileGuess? {
        let services = Set(ad.serviceUUIDs.map(shortUUID) + ad.serviceData.keys.map(shortUUID))
        if services.contains("FEA6") || ad.manufacturerData[goProCompanyID] != nil { return named("gopro") }
        if services.contains("9100") { return named("rokid") }
        for t in templates where services.contains(t.service) {
            return named(t.name, withBattery: services.contains("180F"))
        }
        return nil
    }

    /// `0000180d-0000-1000-8000-00805f9b34fb` → `180D`; other UUIDs upper-cased as they are.
    public static func shortUUID(_ uuid: String) -> String {
        let u = uuid.uppercased()
        if u.count == 36, u.hasPrefix("0000"), u.hasSuffix("-0000-1000-8000-00805F9B34FB") {
            return String(u.dropFirst(4).prefix(4))
        }
        return u
    }
}
