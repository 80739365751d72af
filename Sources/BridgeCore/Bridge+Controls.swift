import BinaryCoding
import BridgeConfig
import GoProCodec

// What a user interface can offer for a device (the web frontend's command forms,
// docs/frontend.md): the commands of the Home Assistant discovery (the same vocabulary, whether
// discovery is on or off), every GoPro setting with its allowed values, and a custom device's
// readable and writable characteristics. Each control names the MQTT topic its command goes to.

extension Bridge {
    /// The device's controls, or nil when there is no such device. Each is an object with
    /// `component` (`button`, `switch`, `select`, `number`, `setting`, `get`, `write`), `object`,
    /// `name`, `command_topic` and the component's fields (`payload_press`, `payload_on`/`_off`,
    /// `options`, `command_template`, `min`/`max`/`step`, `codec`).
    public func controls(for id: String) -> JSONValue? {
        guard let device = registry.withLock({ $0[id]?.config }) else { return nil }
        let vocabulary = discovery ?? HomeAssistantDiscovery(prefix: "homeassistant", topics: topics, version: version)
        var out: [JSONValue] = []
        var named = Set<String>()
        for e in vocabulary.entities(for: device) where e.extra["command_topic"] != nil {
            var o: JSONObject = ["component": .string(e.component.rawValue), "object": .string(e.object), "name": .string(e.name)]
            o.merge(e.extra)
            named.insert(e.object)
            out.append(.object(o))
        }
        switch device.profile {
        case .gopro:
            for s in GoProSetting.all where !named.contains(s.name) && !s.options.isEmpty {
                out.append(["component": "setting", "object": .string(s.name), "name": .string(s.title),
                            "command_topic": .string(topics.base + "/\(id)/set"),
                            "command_template": .string(#"{"setting":"\#(s.name)","value":"{{ value }}"}"#),
                            "options": .array(s.options.map { .string($0.name) })])
            }
        case .custom:
            for c in device.characteristics {
                if c.directions.contains(.read) {
                    out.append(["component": "get", "object": .string(c.topic), "name": .string("Read \(c.topic)"),
                                "command_topic": .string(topics.base + "/\(id)/get")])
                }
                if c.directions.contains(.write) {
                    out.append(["component": "write", "object": .string(c.topic), "name": .string("Write \(c.topic)"),
                                "command_topic": .string(topics.characteristic(id, c.topic) + "/write"), "codec": .string(c.codec.rawValue)])
                }
            }
        case .rokid:
            break
        }
        return .array(out)
    }
}
