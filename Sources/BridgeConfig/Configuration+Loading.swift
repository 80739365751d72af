import BinaryCoding
import Foundation
import Yams
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Configuration {
    /// Parses and validates YAML. Errors name the key path and line; unknown keys are errors.
    /// `environment` overrides apply after the file (see `applyEnvironment`).
    /// - Parameter profiles: the registered device profiles (`DeviceProfiles.all`): a device's
    ///   `profile` must be one of them and pass its checks. Nil checks only the name's form
    ///   (a tool that reads the file without the bridge's profiles).
    public init(yaml: String, environment: [String: String] = [:], profiles: [any ProfileRules]? = nil) throws(ConfigError) {
        self.init()
        var adapterLines: [Int: Int] = [:]
        let root = try ConfigNode.parse(yaml: yaml)
        if let root {
            var top = try MappingReader(root, path: "", section: Self.shape(profiles: profiles?.map(\.id)))
            if let n = top.take("mqtt") { try mqtt.load(n, path: "mqtt") }
            if let n = top.take("bluetooth") { try bluetooth.load(n, path: "bluetooth") }
            if let n = top.take("database") { try database.load(n, path: "database") }
            if let n = top.take("homeassistant") { try homeAssistant.load(n, path: "homeassistant") }
            if let n = top.take("metrics") {
                var m = MetricsSettings()
                try m.load(n, path: "metrics")
                metrics = m
            }
            if let n = top.take("frontend") {
                var f = FrontendSettings()
                try f.load(n, path: "frontend")
                frontend = f
            }
            if let v = try top.enumeration("log_level", LogLevel.self) { logLevel = v }
            if let v = try top.string("node_id") { nodeID = v }
            if let n = top.take("cluster") { try cluster.load(n, path: "cluster") }
            if let n = top.take("limits") { try limits.load(n, path: "limits") }
            if let n = top.take("advertisement_formats") { try loadAdvertisementFormats(n) }
            if let n = top.take("devices") {
                guard case let .sequence(items) = n.kind else {
                    throw ConfigError(path: "devices", line: n.line, message: "expected a list of devices")
                }
                for (i, item) in items.enumerated() {
                    devices.append(try DeviceConfig(item, path: "devices[\(i)]", profiles: profiles))
                    if case let .mapping(m) = item.kind {
                        if let a = m.first(where: { $0.key == "adapter" }) { adapterLines[i] = a.value.line }
                        if let f = m.first(where: { $0.key == "format" }) { lines["devices[\(i)].format"] = f.value.line }
                    }
                }
            }
            try top.finish()
        }
        try applyEnvironment(environment)
        try validate(adapterLines: adapterLines)
        for p in profiles ?? [] {
            do { try p.validate(configuration: self) } catch {
                throw ConfigError(path: error.path, line: error.line ?? lines[error.path], message: error.message)
            }
        }
    }

    /// `advertisement_formats`: NAME → a free-form object (its inner shape is the advertisement
    /// profile's to check, ``ProfileRules/validate(configuration:)``).
    mutating func loadAdvertisementFormats(_ node: ConfigNode) throws(ConfigError) {
        guard case let .mapping(members) = node.kind else {
            throw ConfigError(path: "advertisement_formats", line: node.line, message: "expected a mapping of format names to format definitions")
        }
        for m in members {
            let path = "advertisement_formats.\(m.key)"
            guard StringRule.formatName.matches(m.key) else {
                throw ConfigError(path: path, line: m.keyLine, message: "'\(m.key)' \(StringRule.formatName.message)")
            }
            guard case .mapping = m.value.kind else {
                throw ConfigError(path: path, line: m.value.line, message: "expected a format definition (a mapping: docs/advertisements.md)")
            }
            advertisementFormats[m.key] = m.value.jsonValue()
            lines[path] = m.keyLine
            m.value.recordLines(path: path, into: &lines)  // the definition's errors name their line
        }
    }

    /// The line of `path`, or of the nearest key on the way to it that has one
    /// (`advertisement_formats.x.layout.fields[9]` → the line of `…layout.fields`).
    public func line(near path: String) -> Int? {
        var p = Substring(path)
        while !p.isEmpty {
            if let l = lines[String(p)] { return l }
            guard let cut = p.lastIndex(where: { $0 == "." || $0 == "[" }) else { return nil }
            p = p[..<cut]
        }
        return nil
    }

    /// Cross-field checks: unique device ids and addresses, topic-safe ids, each device's
    /// `adapter` one of `bluetooth.adapters`, and (after the environment) `cluster.lost_after`
    /// above `cluster.seen_interval`; a frontend beyond loopback has a token or says
    /// `allow_unauthenticated`. `adapterLines`: device index → line of its `adapter`.
    func validate(adapterLines: [Int: Int] = [:]) throws(ConfigError) {
        try cluster.checkLostAfter(path: "cluster.lost_after", line: nil)
        if let f = frontend, !f.isLoopback, f.authTokenFile == nil, !f.allowUnauthenticated {
            throw ConfigError(path: "frontend.auth_token_file", line: nil, message: """
                frontend.listen \(f.listen) is reachable beyond this machine, and without a token anyone who reaches it \
                drives the bridge: set frontend.auth_token_file (a file holding a token, chmod 600), listen on 127.0.0.1, \
                or set frontend.allow_unauthenticated: true to serve it open on purpose
                """)
        }
        var ids = Set<String>(), addresses = Set<String>()
        for (i, d) in devices.enumerated() {
            if let a = d.adapter {
                try bluetooth.checkPin(a, path: "devices[\(i)].adapter", line: adapterLines[i])
            }
            if !ids.insert(d.id).inserted {
                throw ConfigError(path: "devices[\(i)].id", line: nil, message: "duplicate device id '\(d.id)'")
            }
            if let a = d.address, !addresses.insert(a).inserted {
                throw ConfigError(path: "devices[\(i)].address", line: nil, message: "duplicate address \(a)")
            }
            if cluster.enabled, d.addressIsPattern {
                throw ConfigError(path: "devices[\(i)].address", line: nil,
                                  message: "an address pattern cannot be claimed by several bridges (claims are by address): give the address, or turn cluster off")
            }
            if d.id == "bridge" {
                throw ConfigError(path: "devices[\(i)].id", line: nil, message: "'bridge' is reserved for the bridge's own topics")
            }
        }
    }

    /// Environment overrides, applied after the file: `GATT2MQTT_<SECTION>_<KEY>` for the scalar
    /// keys of `mqtt`, `bluetooth`, `database`, `homeassistant`, `metrics`, `frontend` and
    /// `cluster`, e.g. `GATT2MQTT_MQTT_URL`, `GATT2MQTT_MQTT_BASE_TOPIC`,
    /// `GATT2MQTT_BLUETOOTH_ADAPTER` (one adapter), `GATT2MQTT_BLUETOOTH_ADAPTERS` (several,
    /// `hci0,hci1`), `GATT2MQTT_DATABASE_PATH`, `GATT2MQTT_METRICS_LISTEN` (which
    /// turns the endpoint on; empty turns it off), `GATT2MQTT_FRONTEND_LISTEN` and
    /// `GATT2MQTT_FRONTEND_AUTH_TOKEN_FILE` (the same for the web frontend),
    /// `GATT2MQTT_CLUSTER_ENABLED`, `GATT2MQTT_LIMITS_MAX_PAYLOAD`; and `GATT2MQTT_LOG_LEVEL` and `GATT2MQTT_NODE_ID` for the
    /// top-level `log_level` and `node_id`.
    public mutating func applyEnvironment(_ environment: [String: String]) throws(ConfigError) {
        let sections = ["MQTT": "mqtt", "BLUETOOTH": "bluetooth", "DATABASE": "database", "HOMEASSISTANT": "homeassistant",
                        "METRICS": "metrics", "FRONTEND": "frontend", "CLUSTER": "cluster", "LIMITS": "limits"]
        if environment["GATT2MQTT_BLUETOOTH_ADAPTER"] != nil, environment["GATT2MQTT_BLUETOOTH_ADAPTERS"] != nil {
            throw ConfigError(path: "GATT2MQTT_BLUETOOTH_ADAPTER", line: nil,
                              message: "not with GATT2MQTT_BLUETOOTH_ADAPTERS: set one (GATT2MQTT_BLUETOOTH_ADAPTERS=hci0,hci1 for several)")
        }
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) where name.hasPrefix("GATT2MQTT_") {
            if name == "GATT2MQTT_LOG_LEVEL" {
                guard let level = LogLevel(rawValue: value) else {
                    throw ConfigError(path: "log_level (from \(name))", line: nil,
                                      message: "'\(value)' is not one of \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                logLevel = level
                continue
            }
            if name == "GATT2MQTT_NODE_ID" {
                nodeID = try Self.checkedNodeID(value, path: "node_id (from \(name))", line: nil)
                continue
            }
            let rest = name.dropFirst("GATT2MQTT_".count)
            guard let sep = rest.firstIndex(of: "_"), let section = sections[String(rest[..<sep])] else {
                if name == "GATT2MQTT_CONFIG" { continue }
                throw ConfigError(path: name, line: nil, message: "unknown environment override (expected GATT2MQTT_<MQTT|BLUETOOTH|DATABASE|HOMEASSISTANT|METRICS|FRONTEND|CLUSTER|LIMITS>_<KEY>, GATT2MQTT_LOG_LEVEL or GATT2MQTT_NODE_ID)")
            }
            let key = rest[rest.index(after: sep)...].lowercased()
            let path = "\(section).\(key) (from \(name))"
            let node = ConfigNode(kind: .mapping([(key, 0, ConfigNode(kind: .scalar(.init(value)), line: 0))]), line: 0)
            switch section {
            case "mqtt": try mqtt.load(node, path: path, partial: true)
            case "bluetooth": try bluetooth.load(node, path: path, partial: true)
            case "database": try database.load(node, path: path, partial: true)
            case "cluster": try cluster.load(node, path: path, partial: true)
            case "limits": try limits.load(node, path: path, partial: true)
            case "metrics":
                if key == "listen", value.isEmpty {
                    metrics = nil
                } else {
                    var m = metrics ?? MetricsSettings()
                    try m.load(node, path: path, partial: true)
                    metrics = m
                }
            case "frontend":
                if key == "listen", value.isEmpty {
                    frontend = nil
                } else {
                    var f = frontend ?? FrontendSettings()
                    try f.load(node, path: path, partial: true)
                    frontend = f
                }
            default: try homeAssistant.load(node, path: path, partial: true)
            }
        }
    }
}

// MARK: - Reading helpers

/// Reads a mapping key by key, by its section's declaration (``ConfigSection``): a key the
/// section does not declare is refused before any other check (so a typo is reported as the
/// typo), and each value is held to its declared shape (range, choices, pattern) — the same
/// declarations docs/config-schema.json is generated from.
struct MappingReader {
    let path: String
    let line: Int
    let section: ConfigSection
    /// Reading a `GATT2MQTT_…` override: `path` already names the key and the variable, and
    /// there is no line.
    let environment: Bool
    var members: [(key: String, keyLine: Int, value: ConfigNode)]

    init(_ node: ConfigNode, path: String, section: ConfigSection, environment: Bool = false) throws(ConfigError) {
        guard case let .mapping(m) = node.kind else {
            throw ConfigError(path: path, line: node.line, message: "expected a mapping (key: value)")
        }
        self.path = path
        self.line = node.line
        self.section = section
        self.environment = environment
        members = m
        for m in members {
            guard let key = section.key(m.key) else {
                throw ConfigError(path: environment ? path : child(m.key), line: environment ? nil : m.keyLine,
                                  message: "unknown key (expected one of \(section.names.filter { section.key($0)?.isRefused == false }.sorted().joined(separator: ", ")))")
            }
            if key.isRefused { throw fail(m.key, m.value.line, key.help) }
        }
    }

    func child(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The error for `key`'s value at `line` (from the environment: the variable's path, no line).
    func fail(_ key: String, _ line: Int?, _ message: String) -> ConfigError {
        environment ? ConfigError(path: path, line: nil, message: message) : ConfigError(path: child(key), line: line, message: message)
    }

    /// The declared shape of `key`; reading an undeclared key is a mistake in the loader.
    func shape(_ key: String) -> ConfigShape {
        guard let k = section.key(key) else { preconditionFailure("\(path): '\(key)' is not declared in its section's shape") }
        return k.shape
    }

    /// The line of `key`'s value while it is unread (for a check after reading it).
    func line(of key: String) -> Int? { members.first { $0.key == key }?.value.line }

    /// The line of `key` itself while it is unread.
    func keyLine(of key: String) -> Int? { members.first { $0.key == key }?.keyLine }

    mutating func take(_ key: String) -> ConfigNode? {
        _ = shape(key)
        guard let i = members.firstIndex(where: { $0.key == key }) else { return nil }
        return members.remove(at: i).value
    }

    /// Whether `key` is there with a value (a plain null is no value).
    func has(_ key: String) -> Bool {
        guard let n = members.first(where: { $0.key == key })?.value else { return false }
        if case let .scalar(s) = n.kind, Yams.Node.scalar(s).null != nil, s.style == .plain { return false }
        return true
    }

    /// The section's rules between keys (``SectionRule``), on the keys not read yet.
    func checkRules() throws(ConfigError) {
        for rule in section.rules {
            switch rule {
            case let .anyOf(keys, message):
                if !keys.contains(where: has) { throw ConfigError(path: path, line: line, message: message) }
            case let .notBoth(a, b, message):
                if has(a), has(b) { throw ConfigError(path: path, line: max(keyLine(of: a) ?? 0, keyLine(of: b) ?? 0), message: message) }
            case let .together(a, b, message):
                if has(a) != has(b) { throw ConfigError(path: path, line: line, message: message) }
            case .presentExactlyWhen:
                break  // checked as the values are read (CharacteristicMapping)
            }
        }
    }

    /// A declared key the loader did not read is a mistake in the loader (the tests load every key).
    func finish() throws(ConfigError) {
        if let m = members.first {
            throw ConfigError(path: child(m.key), line: m.keyLine, message: "declared but not read (a mistake in gatt2mqtt)")
        }
    }

    /// Text, without its declared rule.
    mutating func rawString(_ key: String) throws(ConfigError) -> String? {
        guard let n = take(key) else { return nil }
        guard case let .scalar(s) = n.kind else { throw fail(key, n.line, "expected a string") }
        if Yams.Node.scalar(s).null != nil, s.style == .plain { return nil }
        return s.string
    }

    /// Text, held to its declared rule.
    mutating func string(_ key: String) throws(ConfigError) -> String? {
        let valueLine = line(of: key)
        guard let s = try rawString(key) else { return nil }
        if case let .string(rule?) = shape(key), !rule.matches(s) { throw fail(key, valueLine, "'\(s)' \(rule.message)") }
        return s
    }

    mutating func requiredString(_ key: String) throws(ConfigError) -> String {
        guard let s = try rawString(key), !s.isEmpty else { throw fail(key, line, "required") }
        if case let .string(rule?) = shape(key), !rule.matches(s) { throw fail(key, line, "'\(s)' \(rule.message)") }
        return s
    }

    /// An integer within its declared range.
    mutating func int(_ key: String) throws(ConfigError) -> Int? {
        guard case let .integer(range) = shape(key) else { preconditionFailure("\(child(key)) is not declared an integer") }
        guard let n = take(key) else { return nil }
        guard case let .scalar(s) = n.kind, let v = Int(s.string.trimmingCharacters(in: " ")) else {
            throw fail(key, n.line, "expected an integer")
        }
        guard range.contains(v) else { throw fail(key, n.line, "\(v) is out of range \(range.lowerBound)…\(range.upperBound)") }
        return v
    }

    mutating func bool(_ key: String) throws(ConfigError) -> Bool? {
        guard let n = take(key) else { return nil }
        guard case let .scalar(s) = n.kind, let b = Yams.Node.scalar(s).bool else { throw fail(key, n.line, "expected true or false") }
        return b
    }

    /// A duration (``checkedDuration(_:in:)``: 0 to ``DurationLimits/maximum``), longer than 0
    /// when so declared; out of range or not a duration is an error with the key path, the line
    /// and the limit.
    mutating func duration(_ key: String) throws(ConfigError) -> Duration? {
        guard case let .duration(positive) = shape(key) else { preconditionFailure("\(child(key)) is not declared a duration") }
        guard let n = take(key) else { return nil }
        guard case let .scalar(s) = n.kind else {
            throw fail(key, n.line, "expected a duration like 500ms, 5s, 2m, 1h or 7d (a bare number is seconds)")
        }
        let d: Duration
        do { d = try checkedDuration(s.string) } catch { throw fail(key, n.line, error.message) }
        if positive, d <= .zero { throw fail(key, n.line, "must be longer than 0") }
        return d
    }

    mutating func enumeration<E: RawRepresentable & CaseIterable>(_ key: String, _: E.Type) throws(ConfigError) -> E?
    where E.RawValue == String {
        guard let raw = try string(key) else { return nil }
        guard let v = E(rawValue: raw) else {
            throw fail(key, line, "'\(raw)' is not one of \(E.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return v
    }
}

extension ConfigKey {
    var isRefused: Bool { if case .refused = shape { return true }; return false }
}

extension String {
    func trimmingCharacters(in set: Character) -> String {
        var s = Substring(self)
        while s.first == set { s.removeFirst() }
        while s.last == set { s.removeLast() }
        return String(s)
    }
}

// MARK: - Sections

extension MQTTSettings {
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        var r = try MappingReader(node, path: path, section: Self.shape, environment: partial)
        let urlLine = r.line(of: "url")
        if let url = try r.string("url") { try setURL(url, path: partial ? path : r.child("url"), line: partial ? nil : urlLine) }
        if let v = try r.string("client_id") { clientID = v }
        if let v = try r.string("base_topic") { baseTopic = v }
        if let v = try r.enumeration("protocol", ProtocolVersion.self) { protocolVersion = v }
        if let line = r.line(of: "keepalive"), let v = try r.duration("keepalive") {
            // MQTT's keep-alive is a 16-bit number of seconds (libmosquitto also wants 5 or more).
            guard v == .zero || (Duration.seconds(5) ... .seconds(65_535)).contains(v) else {
                throw r.fail("keepalive", line, "must be 0 (off) or 5 s to 65535 s, not \(formatDuration(v))")
            }
            keepAlive = v
        }
        if let v = try r.string("username") { username = v }
        if let v = try r.string("password_file") { passwordFile = v }
        if let v = try r.string("password_env") { passwordEnvironment = v }
        _ = r.take("password")  // refused by the reader
        if let v = try r.int("qos") { qos = v }
        if let v = try r.bool("retain") { retainState = v }
        if let v = try r.duration("reconnect_min") { reconnectMin = v }
        if let v = try r.duration("reconnect_max") { reconnectMax = v }
        if let v = try r.enumeration("api", BridgeAPIAccess.self) { api = v }
        if let n = r.take("tls") {
            var t = tls ?? TLS()
            var tr = try MappingReader(n, path: r.child("tls"), section: Self.tlsShape)
            try tr.checkRules()
            if let v = try tr.string("ca_file") { t.caFile = v }
            if let v = try tr.string("ca_dir") { t.caDirectory = v }
            if let v = try tr.string("cert_file") { t.certificateFile = v }
            if let v = try tr.string("key_file") { t.keyFile = v }
            if let v = try tr.string("version") { t.version = v }
            if let v = try tr.bool("verify_hostname") { t.verifyHostname = v }
            try tr.finish()
            tls = t
            useTLS = true
        }
        try r.finish()
        if reconnectMin > reconnectMax {
            throw ConfigError(path: path, line: node.line, message: "reconnect_min is above reconnect_max")
        }
    }

    /// `mqtt://host[:port]` or `mqtts://host[:port]` (default ports 1883 / 8883).
    mutating func setURL(_ url: String, path: String, line: Int?) throws(ConfigError) {
        let scheme: String, rest: Substring
        if url.hasPrefix("mqtt://") { scheme = "mqtt"; rest = url.dropFirst(7) }
        else if url.hasPrefix("mqtts://") { scheme = "mqtts"; rest = url.dropFirst(8) }
        else { throw ConfigError(path: path, line: line, message: "expected mqtt://host[:port] or mqtts://host[:port]") }
        let hostPort = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        var h = String(hostPort), p = scheme == "mqtts" ? 8883 : 1883
        if h.hasPrefix("[") {  // [::1]:1883
            guard let close = h.firstIndex(of: "]") else { throw ConfigError(path: path, line: line, message: "unterminated IPv6 address") }
            let after = h[h.index(after: close)...]
            if after.hasPrefix(":") {
                guard let v = Int(after.dropFirst()), (1...65535).contains(v) else { throw ConfigError(path: path, line: line, message: "invalid port") }
                p = v
            }
            h = String(h[h.index(after: h.startIndex)..<close])
        } else if let colon = h.lastIndex(of: ":") {
            guard let v = Int(h[h.index(after: colon)...]), (1...65535).contains(v) else {
                throw ConfigError(path: path, line: line, message: "invalid port")
            }
            p = v
            h = String(h[..<colon])
        }
        guard !h.isEmpty else { throw ConfigError(path: path, line: line, message: "missing host") }
        host = h
        port = p
        useTLS = scheme == "mqtts" || tls != nil
    }
}

extension BluetoothSettings {
    /// The `bluetooth` section. `adapters` is a list in the file and comma-separated from the
    /// environment (`partial`, where an error names `path`, which already names the key and the
    /// variable).
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        do throws(ConfigError) {
            var r = try MappingReader(node, path: path, section: Self.shape)
            try r.checkRules()
            if let v = try r.string("adapter") { adapter = v }
            if let n = r.take("adapters") { adapters = try Self.adapterList(n, path: r.child("adapters"), fromEnvironment: partial) }
            if let v = try r.int("max_connections") { maxConnections = v }
            if let v = try r.string("bus_address") { busAddress = v }
            if let v = try r.enumeration("notify", NotifySetting.self) { notify = v }
            try r.finish()
        } catch {
            guard partial else { throw error }
            throw ConfigError(path: path, line: nil, message: error.message)
        }
    }

    /// `adapters`: a non-empty list of distinct adapter names (from the environment, `hci0,hci1`).
    static func adapterList(_ node: ConfigNode, path: String, fromEnvironment: Bool) throws(ConfigError) -> [String] {
        var names: [(name: String, path: String, line: Int?)] = []
        switch node.kind {
        case let .sequence(items):
            for (i, item) in items.enumerated() {
                guard case let .scalar(s) = item.kind else {
                    throw ConfigError(path: "\(path)[\(i)]", line: item.line, message: "expected an adapter name like hci0")
                }
                names.append((s.string, "\(path)[\(i)]", item.line))
            }
        case let .scalar(s) where fromEnvironment:
            let parts = s.string.split(separator: ",", omittingEmptySubsequences: false)
            names = parts.map { (String($0).trimmingCharacters(in: " "), path, nil) }
            if names.count == 1, names[0].name.isEmpty { names = [] }
        default:
            throw ConfigError(path: path, line: node.line, message: "expected a list of adapter names like [hci0, hci1]")
        }
        guard !names.isEmpty else {
            throw ConfigError(path: path, line: node.line, message: "expected at least one adapter, like [hci0]")
        }
        var seen = Set<String>()
        for n in names {
            try checkAdapterName(n.name, path: n.path, line: n.line)
            guard seen.insert(n.name).inserted else {
                throw ConfigError(path: n.path, line: n.line, message: "\(n.name) is listed twice")
            }
        }
        return names.map(\.name)
    }

    /// A device's `adapter` must be one of the bridge's.
    func checkPin(_ name: String, path: String, line: Int?) throws(ConfigError) {
        guard adapters.contains(name) else {
            throw ConfigError(path: path, line: line,
                              message: "'\(name)' is not one of the bridge's adapters (bluetooth.adapters: \(adapters.joined(separator: ", ")))")
        }
    }

    static func checkAdapterName(_ name: String, path: String, line: Int?) throws(ConfigError) {
        guard isAdapterName(name) else {
            throw ConfigError(path: path, line: line, message: "'\(name)' \(StringRule.adapter.message)")
        }
    }
}

extension DatabaseSettings {
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        var r = try MappingReader(node, path: path, section: Self.shape, environment: partial)
        if let v = try r.string("path") { self.path = v }
        if let v = try r.int("history_max_events") { historyMaxEvents = v }
        if let v = try r.duration("history_max_age") { historyMaxAge = v }
        try r.finish()
    }
}

