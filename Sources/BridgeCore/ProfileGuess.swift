import BinaryCoding
import BridgeConfig

/// What a scanned device probably is, from its advertisement alone (`bridge/request/scan`), or a
/// device template `bridge/request/device/add` takes as a `profile`: a profile, and for a template
/// the characteristic mappings it brings. Which profile matches which advertisement, and which
/// templates exist, is each profile's (``DeviceProfile/matches(_:)``, ``ProfileCatalog``).
public struct ProfileGuess: Sendable, Equatable {
    /// The profile's id, or a template name (`heart_rate`).
    public var name: String
    public var profile: ProfileID
    /// For templates: the mappings, in the shape of a `characteristics[]` entry.
    public var characteristics: [JSONValue]
    /// Other keys of the device entry the guess brings, where the request does not give them (a
    /// passive device's `format`).
    public var fields: JSONObject

    public init(name: String, profile: ProfileID, characteristics: [JSONValue], fields: JSONObject = [:]) {
        self.name = name
        self.profile = profile
        self.characteristics = characteristics
        self.fields = fields
    }

    /// The advertisement's services, short where they are on the Bluetooth base (`180D`).
    public static func services(_ ad: Advertisement) -> Set<String> {
        Set(ad.serviceUUIDs.map(shortUUID) + ad.serviceData.keys.map(shortUUID))
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
