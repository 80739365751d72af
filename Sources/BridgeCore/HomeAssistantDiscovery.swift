import BinaryCoding
import BridgeConfig
import Foundation

/// Home Assistant MQTT discovery (`shared/spec/bridge.md`, "Home Assistant discovery"):
/// `<prefix>/<component>/<node>/<object>/config`, retained, with `device`, `origin`, `unique_id`,
/// an availability list of the bridge state and the device availability (`availability_mode:
/// all`) and a `value_template` on `value_json`.
public struct HomeAssistantDiscovery: Sendable {
    public let prefix: String
    public let topics: Topics
    public let version: String

    public init(prefix: String, topics: Topics, version: String) {
        self.prefix = prefix
        self.topics = topics
        self.version = version
    }

    /// One entity of a device.
    struct Entity {
        var component: String
        var object: String
        var name: String
        var template: String
        var extra: JSONObject = [:]
    }

    /// The discovery topic HA listens to for its own restarts.
    public var statusTopic: String { "\(prefix)/status" }

    /// Every retained config message: the bridge's own device, then the configured devices.
    public func messages(for devices: [DeviceConfig]) -> [OutboundMessage] {
        bridgeMessages() + devices.flatMap { d in entities(for: d).map { message(for: $0, device: d) } }
    }

    /// The identifier every device's `via_device` names.
    static let bridgeIdentifier = "gatt2mqtt_bridge"

    /// The bridge as a Home Assistant device (every device's `via_device`), with its diagnostic
    /// entities: the connection state (from `bridge/state`, the MQTT Will included, so it has no
    /// availability of its own) and the version (from `bridge/info`).
    func bridgeMessages() -> [OutboundMessage] {
        let device: JSONValue = ["identifiers": [.string(Self.bridgeIdentifier)], "name": "gatt2mqtt bridge",
                                 "manufacturer": "gatt2mqtt", "model": "MQTT ↔ Bluetooth LE bridge", "sw_version": .string(version)]
        let origin: JSONValue = ["name": "gatt2mqtt", "sw_version": .string(version)]
        let state: JSONObject = [
            "name": "Connection state", "unique_id": "gatt2mqtt_bridge_connection_state",
            "default_entity_id": "binary_sensor.gatt2mqtt_bridge_connection_state",
            "state_topic": .string(topics.bridgeState), "value_template": "{{ value_json.state }}",
            "payload_on": "online", "payload_off": "offline", "device_class": "connectivity",
            "entity_category": "diagnostic", "device": device, "origin": origin,
        ]
        let version: JSONObject = [
            "name": "Version", "unique_id": "gatt2mqtt_bridge_version", "default_entity_id": "sensor.gatt2mqtt_bridge_version",
            "state_topic": .string(topics.bridgeInfo), "value_template": "{{ value_json.version }}",
            "availability_topic": .string(topics.bridgeState), "availability_template": "{{ value_json.state }}",
            "entity_category": "diagnostic", "icon": "mdi:information-outline", "device": device, "origin": origin,
        ]
        return [
            OutboundMessage(topic: "\(prefix)/binary_sensor/gatt2mqtt_bridge/connection_state/config", json: .object(state), qos: 1, retain: true),
            OutboundMessage(topic: "\(prefix)/sensor/gatt2mqtt_bridge/version/config", json: .object(version), qos: 1, retain: true),
        ]
    }

    /// Empty retained payloads that withdraw the entities published before (`previous`, the config
    /// topics the store recorded) that the current configuration no longer has: a removed device,
    /// or one mapping of a device that stays.
    public func removals(previous: Set<String>, current: [DeviceConfig]) -> [OutboundMessage] {
        let kept = Set(messages(for: current).map(\.topic))
        return previous.subtracting(kept).sorted().map { OutboundMessage(topic: $0, payload: [], qos: 1, retain: true) }
    }

    func nodeID(_ d: DeviceConfig) -> String { "gatt2mqtt_\(d.id)" }

    func uniqueBase(_ d: DeviceConfig) -> String {
        if let a = d.address { return "gatt2mqtt_" + a.replacingOccurrences(of: ":", with: "").lowercased() }
        return "gatt2mqtt_\(d.id)"
    }