extension HomeAssistantSettings {
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        var r = try MappingReader(node, path: path, section: Self.shape, environment: partial)
        if let v = try r.bool("enabled") { enabled = v }
        if let v = try r.string("discovery_prefix") { discoveryPrefix = v }
        try r.finish()
    }
}

extension MetricsSettings {
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        var r = try MappingReader(node, path: path, section: Self.shape, environment: partial)
        if let v = try r.string("listen") {
            guard let (h, p) = MetricsSettings.parseListen(v) else {
                throw r.fail("listen", node.line, "'\(v)' \(Self.listenRule(example: 9464).message)")
            }
            host = h
            port = p
        }
        if let n = r.take("allowed_hosts") { allowedHosts = try Self.hostList(n, path: partial ? path : r.child("allowed_hosts"), fromEnvironment: partial) }
        try r.finish()
    }

    /// `allowed_hosts`: a list of host names or IP addresses, without scheme or port (from the
    /// environment, `a.example,b.example`), in lower case.
    static func hostList(_ node: ConfigNode, path: String, fromEnvironment: Bool) throws(ConfigError) -> [String] {
        var names: [(name: String, path: String, line: Int?)] = []
        switch node.kind {
        case let .sequence(items):
            for (i, item) in items.enumerated() {
                guard case let .scalar(s) = item.kind else {
                    throw ConfigError(path: "\(path)[\(i)]", line: item.line, message: "expected a host name like bridge.example")
                }
                names.append((s.string, "\(path)[\(i)]", item.line))
            }
        case let .scalar(s) where fromEnvironment:
            names = s.string.split(separator: ",").map { (String($0).trimmingCharacters(in: " "), path, nil) }
        default:
            throw ConfigError(path: path, line: node.line, message: "expected a list of host names like [bridge.example, 192.168.1.20]")
        }
        for n in names {
            let name = n.name.hasPrefix("[") && n.name.hasSuffix("]") ? String(n.name.dropFirst().dropLast()) : n.name
            let hostName = !name.isEmpty && name.count <= 253 && !name.hasPrefix(".") && !name.hasPrefix("-")
                && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }
            guard hostRule.matches(n.name), hostName || isIP(name, family: AF_INET6) else {
                throw ConfigError(path: n.path, line: n.line, message: "'\(n.name)' \(hostRule.message)")
            }
        }
        return names.map { $0.name.lowercased() }
    }

    /// `HOST:PORT`, `[IPv6]:PORT` or `localhost:PORT` → the IP address and the port; nil when
    /// the host is not an IP address or the port is not 1…65535.
    static func parseListen(_ text: String) -> (host: String, port: Int)? {
        let host: Substring, port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(close, offsetBy: 2)...]
            guard isIP(String(host), family: AF_INET6) else { return nil }
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
            guard host == "localhost" || isIP(String(host), family: AF_INET) else { return nil }
        }
        guard !port.isEmpty, port.allSatisfy({ $0.isASCII && $0.isNumber }), let p = Int(port), (1...65535).contains(p) else { return nil }
        return (host == "localhost" ? "127.0.0.1" : String(host), p)
    }

    static func isIP(_ text: String, family: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(family, text, &buffer) == 1
    }
}

