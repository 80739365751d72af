import BinaryCoding
import BridgeConfig
import BridgeCore
import GoProCodec

/// The `gopro` profile: an Open GoPro camera (docs/gopro.md). Its driver is ``GoProDriver``; a
/// scan knows it by the GoPro service (FEA6) or GoPro's company id; Home Assistant gets its
/// statuses, the main settings as selects and the shutter (GoProProfile+HomeAssistant.swift);
/// a user interface also every other setting with its allowed values.
public struct GoProProfile: DeviceProfile {
    public let id: ProfileID = .gopro

    /// GoPro, Inc.'s Bluetooth SIG company identifier.
    public static let companyID: UInt16 = 0x02F2

    public init() {}

    public func makeDriver(for device: DeviceConfig, context: DriverContext) throws -> any DeviceDriver { GoProDriver() }

    /// The statuses and settings the Home Assistant entities read (their state keys by the
    /// tables' names), which the driver registers for by id at each connect: the answer carries
    /// their current values (spec gopro.md §6), so every entity has a value right after `online`.
    public static let entityValues: (statuses: [UInt8], settings: [UInt8]) = {
        var statuses: [UInt8] = []
        var settings: [UInt8] = []
        for entity in GoProProfile().homeAssistantEntities(for: DeviceConfig(id: "camera", profile: .gopro), topics: Topics(base: "gatt2mqtt")) {
            guard let key = entity.state.flatMap(Self.stateKey) else { continue }
            if let s = GoProStatus.status(named: key), !statuses.contains(s.id) { statuses.append(s.id) }
            if let s = GoProSetting.setting(named: key), !settings.contains(s.id) { settings.append(s.id) }
        }
        return (statuses, settings)
    }()

    /// The first key of the state path an entity's value template reads.
    static func stateKey(_ value: HomeAssistantDiscovery.StateValue) -> String? { value.path.first }

    public func matches(_ ad: Advertisement) -> ProfileGuess? {
        guard ProfileGuess.services(ad).contains("FEA6") || ad.manufacturerData[Self.companyID] != nil else { return nil }
        return ProfileGuess(name: id.rawValue, profile: id, characteristics: [])
    }

    public func homeAssistantModel(for device: DeviceConfig, hardware: JSONObject) -> HomeAssistantDiscovery.Model {
        var modelID: String?
        if let n = hardware["model_number"], !n.isNull { modelID = n.stringValue ?? n.jsonText }
        // Get Hardware Info (§5, 0x3C) has no hardware revision (its one other field is 4
        // deprecated bytes): the model number is what names the camera's hardware, so it is
        // `hw_version` as well as `model_id` (HA shows the one or the other by version and card).
        return .init(manufacturer: "GoPro", model: hardware["model_name"]?.stringValue ?? "Open GoPro camera", modelID: modelID,
                     hardwareVersion: modelID)
    }

    /// Every setting with options that no entity offers already, as a `setting` control.
    public func controls(for device: DeviceConfig, topics: Topics, besides named: Set<String>) -> [JSONValue] {
        GoProSetting.all.filter { !named.contains($0.name) && !$0.options.isEmpty }.map { s in
            ["component": "setting", "object": .string(s.name), "name": .string(s.title),
             "command_topic": .string(topics.base + "/\(device.id)/set"),
             "command_template": .string(#"{"setting":"\#(s.name)","value":"{{ value }}"}"#),
             "options": .array(s.options.map { .string($0.name) })]
        }
    }
}