    func entities(for d: DeviceConfig) -> [Entity] {
        let set = "\(topics.base)/\(d.id)/set"
        switch d.profile {
        case .gopro:
            return [
                Entity(component: "sensor", object: "battery", name: "Battery", template: "{{ value_json.internal_battery_percentage }}",
                       extra: ["device_class": "battery", "unit_of_measurement": "%", "state_class": "measurement"]),
                Entity(component: "binary_sensor", object: "encoding", name: "Recording", template: "{{ 'ON' if value_json.encoding else 'OFF' }}",
                       extra: ["device_class": "running"]),
                Entity(component: "binary_sensor", object: "busy", name: "Busy", template: "{{ 'ON' if value_json.busy else 'OFF' }}"),
                Entity(component: "sensor", object: "video_resolution", name: "Video resolution", template: "{{ value_json.video_resolution }}"),
                Entity(component: "switch", object: "shutter", name: "Shutter", template: "{{ 'ON' if value_json.encoding else 'OFF' }}",
                       extra: ["command_topic": .string("\(set)/shutter"), "payload_on": "ON", "payload_off": "OFF", "icon": "mdi:record-rec"]),
                Entity(component: "button", object: "hilight", name: "HiLight moment", template: "",
                       extra: ["command_topic": .string(set), "payload_press": #"{"command":"hilight_moment"}"#]),
            ]
        case .rokid:
            return [
                Entity(component: "sensor", object: "battery", name: "Battery", template: "{{ value_json.battery }}",
                       extra: ["device_class": "battery", "unit_of_measurement": "%", "state_class": "measurement"]),
                Entity(component: "number", object: "brightness", name: "Brightness", template: "{{ value_json.brightness }}",
                       extra: ["command_topic": .string("\(set)/brightness"), "min": 0, "max": 15, "step": 1, "mode": "slider"]),
                Entity(component: "number", object: "volume", name: "Volume", template: "{{ value_json.volume }}",
                       extra: ["command_topic": .string("\(set)/volume"), "min": 0, "max": 15, "step": 1, "mode": "slider"]),
            ]
        case .custom:
            return d.characteristics.filter { $0.directions.contains(.notify) || $0.directions.contains(.read) }.map { c in
                Entity(component: "sensor", object: c.topic, name: c.topic.replacingOccurrences(of: "_", with: " ").capitalizedFirst,
                       template: "{{ value_json.\(c.topic) | tojson }}",
                       extra: ["json_attributes_topic": .string(topics.characteristic(d.id, c.topic))])
            }
        }
    }

    func message(for e: Entity, device d: DeviceConfig) -> OutboundMessage {
        var o = JSONObject()
        o["name"] = .string(e.name)
        o["unique_id"] = .string("\(uniqueBase(d))_\(e.object)")
        // HA 2025.10 replaced `object_id` (dropped in 2026.4) with `default_entity_id`, "<domain>.<slug>".
        o["default_entity_id"] = .string("\(e.component).\(d.id)_\(e.object)")
        if e.component != "button" {
            o["state_topic"] = .string(topics.state(d.id))
            o["value_template"] = .string(e.template)
        }
        o["availability"] = [
            ["topic": .string(topics.bridgeState), "value_template": "{{ value_json.state }}"],
            ["topic": .string(topics.availability(d.id)), "value_template": "{{ value_json.state }}"],
        ]
        o["availability_mode"] = "all"
        var device = JSONObject()
        device["identifiers"] = [.string(uniqueBase(d))]
        device["name"] = .string(d.name ?? d.id)
        device["manufacturer"] = .string(d.profile == .gopro ? "GoPro" : d.profile == .rokid ? "Rokid" : "Bluetooth LE")
        device["via_device"] = .string(Self.bridgeIdentifier)
        if let a = d.address { device["connections"] = [["bluetooth", .string(a.lowercased())]] }
        o["device"] = .object(device)
        o["origin"] = ["name": "gatt2mqtt", "sw_version": .string(version)]
        o.merge(e.extra)
        return OutboundMessage(topic: "\(prefix)/\(e.component)/\(nodeID(d))/\(e.object)/config", json: .object(o), qos: 1, retain: true)
    }
}

extension String {
    var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}