extension FrontendSettings {
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        var r = try MappingReader(node, path: path, section: Self.shape, environment: partial)
        if let v = try r.string("listen") {
            guard let (h, p) = MetricsSettings.parseListen(v) else {
                throw r.fail("listen", node.line, "'\(v)' \(MetricsSettings.listenRule(example: 8080).message)")
            }
            host = h
            port = p
        }
        if let v = try r.string("auth_token_file") { authTokenFile = v }
        if let v = try r.bool("allow_unauthenticated") { allowUnauthenticated = v }
        if let n = r.take("allowed_hosts") {
            allowedHosts = try MetricsSettings.hostList(n, path: partial ? path : r.child("allowed_hosts"), fromEnvironment: partial)
        }
        let urlLine = r.line(of: "url") ?? node.line
        if let v = try r.string("url") {
            guard Self.isWebURL(v) else {
                throw ConfigError(path: partial ? path : r.child("url"), line: partial ? nil : urlLine,
                                  message: "'\(v)' is not an http or https URL with a host (e.g. http://gatt2mqtt.lan:8080, https://home.example/gatt2mqtt)")
            }
            url = v
        }
        try r.finish()
    }
}

extension FrontendSettings {
    /// The names a request's `Host` may carry besides the loopback names and the listen address:
    /// `allowed_hosts`, and the host of `url` (users reach the frontend by it).
    public var hostNames: [String] {
        guard let url, let host = URLComponents(string: url)?.host, !host.isEmpty else { return allowedHosts }
        return allowedHosts + [host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host]
    }

