import BinaryCoding
import BridgeConfig
import BridgeCore
import GoProCodec

/// A GoPro camera's entities (docs/homeassistant.md, "GoPro"). The state is the `GoProDriver`'s:
/// statuses (spec gopro.md §11) and settings (appendix) by their snake_case names — setting
/// values as option names — and `hardware` from Get Hardware Info (§5, 0x3C). Commands go to
/// `<base>/<device>/set` in the JSON vocabulary of docs/gopro.md.
extension GoProProfile {
    typealias Entity = HomeAssistantDiscovery.Entity
    typealias StateValue = HomeAssistantDiscovery.StateValue

    /// The settings offered as selects: the preset's main ones (§8).
    static let selectSettings = ["video_resolution", "frames_per_second", "video_lens"]

    /// Load Preset Group's groups (§5, 0x3E) and the JSON names the command takes.
    static let presetGroups: [StateValue.Label] = [
        .init(value: 1000, label: "video"), .init(value: 1001, label: "photo"), .init(value: 1002, label: "timelapse"),
    ]

    public func homeAssistantEntities(for d: DeviceConfig, topics: Topics) -> [HomeAssistantDiscovery.Entity] {
        let set = "\(topics.base)/\(d.id)/set"
        func button(_ object: String, _ name: String, _ command: JSONValue, _ extra: JSONObject = [:]) -> Entity {
            var e: JSONObject = ["command_topic": .string(set), "payload_press": .string(command.jsonText)]
            e.merge(extra)
            return Entity(.button, object, name, nil, e)
        }
        let storage = GoProStatus.status(named: "primary_storage")?.options.map(\.name) ?? []
        var out: [Entity] = [
            Entity(.sensor, "battery", "Battery", .number(["internal_battery_percentage"]),
                   ["device_class": "battery", "unit_of_measurement": "%", "state_class": "measurement"]),
            Entity(.binarySensor, "charging", "Charging", .equals(["internal_battery_bars"], "Charging"),
                   ["device_class": "battery_charging"]),
            Entity(.sensor, "sd_card_remaining", "SD card free", .number(["sd_card_remaining"]),
                   ["device_class": "data_size", "unit_of_measurement": "kB", "state_class": "measurement", "icon": "mdi:sd"]),
            Entity(.sensor, "remaining_video_time", "Video time left", .number(["remaining_video_time"]),
                   ["device_class": "duration", "unit_of_measurement": "s", "state_class": "measurement"]),
            Entity(.sensor, "remaining_photos", "Photos left", .number(["remaining_photos"]),
                   ["state_class": "measurement", "icon": "mdi:camera-image"]),
            Entity(.sensor, "video_encoding_duration", "Recording time", .number(["video_encoding_duration"]),
                   ["device_class": "duration", "unit_of_measurement": "s", "state_class": "measurement"]),
            Entity(.sensor, "sd_card", "SD card", .choice(["primary_storage"], options: storage),
                   ["device_class": "enum", "options": .array(storage.map { .string($0) }), "icon": "mdi:sd"]),
            Entity(.binarySensor, "encoding", "Recording", .flag(["encoding"]), ["device_class": "running"]),
            Entity(.binarySensor, "busy", "Busy", .flag(["busy"]), ["entity_category": "diagnostic"]),
            Entity(.binarySensor, "overheating", "Overheating", .flag(["overheating"]), ["device_class": "heat"]),
            Entity(.binarySensor, "cold", "Too cold", .flag(["cold"]), ["device_class": "cold"]),
            Entity(.binarySensor, "turbo_transfer", "Turbo transfer", .flag(["turbo_transfer"]), ["icon": "mdi:transfer"]),
            Entity(.switch, "shutter", "Shutter", .flag(["encoding"]),
                   ["command_topic": .string("\(set)/shutter"), "payload_on": "ON", "payload_off": "OFF",
                    "state_on": "ON", "state_off": "OFF", "icon": "mdi:record-rec"]),
            Entity(.switch, "locate", "Locate", .flag(["locate"]),
                   ["command_topic": .string(set),
                    "payload_on": .string((["command": "locate_camera", "value": true] as JSONValue).jsonText),
                    "payload_off": .string((["command": "locate_camera", "value": false] as JSONValue).jsonText),
                    "state_on": "ON", "state_off": "OFF", "icon": "mdi:bell-ring"]),
            button("shutter_start", "Start recording", ["command": "set_shutter", "value": true], ["icon": "mdi:record"]),
            button("shutter_stop", "Stop recording", ["command": "set_shutter", "value": false], ["icon": "mdi:stop"]),
            button("hilight", "HiLight moment", ["command": "hilight_moment"], ["icon": "mdi:star"]),
            button("sleep", "Sleep", ["command": "sleep"], ["icon": "mdi:sleep"]),
            button("power_down", "Power down", ["command": "power_down"], ["icon": "mdi:power"]),
            Entity(.select, "preset_group", "Preset group", .mapped(["preset_group"], Self.presetGroups),
                   ["command_topic": .string(set), "command_template": #"{"command":"load_preset_group","group":"{{ value }}"}"#,
                    "options": .array(Self.presetGroups.map { .string($0.label) }), "icon": "mdi:camera-switch"]),
        ]
        for name in Self.selectSettings {
            guard let setting = GoProSetting.setting(named: name) else { continue }
            let options = setting.options.map(\.name)
            out.append(Entity(.select, name, HomeAssistantDiscovery.title(name), .choice([name], options: options),
                              ["command_topic": .string(set),
                               "command_template": .string(#"{"setting":"\#(name)","value":"{{ value }}"}"#),
                               "options": .array(options.map { .string($0) })]))
        }
        return out
    }
}
