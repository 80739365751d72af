import BinaryCoding
import BridgeConfig

// `bridge/devices`' `definition` (docs/bridge-api.md "bridge/devices"): a device's controls
// (Bridge+Controls, what the web frontend offers) in zigbee2mqtt's `exposes` vocabulary, so what
// reads zigbee2mqtt's device list finds what each device can do.

extension Bridge {
    /// `{"model","vendor","description","exposes":[…]}` of a device.
    func definition(of device: DeviceConfig) -> JSONValue {
        let model = profiles[device.profile]?.homeAssistantModel(for: device, hardware: [:])
        return ["model": .string(model?.model ?? device.profile.rawValue), "vendor": .string(model?.manufacturer ?? "Bluetooth LE"),
                "description": .string("\(device.profile.rawValue) (gatt2mqtt profile)"),
                "exposes": .array(Self.exposes(controls(of: device)))]
    }

    /// zigbee2mqtt's access bits: published in the state, settable (`/set`), readable (`/get`).
    static let accessState: Int64 = 1, accessSet: Int64 = 2, accessGet: Int64 = 4

    /// Controls as zigbee2mqtt exposes: `switch` → `binary` (`value_on`/`value_off`), `select` and
    /// a profile's `setting` → `enum` (`values`), `number` → `numeric` (`value_min`, `value_max`,
    /// `value_step`, `unit`), `button` → `enum` of its one payload, settable only; a custom
    /// mapping's `get` and `write` → `text`, readable and/or settable (one feature per property,
    /// the access bits of both). Each keeps `command_topic`, where its command goes.
    static func exposes(_ controls: [JSONValue]) -> [JSONValue] {
        var out: [JSONObject] = []
        for case let .object(c) in controls {
            guard let property = c["object"]?.stringValue, let component = c["component"]?.stringValue else { continue }
            var e: JSONObject = ["name": .string(property), "label": c["name"] ?? .string(property), "property": .string(property)]
            switch component {
            case "switch":
                e["type"] = "binary"
                e["access"] = .int(accessState | accessSet)
                e["value_on"] = c["payload_on"] ?? "ON"
                e["value_off"] = c["payload_off"] ?? "OFF"
            case "select", "setting":
                e["type"] = "enum"
                e["access"] = .int(component == "select" ? accessState | accessSet : accessSet)
                e["values"] = c["options"] ?? .array([])
            case "number":
                e["type"] = "numeric"
                e["access"] = .int(accessState | accessSet)
                if let v = c["min"] { e["value_min"] = v }
                if let v = c["max"] { e["value_max"] = v }
                if let v = c["step"] { e["value_step"] = v }
                if let v = c["unit_of_measurement"] { e["unit"] = v }
            case "button":
                e["type"] = "enum"
                e["access"] = .int(accessSet)
                e["values"] = .array([c["payload_press"] ?? "PRESS"])
            case "get":
                e["type"] = "text"
                e["access"] = .int(accessState | accessGet)
            default:  // "write", and whatever a profile adds later: a value sent as it is
                e["type"] = "text"
                e["access"] = .int(accessSet)
            }
            if let topic = c["command_topic"] { e["command_topic"] = topic }
            if let i = out.firstIndex(where: { $0["property"] == e["property"] && $0["type"] == e["type"] }) {
                // One feature per property: a readable and writable mapping has both bits.
                let both = (out[i]["access"]?.int64Value ?? 0) | (e["access"]?.int64Value ?? 0)
                out[i]["access"] = .int(both)
                if component == "write", let topic = c["command_topic"] { out[i]["command_topic"] = topic }
                continue
            }
            out.append(e)
        }
        return out.map { .object($0) }
    }
}