    /// An `http` or `https` URL with a host, no spaces, and neither user nor password in it
    /// (it is published, in Home Assistant's device blocks).
    static func isWebURL(_ text: String) -> Bool {
        guard !text.contains(where: { $0.isWhitespace }), let u = URLComponents(string: text),
              let scheme = u.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = u.host, !host.isEmpty, u.user == nil, u.password == nil else { return false }
        return true
    }
}

extension ClusterSettings {
    /// The `cluster` section (docs/scale-out.md). From the environment (`partial`), an error names
    /// `path`, which already names the key and the variable.
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        do throws(ConfigError) {
            var r = try MappingReader(node, path: path, section: Self.shape)
            let lostAfterLine = r.line(of: "lost_after") ?? r.line(of: "seen_interval") ?? node.line
            if let v = try r.bool("enabled") { enabled = v }
            if let v = try r.int("hysteresis") { hysteresis = v }
            if let v = try r.duration("handover_after") { handoverAfter = v }
            if let v = try r.duration("seen_interval") { seenInterval = v }
            if let v = try r.duration("lost_after") { lostAfter = v }
            if let v = try r.duration("claim_settle") { claimSettle = v }
            if let v = try r.duration("drain_timeout") { drainTimeout = v }
            try r.finish()
            // From the environment the other one may still change: `validate()` checks it after.
            if !partial { try checkLostAfter(path: r.child("lost_after"), line: lostAfterLine) }
        } catch {
            guard partial else { throw error }
            throw ConfigError(path: path, line: nil, message: error.message)
        }
    }

    /// A sighting must outlive the interval at which sightings are published.
    func checkLostAfter(path: String, line: Int?) throws(ConfigError) {
        guard lostAfter > seenInterval else {
            throw ConfigError(path: path, line: line, message: "must be longer than seen_interval (\(lostAfter) is not more than \(seenInterval))")
        }
    }
}

