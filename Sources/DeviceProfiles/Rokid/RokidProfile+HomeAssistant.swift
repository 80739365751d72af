import BinaryCoding
import BridgeConfig
import BridgeCore

/// Rokid glasses' entities (docs/homeassistant.md, "Rokid glasses"): what the `RokidDriver`
/// keeps in the state — `battery`, `brightness` and `volume` (0–15, `Dev_GlassBrightness` /
/// `Dev_GlassSound`, spec rokid-caps.md), `custom_view` (`open`, `closed`, `failed`) — and the
/// commands of docs/caps.md. The glasses' wearing and charging notifications have no payload the
/// spec shows, so the driver keeps neither and no entity offers them.
extension RokidProfile {
    typealias Entity = HomeAssistantDiscovery.Entity

    /// The custom view states the driver sets from `Custom_View_*` notifications.
    static let customViewStates = ["open", "closed", "failed"]

    public func homeAssistantEntities(for d: DeviceConfig, topics: Topics) -> [HomeAssistantDiscovery.Entity] {
        let set = "\(topics.base)/\(d.id)/set"
        return [
            Entity(.sensor, "battery", "Battery", .number(["battery"]),
                   ["device_class": "battery", "unit_of_measurement": "%", "state_class": "measurement"]),
            Entity(.number, "brightness", "Brightness", .number(["brightness"]),
                   ["command_topic": .string("\(set)/brightness"), "min": 0, "max": 15, "step": 1, "mode": "slider",
                    "icon": "mdi:brightness-6"]),
            Entity(.number, "volume", "Volume", .number(["volume"]),
                   ["command_topic": .string("\(set)/volume"), "min": 0, "max": 15, "step": 1, "mode": "slider",
                    "icon": "mdi:volume-high"]),
            Entity(.sensor, "custom_view", "Custom view", .choice(["custom_view"], options: Self.customViewStates),
                   ["device_class": "enum", "options": .array(Self.customViewStates.map { .string($0) }),
                    "icon": "mdi:card-text-outline"]),
            Entity(.button, "close_custom_view", "Close custom view", nil,
                   ["command_topic": .string(set), "payload_press": #"{"command":"close_custom_view"}"#,
                    "icon": "mdi:close-box-outline"]),
        ]
    }
}
