import BinaryCoding

// The configuration's shape, declared once: each section lists its keys with what each may be.
// The loader reads by these declarations (``MappingReader`` takes a key's range, choices and
// pattern from them, and refuses any key a section does not declare), and the JSON Schema
// (``ConfigSchema``, docs/config-schema.json) is generated from them. A check no schema can
// state (one key against another, a value against the rest of the file) stays in the loader
// and is named in the key's or section's `help`.

/// What a string must look like: a pattern in the syntax JSON Schema uses (ECMA-262, anchored
/// with `^…$`, ASCII classes only, so that Swift's `Regex` reads it the same way), and what a
/// mismatch says after the quoted value (`'usb0' is not an adapter name like hci0`).
public struct StringRule: Sendable {
    public let pattern: String
    public let message: String

    public init(pattern: String, message: String) {
        self.pattern = pattern
        self.message = message
    }

    /// Whether the whole of `text` matches the pattern.
    public func matches(_ text: String) -> Bool {
        // The patterns are constants (every one is compiled by ConfigShapeTests).
        guard let regex = try? Regex(pattern) else { return false }
        return ((try? regex.wholeMatch(in: text)) ?? nil) != nil
    }

    /// `node_id`: an MQTT topic level (docs/scale-out.md).
    public static let nodeID = StringRule(pattern: "^[A-Za-z0-9_-]{1,\(Configuration.nodeIDMaxLength)}$",
                                          message: "is not a node id: 1 to \(Configuration.nodeIDMaxLength) letters, digits, '_' or '-' (it is an MQTT topic level)")
    /// A device's `id`.
    public static let deviceID = StringRule(pattern: "^[A-Za-z0-9_-]+$",
                                            message: "may only contain letters, digits, '_' and '-' (use name for a friendly name)")
    /// A Bluetooth address (upper or lower case; kept in upper case), or, for a passive device
    /// whose address rotates, one to five leading octets then `:*` (`A4:C1:38:*`; the loader
    /// refuses a pattern for a device that connects).
    public static let address = StringRule(pattern: "^([0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){0,4}:\\*)$",
                                           message: "is not a Bluetooth address like C0:FF:EE:00:00:01 (or, for a passive device, a prefix pattern like A4:C1:38:*)")
    /// An `advertisement_formats` name: as a profile name.
    public static let formatName = StringRule(pattern: "^[a-z][a-z0-9_]*$",
                                              message: "is not a format name (a lowercase letter, then lowercase letters, digits and _)")
    /// A `bindkey`: 16 bytes as 32 hex digits.
    public static let bindkey = StringRule(pattern: "^[0-9A-Fa-f]{32}$", message: "is not a bindkey (32 hex digits)")
    /// An adapter's name as BlueZ gives it.
    public static let adapter = StringRule(pattern: "^hci[0-9]+$", message: "is not an adapter name like hci0")
    /// A characteristic UUID: 16-bit (`2A37`, `0x2A37`), 32-bit, 128-bit, or `GP-XXXX`.
    public static let uuid = StringRule(
        pattern: "^([Gg][Pp]-[0-9A-Fa-f]{4}|(0[Xx])?([0-9A-Fa-f]{4}|[0-9A-Fa-f]{8}|[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}))$",
        message: "is not a UUID (16-bit like 2A37, 128-bit, or GP-XXXX)")
    /// `mqtt.base_topic`: a topic without wildcards or a leading or trailing `/`.
    public static let baseTopic = StringRule(pattern: "^[^#+/]([^#+]*[^#+/])?$",
                                             message: "must be a topic without wildcards or leading/trailing '/'")
    /// A mapping's `topic`: one or more levels under the device's, not one of the device's own.
    public static let mappingTopic = StringRule(pattern: "^(?!(set|get|response|availability)$)[^#+/][^#+]*$",
                                                message: "is not usable as a topic name")
    /// `mqtt.url`.
    public static let mqttURL = StringRule(pattern: "^mqtts?://.+$", message: "is not mqtt://host[:port] or mqtts://host[:port]")
    /// `frontend.url`: where users reach the frontend (the loader also parses it for a host).
    public static let webURL = StringRule(pattern: "^https?://[^/?#@\\s]+([/?#].*)?$",
                                          message: "is not an http or https URL with a host (e.g. http://gatt2mqtt.lan:8080, https://home.example/gatt2mqtt)")
    /// `metrics.listen`, `frontend.listen`: `HOST:PORT` with an IP address (or `localhost`).
    public static let listen = StringRule(pattern: "^(\\[[0-9A-Fa-f:.]+\\]|localhost|[0-9.]+):[0-9]{1,5}$",
                                          message: "is not HOST:PORT with an IP address and a port 1…65535")
}

/// What one value of the configuration may be.
public indirect enum ConfigShape: Sendable {
    /// Text, optionally held to a rule.
    case string(StringRule?)
    case integer(ClosedRange<Int>)
    case boolean
    /// A duration (``checkedDuration(_:in:)``: `500ms`, `5s`, `2m`, `1h`, `7d` or a bare number of
    /// seconds, 0 to 365 days); `positive`: longer than 0.
    case duration(positive: Bool)
    /// A size in bytes (`262144`, `256KiB`, `1MiB`) within the range.
    case byteSize(ClosedRange<Int>)
    /// One of these names.
    case choice([String])
    /// One of these names, or a list of them.
    case choiceOrList([String])
    case section(ConfigSection)
    /// A list; `unique`: no item twice.
    case list(ConfigShape, minItems: Int, unique: Bool)
    /// A layout: `builtin:NAME` or an inline layout object (docs/layouts.md).
    case layout
    /// A key the loader knows only to refuse it, with why (the section's `help` of the key).
    case refused
    /// A mapping of names (held to the rule) to free-form objects, whose inner shape another part
    /// checks (`advertisement_formats`: the layout parser, through the advertisement profile).
    case objectMap(StringRule)

    /// The names of an enumeration's cases.
    static func choice<E: RawRepresentable & CaseIterable>(of _: E.Type) -> ConfigShape where E.RawValue == String {
        .choice(E.allCases.map(\.rawValue))
    }
}

/// One key of a section.
public struct ConfigKey: Sendable {
    public let name: String
    public let shape: ConfigShape
    /// What it is for, its default and any check the schema cannot state.
    public let help: String
    public let required: Bool

    public init(_ name: String, _ shape: ConfigShape, required: Bool = false, _ help: String) {
        self.name = name
        self.shape = shape
        self.required = required
        self.help = help
    }
}

/// A rule between keys of one section, which the loader checks (with `message`) and the schema states.
public enum SectionRule: Sendable {
    /// At least one of these keys.
    case anyOf([String], message: String)
    /// Not both.
    case notBoth(String, String, message: String)
    /// Both or neither.
    case together(String, String, message: String)
    /// `key` is required when `other` is `value` (the default of `other` is not `value`), and
    /// refused otherwise (a mapping's `layout` with `codec: layout`).
    case presentExactlyWhen(key: String, other: String, value: String)
}

/// A mapping of the configuration: its keys (no other is accepted) and the rules between them.
public struct ConfigSection: Sendable {
    public let help: String
    public let keys: [ConfigKey]
    public let rules: [SectionRule]

    public init(_ help: String, keys: [ConfigKey], rules: [SectionRule] = []) {
        self.help = help
        self.keys = keys
        self.rules = rules
    }

    public func key(_ name: String) -> ConfigKey? { keys.first { $0.name == name } }
    public var names: [String] { keys.map(\.name) }
}