extension DeviceConfig {
    init(_ node: ConfigNode, path: String, profiles: [any ProfileRules]?) throws(ConfigError) {
        var r = try MappingReader(node, path: path, section: Self.shape(profiles: profiles?.map(\.id)))
        let id = try r.requiredString("id")
        guard let profileName = try r.rawString("profile") else {
            let known = profiles.map { p in
                " (" + (p.count > 1 ? p.dropLast().map(\.id.rawValue).joined(separator: ", ") + " or " : "") + (p.last?.id.rawValue ?? "") + ")"
            } ?? ""
            throw ConfigError(path: r.child("profile"), line: node.line, message: "required\(known)")
        }
        let rules = profiles?.first { $0.id.rawValue == profileName }
        guard let profile = ProfileID(rawValue: profileName), rules != nil || profiles == nil else {
            let known = profiles.map { "one of \($0.map(\.id.rawValue).joined(separator: ", "))" }
                ?? "a profile name (a lowercase letter, then lowercase letters, digits and _)"
            throw ConfigError(path: r.child("profile"), line: node.line, message: "'\(profileName)' is not \(known)")
        }
        self.init(id: id, profile: profile)
        name = try r.string("name")
        try r.checkRules()
        address = try r.string("address")?.uppercased()
        namePattern = try r.string("name_pattern")
        // Whether it is one of `bluetooth.adapters` is checked with the whole file (`validate`).
        adapter = try r.string("adapter")
        if let n = r.take("offline") {
            var o = try MappingReader(n, path: r.child("offline"), section: Self.offlineShape)
            if let v = try o.enumeration("policy", OfflinePolicy.self) { offlinePolicy = v }
            if let v = try o.duration("deadline") { offlineDeadline = v }
            try o.finish()
        }
        if let v = try r.duration("command_timeout") { commandTimeout = v }
        if let v = try r.duration("availability_timeout") { availabilityTimeout = v } else if isPassive {
            availabilityTimeout = Self.passiveAvailabilityTimeout
        }
        try loadPassive(&r, node: node)
        if let n = r.take("characteristics") {
            if isPassive {
                throw ConfigError(path: r.child("characteristics"), line: n.line, message: "a passive device (profile: advertisement) has no characteristics: it is never connected")
            }
            guard case let .sequence(items) = n.kind else {
                throw ConfigError(path: r.child("characteristics"), line: n.line, message: "expected a list")
            }
            for (i, item) in items.enumerated() {
                characteristics.append(try CharacteristicMapping(item, path: "\(r.child("characteristics"))[\(i)]"))
            }
        }
        try r.finish()
        do { try rules?.validate(self, path: path) } catch { throw ConfigError(path: error.path, line: error.line ?? node.line, message: error.message) }
        var topics = Set<String>()
        for (i, c) in characteristics.enumerated() where !topics.insert(c.topic).inserted {
            throw ConfigError(path: "\(path).characteristics[\(i)].topic", line: nil, message: "duplicate topic '\(c.topic)'")
        }
    }
}

