import BinaryCoding
import BridgeConfig
import Foundation

/// Home Assistant MQTT discovery (`shared/spec/bridge.md`, "Home Assistant discovery";
/// docs/homeassistant.md lists every entity): `<prefix>/<component>/<node>/<object>/config`,
/// retained, with `device`, `origin`, `unique_id`, `default_entity_id`, an availability list of
/// the bridge state and the device availability (`availability_mode: all`) and a
/// `value_template` on `value_json` that reads the device state (`<base>/<device>`).
///
/// Which entities a device has depends only on its configuration, so the config topics are
/// stable; the `device` block also carries what the state knows about the device (a GoPro's
/// model, firmware and serial number from Get Hardware Info). A device's own entities and model
/// are its profile's (``DeviceProfile/homeAssistantEntities(for:topics:)``); this type owns the
/// payloads, the bridge's own device and every device's RSSI and last seen.
public struct HomeAssistantDiscovery: Sendable {
    public let prefix: String
    public let topics: Topics
    public let version: String
    /// `origin.support_url`, when the deployment has one to offer.
    public let supportURL: String?
    /// The profiles whose devices are published.
    public let profiles: ProfileCatalog

    public init(prefix: String, topics: Topics, version: String, supportURL: String? = nil, profiles: ProfileCatalog) {
        self.prefix = prefix
        self.topics = topics
        self.version = version
        self.supportURL = supportURL
        self.profiles = profiles
    }

    /// A device's maker and model, as its profile names them.
    public struct Model: Sendable, Equatable {
        public var manufacturer: String
        public var model: String
        /// `model_id`, when the device told (a GoPro's model number).
        public var modelID: String?

        public init(manufacturer: String, model: String, modelID: String? = nil) {
            self.manufacturer = manufacturer
            self.model = model
            self.modelID = modelID
        }
    }

    /// The MQTT integration's platforms the bridge publishes.
    public enum Component: String, Sendable, CaseIterable {
        case sensor
        case binarySensor = "binary_sensor"
        case button
        case select
        case number
        case `switch`
    }

    /// The topics whose `online` an entity needs.
    public enum Availability: Sendable {
        /// The bridge state and the device availability (`availability_mode: all`).
        case bridgeAndDevice
        /// The bridge state only: what the bridge observed of a device stays true while it is
        /// away (its last sighting), and the bridge's own entities.
        case bridge
        /// None: the bridge's connection state, which is the bridge state itself.
        case none
    }

    /// How an entity's `value_template` reads a value at `path` in the state JSON, and what it
    /// hands Home Assistant: a value of the wrong kind, or no value, renders `None`, which HA
    /// shows as unknown (sensor, binary_sensor, select and number all take `None` so).
    public enum StateValue: Sendable, Equatable {
        /// A number; anything else (an IEEE-11073 `"NaN"`) is `None`.
        case number([String])
        /// The value as text.
        case text([String])
        /// The value when it is one of `options`.
        case choice([String], options: [String])
        /// The label of the value (`1000` → `video`).
        case mapped([String], [Label])
        /// A boolean as `ON`/`OFF`.
        case flag([String])
        /// `ON` when the value equals `value` (`internal_battery_bars` == `Charging`), else `OFF`.
        case equals([String], String)
        /// The value as JSON text (a Caps mapping's decoded object).
        case json([String])

        public struct Label: Sendable, Equatable {
            public var value: Int64
            public var label: String

            public init(value: Int64, label: String) {
                self.value = value
                self.label = label
            }
        }

        var path: [String] {
            switch self {
            case let .number(p), let .text(p), let .choice(p, _), let .mapped(p, _), let .flag(p), let .equals(p, _), let .json(p): return p
            }
        }

        /// The Jinja template (HA's `value_template`).
        var template: String {
            let v = Self.expression(path)
            switch self {
            case .number: return "{% set v = \(v) %}{{ v if v is number else None }}"
            case .text: return "{{ \(v) }}"
            case let .choice(_, options):
                return "{% set v = \(v) %}{{ v if v in [\(options.map(Self.literal).joined(separator: ", "))] else None }}"
            case let .mapped(_, labels):
                let dict = labels.map { "\($0.value): \(Self.literal($0.label))" }.joined(separator: ", ")
                return "{{ {\(dict)}.get(\(v)) }}"
            case .flag: return "{% set v = \(v) %}{{ None if v is none else ('ON' if v else 'OFF') }}"
            case let .equals(_, value):
                return "{% set v = \(v) %}{{ None if v is none else ('ON' if v == \(Self.literal(value)) else 'OFF') }}"
            case .json: return "{% set v = \(v) %}{{ None if v is none else (v | tojson) }}"
            }
        }

