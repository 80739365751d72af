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
    /// The web frontend's address as users reach it (`frontend.url`, or derived from its listen
    /// address): the devices' `configuration_url` (the bridge's page, each device's page); nil
    /// when the frontend is off or its address is not known.
    public let frontendURL: String?
    /// The configuration's `advertisement_formats`, for the entities of a passive device of a
    /// user's format (``DeviceProfile/homeAssistantEntities(for:topics:state:formats:)``).
    public var advertisementFormats: [String: JSONValue] = [:]

    public init(prefix: String, topics: Topics, version: String, supportURL: String? = nil, frontendURL: String? = nil,
                profiles: ProfileCatalog) {
        self.prefix = prefix
        self.topics = topics
        self.version = version
        self.supportURL = supportURL
        self.frontendURL = frontendURL
        self.profiles = profiles
    }

    /// A device's maker and model, as its profile names them.
    public struct Model: Sendable, Equatable {
        public var manufacturer: String
        public var model: String
        /// `model_id`, when the device told (a GoPro's model number).
        public var modelID: String?
        /// `hw_version`, when the device told.
        public var hardwareVersion: String?

        public init(manufacturer: String, model: String, modelID: String? = nil, hardwareVersion: String? = nil) {
            self.manufacturer = manufacturer
            self.model = model
            self.modelID = modelID
            self.hardwareVersion = hardwareVersion
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
        /// The value as text, cut to HA's state limit (``stateLimit``: the first 252 characters
        /// and `...`); for a value that may be long (a raw mapping's hex). The whole value is the
        /// entity's attribute `value`.
        case longText([String])
        /// The value when it is one of `options`.
        case choice([String], options: [String])
        /// The label of the value (`1000` → `video`).
        case mapped([String], [Label])
        /// A boolean as `ON`/`OFF`.
        case flag([String])
        /// `ON` when the value equals `value` (`internal_battery_bars` == `Charging`), else `OFF`.
        case equals([String], String)
        /// The value as JSON text (a Caps mapping's decoded object), cut to HA's state limit as
        /// ``longText(_:)`` is.
        case json([String])

        public struct Label: Sendable, Equatable {
            public var value: Int64
            public var label: String

            public init(value: Int64, label: String) {
                self.value = value
                self.label = label
            }
        }

        public var path: [String] {
            switch self {
            case let .number(p), let .text(p), let .longText(p), let .choice(p, _), let .mapped(p, _), let .flag(p), let .equals(p, _), let .json(p): return p
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
            case .longText: return "{% set v = \(v) %}\(Self.cut("v | string"))"
            case .json: return "{% set v = \(v) %}\(Self.cut("v | tojson"))"
            }
        }

        /// Home Assistant refuses a state longer than 255 characters ("exceeds the maximum
        /// allowed length") and shows the entity unknown.
        public static let stateLimit = 255

        /// `None` for no value, else `text` (a filter of `v`) when it fits the state limit, else
        /// its first characters and `...`, ``stateLimit`` in all.
        static func cut(_ text: String) -> String {
            "{% if v is none %}None{% else %}{% set s = \(text) %}{{ s if s | length <= \(stateLimit) else s[:\(stateLimit - 3)] ~ '...' }}{% endif %}"
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
        return entities(for: d, state: state).map { e in
            message(e, node: nodeID(d), uniqueBase: uniqueBase(d), entityBase: d.id, device: device, deviceAvailability: topics.availability(d.id))
        }
    }

    /// Empty retained payloads that withdraw the entities published before (`previous`, the config
    /// topics the store recorded) that the current configuration no longer has: a removed device,
    /// or one mapping of a device that stays.
    public func removals(previous: Set<String>, current: [DeviceConfig], states: [String: JSONObject] = [:]) -> [OutboundMessage] {
        let kept = Set(messages(for: current, states: states).map(\.topic))
        return previous.subtracting(kept).sorted().map { OutboundMessage(topic: $0, payload: [], qos: 1, retain: true) }
    }

    // MARK: Devices

    /// The base topic as the first part of every node id, unique id and device identifier (as
    /// zigbee2mqtt puts its base topic in its unique ids): two bridges with different base
    /// topics on one broker publish different config topics, entities and devices. Characters
    /// outside `[a-zA-Z0-9_-]` become `_` (`home/gatt2mqtt` → `home_gatt2mqtt`); with the default
    /// base topic `gatt2mqtt` the ids are those of the bridge's earlier versions.
    var idBase: String { Self.objectID(topics.base) }

    /// The `<node>` of a device's config topics: `<base>_<device id>`.
    func nodeID(_ d: DeviceConfig) -> String { "\(idBase)_\(d.id)" }

    /// The stable base of a device's unique ids and its HA device identifier: `<base>_<mac>`
    /// when the address is configured (so renaming the device id keeps HA's entities), else
    /// `<base>_<device id>`.
    func uniqueBase(_ d: DeviceConfig) -> String {
        if let a = d.address, !d.addressIsPattern { return "\(idBase)_" + a.replacingOccurrences(of: ":", with: "").lowercased() }
        return "\(idBase)_\(d.id)"
    }

    func entities(for d: DeviceConfig, state: JSONObject = [:]) -> [Entity] {
        (profiles[d.profile]?.homeAssistantEntities(for: d, topics: topics, state: state, formats: advertisementFormats) ?? [])
            + diagnosticEntities()
    }

    /// Every device's sighting: the RSSI and when it was last seen (both kept in the state by
    /// its session), diagnostic, available whenever the bridge is, and disabled until the user
    /// enables them (as zigbee2mqtt's are: they change often and few look at them).
    func diagnosticEntities() -> [Entity] {
        [
            Entity(.sensor, "rssi", "RSSI", .number(["rssi"]), availability: .bridge,
                   ["device_class": "signal_strength", "unit_of_measurement": "dBm", "state_class": "measurement",
                    "entity_category": "diagnostic", "enabled_by_default": false]),
            Entity(.sensor, "last_seen", "Last seen", .text(["last_seen"]), availability: .bridge,
                   ["device_class": "timestamp", "entity_category": "diagnostic", "enabled_by_default": false]),
        ]
    }

    /// The HA device: identifiers, the Bluetooth connection, the bridge as `via_device`, the
    /// model, hardware, firmware and serial number the state knows (a GoPro's `hardware`), and
    /// the device's page in the web frontend when it is on.
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
            if let hw = model.hardwareVersion { device["hw_version"] = .string(hw) }
        }
        if let fw = hardware["firmware_version"]?.stringValue { device["sw_version"] = .string(fw) }
        if let serial = hardware["serial_number"]?.stringValue { device["serial_number"] = .string(serial) }
        device["via_device"] = .string(bridgeIdentifier)
        if let url = configurationURL("device/" + d.id) { device["configuration_url"] = .string(url) }
        return device
    }

    /// A page of the web frontend (`#/<route>`), nil when it is off.
    func configurationURL(_ route: String) -> String? {
        guard var base = frontendURL else { return nil }
        while base.hasSuffix("/") { base.removeLast() }
        return base + "/#/" + route
    }

    var origin: JSONValue {
        var o: JSONObject = ["name": "gatt2mqtt", "sw_version": .string(version)]
        if let supportURL { o["support_url"] = .string(supportURL) }
        return .object(o)
    }

    // MARK: The bridge

    /// The bridge's HA device identifier and config topic node, which every device's
    /// `via_device` names: `<base>_bridge` (`gatt2mqtt_bridge`).
    public var bridgeIdentifier: String { "\(idBase)_bridge" }

    /// The bridge as a Home Assistant device (every device's `via_device`): its connection state
    /// (from `bridge/state`, the MQTT Will included, so it has no availability of its own), its
    /// version, log level, scanning and restart-required (from `bridge/info`), a restart button,
    /// the log level select and the scan switch (requests on `bridge/request/restart`,
    /// `bridge/request/options` and `bridge/request/scan`).
    func bridgeMessages() -> [OutboundMessage] {
        var device: JSONObject = ["identifiers": [.string(bridgeIdentifier)], "name": "gatt2mqtt bridge",
                                  "manufacturer": "gatt2mqtt", "model": "MQTT ↔ Bluetooth LE bridge", "sw_version": .string(version)]
        if let url = configurationURL("bridge") { device["configuration_url"] = .string(url) }
        return bridgeEntities().map {
            message($0, node: bridgeIdentifier, uniqueBase: bridgeIdentifier, entityBase: bridgeIdentifier,
                    device: device, deviceAvailability: nil)
        }
    }

    /// The bridge device's entities.
    func bridgeEntities() -> [Entity] {
        let levels = LogLevel.allCases.map(\.rawValue)
        return [
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
            // zigbee2mqtt's permit-join switch, for a Bluetooth bridge: a scan as `bridge/request/scan`
            // runs it (on for its longest, 600 s; off stops it), its state `bridge/info`'s `scanning`.
            Entity(.switch, "scan", "Scan", .flag(["scanning"]), stateTopic: topics.bridgeInfo, availability: .bridge,
                   ["command_topic": .string("\(topics.base)/bridge/request/scan"),
                    "payload_on": #"{"seconds":600}"#, "payload_off": #"{"seconds":0}"#, "state_on": "ON", "state_off": "OFF",
                    "entity_category": "config", "icon": "mdi:bluetooth-search"]),
            // `restart_required` of `bridge/info`: what changed that only a restart applies (a list,
            // empty when nothing; a boolean reads the same).
            Entity(.binarySensor, "restart_required", "Restart required", .flag(["restart_required"]), stateTopic: topics.bridgeInfo,
                   availability: .bridge, ["device_class": "problem", "entity_category": "diagnostic"]),
        ]
    }

    // MARK: Payloads

    func message(_ e: Entity, node: String, uniqueBase: String, entityBase: String, device: JSONObject,
                 deviceAvailability: String?) -> OutboundMessage {
        var o = JSONObject()
        o["name"] = .string(e.name)
        o["unique_id"] = .string("\(uniqueBase)_\(e.object)")
        // HA 2025.10 replaced `object_id` (dropped in 2026.4) with `default_entity_id`, "<domain>.<slug>".
        // The slug of an entity id is `[a-z0-9_]`: a device id or base topic with capitals or `-` is folded.
        o["default_entity_id"] = .string("\(e.component.rawValue)." + "\(entityBase)_\(e.object)".lowercased().replacingOccurrences(of: "-", with: "_"))
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