extension DeviceConfig {
    /// The keys of a passive device (`format`, `bindkey` or `bindkey_file`, `min_interval`), refused
    /// on any other; an address pattern only for a passive device, which needs an address.
    mutating func loadPassive(_ r: inout MappingReader, node: ConfigNode) throws(ConfigError) {
        for key in ["format", "bindkey", "bindkey_file", "min_interval"] where !isPassive && r.has(key) {
            throw ConfigError(path: r.child(key), line: r.keyLine(of: key), message: "only for profile: advertisement (a passive device)")
        }
        if addressIsPattern, !isPassive {
            throw ConfigError(path: r.child("address"), line: node.line,
                              message: "'\(address ?? "")': an address pattern is only for a passive device (profile: advertisement); a device that connects needs its address")
        }
        guard isPassive else { return }
        if address == nil {
            throw ConfigError(path: r.child("address"), line: node.line, message: "required for a passive device (an address or a pattern like A4:C1:38:*)")
        }
        guard let format = try r.string("format") else {
            throw ConfigError(path: r.child("format"), line: node.line, message: "required for profile: advertisement (bthome, xiaomi, atc, ruuvi, govee or a name of advertisement_formats)")
        }
        self.format = format
        if let key = try r.string("bindkey") { bindkey = try? Hex.decode(key) }  // 32 hex digits: the rule held
        let fileLine = r.line(of: "bindkey_file")
        if let file = try r.string("bindkey_file") {
            bindkeyFile = file
            bindkey = try Self.readBindkey(file, path: r.child("bindkey_file"), line: fileLine)
        }
        if let v = try r.duration("min_interval") { minInterval = v }
    }