        /// `value_json.get('a', {}).get('b')`: a missing member is `None`, never an error.
        static func expression(_ path: [String]) -> String {
            var e = "value_json"
            for (i, key) in path.enumerated() { e += ".get(\(literal(key))\(i < path.count - 1 ? ", {}" : ""))" }
            return e
        }

        /// A single-quoted Jinja string literal.
        static func literal(_ s: String) -> String {
            "'" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
        }
    }

    /// One entity of a device.
    public struct Entity: Sendable {
        public var component: Component
        /// The `<object>` of the config topic, unique within the device.
        public var object: String
        public var name: String
        /// How the value template reads the state; nil for buttons.
        public var state: StateValue?
        /// The state topic; nil: the device state `<base>/<device>`.
        public var stateTopic: String?
        public var availability = Availability.bridgeAndDevice
        /// The component's own options (`device_class`, `unit_of_measurement`, `command_topic`…).
        public var extra: JSONObject = [:]

        public init(_ component: Component, _ object: String, _ name: String, _ state: StateValue?, stateTopic: String? = nil,
             availability: Availability = .bridgeAndDevice, _ extra: JSONObject = [:]) {
            self.component = component
            self.object = object
            self.name = name
            self.state = state
            self.stateTopic = stateTopic
            self.availability = availability
            self.extra = extra
        }
    }

    /// The discovery topic HA listens to for its own restarts.
    public var statusTopic: String { "\(prefix)/status" }

    /// Every retained config message: the bridge's own device, then the configured devices;
    /// `states` (the devices' last known state, by id) fills in their `device` blocks.
    public func messages(for devices: [DeviceConfig], states: [String: JSONObject] = [:]) -> [OutboundMessage] {
        bridgeMessages() + devices.flatMap { messages(for: $0, state: states[$0.id] ?? [:]) }
    }

    /// The config messages of one device, its `device` block from `state`.
    public func messages(for d: DeviceConfig, state: JSONObject = [:]) -> [OutboundMessage] {
        let device = deviceBlock(d, state: state)
        return entities(for: d).map { e in
            message(e, node: nodeID(d), uniqueBase: uniqueBase(d), entityBase: d.id, device: device, deviceAvailability: topics.availability(d.id))
        }
    }

    /// Empty retained payloads that withdraw the entities published before (`previous`, the config
    /// topics the store recorded) that the current configuration no longer has: a removed device,
    /// or one mapping of a device that stays.
    public func removals(previous: Set<String>, current: [DeviceConfig]) -> [OutboundMessage] {
        let kept = Set(messages(for: current).map(\.topic))
        return previous.subtracting(kept).sorted().map { OutboundMessage(topic: $0, payload: [], qos: 1, retain: true) }
    }

    // MARK: Devices

    func nodeID(_ d: DeviceConfig) -> String { "gatt2mqtt_\(d.id)" }

    /// The stable base of a device's unique ids: from its MAC when configured (so renaming the
    /// device id keeps HA's entities), else from its id.
    func uniqueBase(_ d: DeviceConfig) -> String {
        if let a = d.address { return "gatt2mqtt_" + a.replacingOccurrences(of: ":", with: "").lowercased() }
        return "gatt2mqtt_\(d.id)"
    }

    func entities(for d: DeviceConfig) -> [Entity] {
        (profiles[d.profile]?.homeAssistantEntities(for: d, topics: topics) ?? []) + diagnosticEntities()
    }

    /// Every device's sighting: the RSSI and when it was last seen (both kept in the state by
    /// its session), diagnostic, available whenever the bridge is.
    func diagnosticEntities() -> [Entity] {
        [
            Entity(.sensor, "rssi", "RSSI", .number(["rssi"]), availability: .bridge,
                   ["device_class": "signal_strength", "unit_of_measurement": "dBm", "state_class": "measurement",
                    "entity_category": "diagnostic"]),
            Entity(.sensor, "last_seen", "Last seen", .text(["last_seen"]), availability: .bridge,
                   ["device_class": "timestamp", "entity_category": "diagnostic"]),
        ]
    }

    /// The HA device: identifiers, the Bluetooth connection, the bridge as `via_device`, and
    /// the model, firmware and serial number the state knows (a GoPro's `hardware`).
    func deviceBlock(_ d: DeviceConfig, state: JSONObject) -> JSONObject {
        var device = JSONObject()
        device["identifiers"] = [.string(uniqueBase(d))]
        if let a = d.address { device["connections"] = [["bluetooth", .string(a.lowercased())]] }
        device["name"] = .string(d.name ?? d.id)
        let hardware = state["hardware"]?.objectValue ?? [:]
        if let model = profiles[d.profile]?.homeAssistantModel(for: d, hardware: hardware) {
            device["manufacturer"] = .string(model.manufacturer)
            device["model"] = .string(model.model)
            if let id = model.modelID { device["model_id"] = .string(id) }
        }
        if let fw = hardware["firmware_version"]?.stringValue { device["sw_version"] = .string(fw) }
        if let serial = hardware["serial_number"]?.stringValue { device["serial_number"] = .string(serial) }
        device["via_device"] = .string(Self.bridgeIdentifier)
        return device
    }

