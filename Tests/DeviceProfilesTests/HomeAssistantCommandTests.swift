import BinaryCoding
import BridgeConfig
import BridgeCore
import GoProCodec
import Testing
@testable import DeviceProfiles

/// Every command a Home Assistant entity of the discovery can send — a button's
/// `payload_press`, a switch's payloads, each option of a select through its
/// `command_template`, a number's values — goes the way the bridge routes it (`Topics.route`,
/// `parseSetPayload`, `parseShortcutValue`) and is accepted by the device's driver.
@Suite struct HomeAssistantCommandTests {
    let ha = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "gatt2mqtt"), version: "0.1.0", profiles: DeviceProfiles.catalog())
    let topics = Topics(base: "gatt2mqtt")

    /// What HA publishes for each config with a command topic: (command topic, payload).
    func commands(_ messages: [OutboundMessage]) throws -> [(topic: String, payload: String, from: String)] {
        var out: [(String, String, String)] = []
        for m in messages {
            let c = try JSONValue(parsing: m.payload)
            guard let topic = c["command_topic"]?.stringValue else { continue }
            let component = m.topic.split(separator: "/")[1]
            switch component {
            case "button": out.append((topic, c["payload_press"]?.stringValue ?? "PRESS", m.topic))
            case "switch":
                out.append((topic, c["payload_on"]?.stringValue ?? "ON", m.topic))
                out.append((topic, c["payload_off"]?.stringValue ?? "OFF", m.topic))
            case "select":
                let template = c["command_template"]?.stringValue ?? "{{ value }}"
                for option in c["options"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
                    out.append((topic, template.replacingOccurrences(of: "{{ value }}", with: option), m.topic))
                }
            case "number":
                let min = c["min"]?.int64Value ?? 1, max = c["max"]?.int64Value ?? 100
                for v in [min, (min + max) / 2, max] { out.append((topic, String(v), m.topic)) }
            default: Issue.record("\(m.topic): a command topic on a \(component)")
            }
        }
        return out
    }

    /// Routes one command as `Bridge.handle` does and encodes it with `driver`; returns the
    /// commands that reached a device driver.
    func accept<D: DeviceDriver>(_ messages: [OutboundMessage], device: String, _ driver: D) throws -> Int {
        var encoded = 0
        for (topic, payload, from) in try commands(messages) {
            let body: JSONObject
            switch topics.route(topic) {
            case .set(device)?:
                let parsed = try parseSetPayload(Array(payload.utf8))
                try #require(parsed.count == 1, "\(from)")
                body = parsed[0].body
            case let .setAttribute(target, attribute)? where target == device:
                body = [attribute: parseShortcutValue(Array(payload.utf8))]
            case .bridgeRequest?:
                continue  // the bridge's own entities
            default:
                Issue.record("\(from): command topic \(topic) is not one of \(device)'s")
                continue
            }
            var d = driver
            do {
                _ = try d.encode(body, mtu: 23)
                encoded += 1
            } catch {
                Issue.record("\(from): \(payload) → \(error)")
            }
        }
        return encoded
    }

    @Test func goproCommandsAreAcceptedByTheGoProDriver() throws {
        var camera = DeviceConfig(id: "camera", profile: .gopro)
        camera.address = "C0:FF:EE:00:00:01"
        let n = try accept(ha.messages(for: [camera]), device: "camera", GoProDriver())
        let selectOptions = ["video_resolution", "frames_per_second", "video_lens"].compactMap { GoProSetting.setting(named: $0)?.options.count }
        // 5 buttons, 2 switches × on/off, the preset group's 3 options and every setting option.
        #expect(n == 5 + 4 + 3 + selectOptions.reduce(0, +))
    }

    /// The select's option names become the setting's values (`"4K"` → 1): the bytes the
    /// camera gets for a few of them.
    @Test func goproSelectOptionsEncodeToTheSettingValues() throws {
        var d = GoProDriver()
        let r = try d.encode(["setting": "video_resolution", "value": "5.3K"], mtu: 23)
        #expect(r.writes.first?.value.suffix(3) == [0x02, 0x01, 100])
        let fps = try d.encode(["setting": "frames_per_second", "value": "240.0"], mtu: 23)
        #expect(fps.writes.first?.value.suffix(3) == [0x03, 0x01, 0])
        let group = try d.encode(["command": "load_preset_group", "group": "timelapse"], mtu: 23)
        #expect(group.writes.first?.value.suffix(4) == [0x3E, 0x02, 0x03, 0xEA])
    }

    @Test func rokidCommandsAreAcceptedByTheRokidDriver() throws {
        var glasses = DeviceConfig(id: "glasses", profile: .rokid)
        glasses.address = "C0:FF:EE:00:00:02"
        let n = try accept(ha.messages(for: [glasses]), device: "glasses", RokidDriver(now: { 0 }))
        #expect(n == 3 + 3 + 1)  // brightness and volume at min, middle, max; close custom view
    }
}