    /// The key in `file`: 32 hex digits, surrounding white space (a trailing newline) allowed.
    static func readBindkey(_ file: String, path: String, line: Int?) throws(ConfigError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ConfigError(path: path, line: line, message: "cannot read \(file)")
        }
        guard data.count <= 256, let text = String(data: data, encoding: .utf8) else {
            throw ConfigError(path: path, line: line, message: "\(file) does not hold a bindkey (32 hex digits)")
        }
        let key = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard StringRule.bindkey.matches(key), let bytes = try? Hex.decode(key) else {
            throw ConfigError(path: path, line: line, message: "\(file) does not hold a bindkey (32 hex digits)")
        }
        return bytes
    }
}

extension CharacteristicMapping {
    init(_ node: ConfigNode, path: String) throws(ConfigError) {
        var r = try MappingReader(node, path: path, section: Self.shape)
        let uuid = try r.requiredString("uuid")
        let codec = try r.enumeration("codec", Codec.self) ?? .raw
        var directions = Set<Direction>()
        if let n = r.take("direction") {
            let items: [ConfigNode]
            switch n.kind {
            case .sequence(let s): items = s
            case .scalar: items = [n]
            case .mapping: throw ConfigError(path: r.child("direction"), line: n.line, message: "expected read, write, notify or a list of them")
            }
            for item in items {
                guard case let .scalar(s) = item.kind, let d = Direction(rawValue: s.string) else {
                    throw ConfigError(path: r.child("direction"), line: item.line, message: "expected read, write or notify")
                }
                directions.insert(d)
            }
        } else {
            directions = [.notify]
        }
        let defaultTopic = uuid.lowercased()
        let topicLine = r.line(of: "topic") ?? node.line
        self.init(uuid: uuid, codec: codec, directions: directions, topic: try r.rawString("topic") ?? defaultTopic)
        guard StringRule.mappingTopic.matches(topic) else {  // the default too (a UUID cannot fail it)
            throw ConfigError(path: r.child("topic"), line: topicLine, message: "'\(topic)' \(StringRule.mappingTopic.message)")
        }
        service = try r.string("service")
        if let n = r.take("layout") {
            guard codec == .layout else {
                throw ConfigError(path: r.child("layout"), line: n.line, message: "layout is only for codec: layout")
            }
            layout = n.jsonValue()
        }
        if codec == .layout, layout == nil {
            throw ConfigError(path: r.child("layout"), line: node.line, message: "required for codec: layout (builtin:NAME or an inline layout)")
        }
        pollInterval = try r.duration("poll")
        if pollInterval != nil { directions.insert(.read) }
        try r.finish()
    }

    static func isValidUUID(_ s: String) -> Bool { StringRule.uuid.matches(s) }
}

extension String {
    func replacingOccurrences(_ a: Character, _ b: String) -> String {
        var out = ""
        for c in self { if c == a { out += b } else { out.append(c) } }
        return out
    }
}