    var origin: JSONValue {
        var o: JSONObject = ["name": "gatt2mqtt", "sw_version": .string(version)]
        if let supportURL { o["support_url"] = .string(supportURL) }
        return .object(o)
    }

    // MARK: The bridge

    /// The identifier every device's `via_device` names.
    static let bridgeIdentifier = "gatt2mqtt_bridge"

    /// The bridge as a Home Assistant device (every device's `via_device`): its connection state
    /// (from `bridge/state`, the MQTT Will included, so it has no availability of its own), its
    /// version and log level (from `bridge/info`), a restart button and the log level select
    /// (requests on `bridge/request/restart` and `bridge/request/options`).
    func bridgeMessages() -> [OutboundMessage] {
        let device: JSONObject = ["identifiers": [.string(Self.bridgeIdentifier)], "name": "gatt2mqtt bridge",
                                  "manufacturer": "gatt2mqtt", "model": "MQTT ↔ Bluetooth LE bridge", "sw_version": .string(version)]
        let levels = LogLevel.allCases.map(\.rawValue)
        let entities = [
            Entity(.binarySensor, "connection_state", "Connection state", .text(["state"]), stateTopic: topics.bridgeState, availability: .none,
                   ["payload_on": "online", "payload_off": "offline", "device_class": "connectivity", "entity_category": "diagnostic"]),
            Entity(.sensor, "version", "Version", .text(["version"]), stateTopic: topics.bridgeInfo, availability: .bridge,
                   ["entity_category": "diagnostic", "icon": "mdi:information-outline"]),
            Entity(.select, "log_level", "Log level", .choice(["log_level"], options: levels), stateTopic: topics.bridgeInfo,
                   availability: .bridge,
                   ["command_topic": .string("\(topics.base)/bridge/request/options"),
                    "command_template": #"{"log_level":"{{ value }}"}"#, "options": .array(levels.map { .string($0) }),
                    "entity_category": "config", "icon": "mdi:text-box-search-outline"]),
            Entity(.button, "restart", "Restart", nil, availability: .bridge,
                   ["command_topic": .string("\(topics.base)/bridge/request/restart"), "payload_press": "{}",
                    "device_class": "restart", "entity_category": "config"]),
        ]
        return entities.map {
            message($0, node: Self.bridgeIdentifier, uniqueBase: Self.bridgeIdentifier, entityBase: Self.bridgeIdentifier,
                    device: device, deviceAvailability: nil)
        }
    }

    // MARK: Payloads

    func message(_ e: Entity, node: String, uniqueBase: String, entityBase: String, device: JSONObject,
                 deviceAvailability: String?) -> OutboundMessage {
        var o = JSONObject()
        o["name"] = .string(e.name)
        o["unique_id"] = .string("\(uniqueBase)_\(e.object)")
        // HA 2025.10 replaced `object_id` (dropped in 2026.4) with `default_entity_id`, "<domain>.<slug>".
        o["default_entity_id"] = .string("\(e.component.rawValue).\(entityBase)_\(e.object)")
        if let state = e.state {
            o["state_topic"] = .string(e.stateTopic ?? topics.state(entityBase))
            o["value_template"] = .string(state.template)
        }
        var availability: [JSONValue] = []
        if e.availability != .none {
            availability.append(["topic": .string(topics.bridgeState), "value_template": "{{ value_json.state }}"])
        }
        if e.availability == .bridgeAndDevice, let deviceAvailability {
            availability.append(["topic": .string(deviceAvailability), "value_template": "{{ value_json.state }}"])
        }
        if !availability.isEmpty {
            o["availability"] = .array(availability)
            o["availability_mode"] = "all"
        }
        o["device"] = .object(device)
        o["origin"] = origin
        o.merge(e.extra)
        return OutboundMessage(topic: "\(prefix)/\(e.component.rawValue)/\(node)/\(e.object)/config", json: .object(o), qos: 1, retain: true)
    }

    /// `heart_rate` → `Heart rate`.
    public static func title(_ name: String) -> String {
        let words = name.replacingOccurrences(of: "_", with: " ")
        return words.prefix(1).uppercased() + words.dropFirst()
    }

    /// A config topic's `<object>` (HA takes `[a-zA-Z0-9_-]+`).
    public static func objectID(_ s: String) -> String {
        String(s.unicodeScalars.map { c in
            (c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "_" || c == "-")) ? Character(c) : "_"
        })
    }
}
