import BinaryCoding
import BridgeConfig

// What a user interface can offer for a device (the web frontend's command forms,
// docs/frontend.md): the commands of the Home Assistant discovery (the same vocabulary, whether
// discovery is on or off), then what the device's profile offers besides (every GoPro setting
// with its allowed values, a custom device's readable and writable characteristics:
// `DeviceProfile.controls`). Each control names the MQTT topic its command goes to.

extension Bridge {
    /// The device's controls, or nil when there is no such device. Each is an object with
    /// `component` (`button`, `switch`, `select`, `number`, `setting`, `get`, `write`), `object`,
    /// `name`, `command_topic` and the component's fields (`payload_press`, `payload_on`/`_off`,
    /// `options`, `command_template`, `min`/`max`/`step`, `codec`).
    public func controls(for id: String) -> JSONValue? {
        guard let device = registry.withLock({ $0[id]?.config }) else { return nil }
        return .array(controls(of: device))
    }

    /// The controls of `device` (``controls(for:)``; `bridge/devices`' exposes are made of them).
    func controls(of device: DeviceConfig) -> [JSONValue] {
        let vocabulary = discovery ?? HomeAssistantDiscovery(prefix: "homeassistant", topics: topics, version: version, profiles: profiles)
        var out: [JSONValue] = []
        var named = Set<String>()
        for e in vocabulary.entities(for: device) where e.extra["command_topic"] != nil {
            var o: JSONObject = ["component": .string(e.component.rawValue), "object": .string(e.object), "name": .string(e.name)]
            o.merge(e.extra)
            named.insert(e.object)
            out.append(.object(o))
        }
        out += profiles[device.profile]?.controls(for: device, topics: topics, besides: named) ?? []
        return out
    }
}
