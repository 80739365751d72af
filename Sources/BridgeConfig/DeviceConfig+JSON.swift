import BinaryCoding

// Devices as JSON in the shape of a `devices[]` entry of the file: what `bridge/request/device/add`
// takes, and how devices added at runtime are kept in the store (docs/bridge-api.md).

extension DeviceConfig {
    /// Parses one device from JSON shaped like a `devices[]` entry of the configuration file, with
    /// the same validation and messages (paths under `path`, no line numbers).
    /// - Parameter adapters: the bridge's adapters (`bluetooth.adapters`), when the caller knows
    ///   them: an `adapter` must then be one of them, as in the file; nil checks only its form.
    /// - Parameter profiles: the registered profiles, as for the file (`Configuration(yaml:…)`);
    ///   nil checks only the profile name's form.
    public init(json: JSONValue, path: String = "device", adapters: [String]? = nil, profiles: [any ProfileRules]? = nil) throws(ConfigError) {
        guard case .object = json else { throw ConfigError(path: path, line: nil, message: "expected an object") }
        // JSON is YAML (flow style): one parser, one set of rules for the file and the requests.
        guard let node = try? ConfigNode.parse(yaml: json.jsonText) else {
            throw ConfigError(path: path, line: nil, message: "expected an object")
        }
        do { try self.init(node, path: path, profiles: profiles) } catch { throw ConfigError(path: error.path, line: nil, message: error.message) }
        if let adapters, let adapter {
            var bluetooth = BluetoothSettings()
            bluetooth.adapters = adapters
            try bluetooth.checkPin(adapter, path: "\(path).adapter", line: nil)
        }
    }

    /// The device in the shape of a `devices[]` entry: `DeviceConfig(json: d.json) == d`.
    public var json: JSONValue {
        var o = JSONObject()
        o["id"] = .string(id)
        if let name { o["name"] = .string(name) }
        if let address { o["address"] = .string(address) }
        if let namePattern { o["name_pattern"] = .string(namePattern) }
        if let adapter { o["adapter"] = .string(adapter) }
        o["profile"] = .string(profile.rawValue)
        o["offline"] = ["policy": .string(offlinePolicy.rawValue), "deadline": .string(formatDuration(offlineDeadline))]
        o["command_timeout"] = .string(formatDuration(commandTimeout))
        o["availability_timeout"] = .string(formatDuration(availabilityTimeout))
        if !characteristics.isEmpty { o["characteristics"] = .array(characteristics.map(\.json)) }
        if let format { o["format"] = .string(format) }
        // The key itself only when it came inline (the store keeps runtime devices this way);
        // what is published goes through `Configuration.redactingSecrets` (``publicJSON``).
        if let bindkeyFile { o["bindkey_file"] = .string(bindkeyFile) } else if let bindkey { o["bindkey"] = .string(Hex.encode(bindkey)) }
        if isPassive { o["min_interval"] = .string(formatDuration(minInterval)) }
        return .object(o)
    }

    /// ``json`` with secrets (a `bindkey`) redacted: what responses and `bridge/info` show.
    public var publicJSON: JSONValue { Configuration.redactingSecrets(json) }

    /// The keys of a device that `bridge/request/device/options` may change, and how: each is
    /// the file's key (`offline` takes `policy` and `deadline`); `poll` takes `{topic: duration}`
    /// for the device's read mappings (`"0"` or null: no polling).
    public static let optionKeys: [String] = ["name", "offline", "command_timeout", "availability_timeout", "poll"]

    /// This device with `options` applied (keys of ``optionKeys``), validated as the file would be.
    public func applying(options: JSONObject, path: String = "options") throws(ConfigError) -> DeviceConfig {
        guard var o = json.objectValue else { return self }
        for key in options.keys {
            guard Self.optionKeys.contains(key) else {
                throw ConfigError(path: "\(path).\(key)", line: nil,
                                  message: "not a device option (expected one of \(Self.optionKeys.joined(separator: ", ")))")
            }
        }
        if let n = options["name"] { o["name"] = n }
        if let v = options["offline"] {
            guard let change = v.objectValue else { throw ConfigError(path: "\(path).offline", line: nil, message: "expected {policy, deadline}") }
            var offline = o["offline"]?.objectValue ?? [:]
            offline.merge(change)
            o["offline"] = .object(offline)
        }
        for key in ["command_timeout", "availability_timeout"] { if let v = options[key] { o[key] = v } }
        if let v = options["poll"] {
            guard let polls = v.objectValue else { throw ConfigError(path: "\(path).poll", line: nil, message: "expected {topic: duration}") }
            var mappings = characteristics
            for topic in polls.keys {
                guard let i = mappings.firstIndex(where: { $0.topic == topic }) else {
                    throw ConfigError(path: "\(path).poll.\(topic)", line: nil,
                                      message: "no mapping with topic '\(topic)' (the device has \(characteristics.map(\.topic).joined(separator: ", ")))")
                }
                let text = polls[topic]?.stringValue ?? polls[topic].flatMap { $0.isNull ? "0" : $0.jsonText } ?? "0"
                let d: Duration
                do { d = try checkedDuration(text) } catch { throw ConfigError(path: "\(path).poll.\(topic)", line: nil, message: error.message) }
                mappings[i].pollInterval = d > .zero ? d : nil
                if d > .zero { mappings[i].directions.insert(.read) }
            }
            o["characteristics"] = .array(mappings.map(\.json))
        }
        return try DeviceConfig(json: .object(o), path: path)
    }
}

extension CharacteristicMapping {
    /// The mapping in the shape of a `characteristics[]` entry.
    public var json: JSONValue {
        var o = JSONObject()
        o["uuid"] = .string(uuid)
        if let service { o["service"] = .string(service) }
        o["codec"] = .string(codec.rawValue)
        if let layout { o["layout"] = layout }
        o["direction"] = .array(Direction.allCases.filter { directions.contains($0) }.map { .string($0.rawValue) })
        if let pollInterval { o["poll"] = .string(formatDuration(pollInterval)) }
        o["topic"] = .string(topic)
        return .object(o)
    }
}

/// A duration as the file writes it: `5s`, `1500ms`.
public func formatDuration(_ d: Duration) -> String {
    let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    return ms % 1000 == 0 ? "\(ms / 1000)s" : "\(ms)ms"
}
