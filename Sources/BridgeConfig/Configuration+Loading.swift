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
            var top = try MappingReader(root, path: "")
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
            let nodeIDLine = top.line(of: "node_id")
            if let v = try top.string("node_id") { nodeID = try Self.checkedNodeID(v, path: "node_id", line: nodeIDLine) }
            if let n = top.take("cluster") { try cluster.load(n, path: "cluster") }
            if let n = top.take("limits") { try limits.load(n, path: "limits") }
            if let n = top.take("devices") {
                guard case let .sequence(items) = n.kind else {
                    throw ConfigError(path: "devices", line: n.line, message: "expected a list of devices")
                }
                for (i, item) in items.enumerated() {
                    devices.append(try DeviceConfig(item, path: "devices[\(i)]", profiles: profiles))
                    if case let .mapping(m) = item.kind, let a = m.first(where: { $0.key == "adapter" }) { adapterLines[i] = a.value.line }
                }
            }
            try top.finish()
        }
        try applyEnvironment(environment)
        try validate(adapterLines: adapterLines)
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

/// Reads a mapping key by key; whatever is left at `finish()` is an unknown key.
struct MappingReader {
    let path: String
    let line: Int
    var members: [(key: String, keyLine: Int, value: ConfigNode)]

    init(_ node: ConfigNode, path: String) throws(ConfigError) {
        guard case let .mapping(m) = node.kind else {
            throw ConfigError(path: path, line: node.line, message: "expected a mapping (key: value)")
        }
        self.path = path
        self.line = node.line
        members = m
    }

    func child(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The line of `key`'s value while it is unread (for a check after reading it).
    func line(of key: String) -> Int? { members.first { $0.key == key }?.value.line }

    /// The line of `key` itself while it is unread.
    func keyLine(of key: String) -> Int? { members.first { $0.key == key }?.keyLine }

    mutating func take(_ key: String) -> ConfigNode? {
        guard let i = members.firstIndex(where: { $0.key == key }) else { return nil }
        return members.remove(at: i).value
    }

    /// Rejects unknown keys before any other check, so a typo is reported as the typo.
    func allowOnly(_ keys: Set<String>) throws(ConfigError) {
        if let m = members.first(where: { !keys.contains($0.key) }) {
            throw ConfigError(path: child(m.key), line: m.keyLine, message: "unknown key (expected one of \(keys.sorted().joined(separator: ", ")))")
        }
    }

    func finish() throws(ConfigError) {
        if let m = members.first {
            throw ConfigError(path: child(m.key), line: m.keyLine, message: "unknown key")
        }
    }

    mutating func string(_ key: String) throws(ConfigError) -> String? {
        guard let n = take(key) else { return nil }
        guard case let .scalar(s) = n.kind else {
            throw ConfigError(path: child(key), line: n.line, message: "expected a string")
        }
        if Yams.Node.scalar(s).null != nil, s.style == .plain { return nil }
        return s.string
    }

    mutating func requiredString(_ key: String) throws(ConfigError) -> String {
        guard let s = try string(key), !s.isEmpty else {
            throw ConfigError(path: child(key), line: line, message: "required")
        }
        return s
    }

    mutating func int(_ key: String, in range: ClosedRange<Int>) throws(ConfigError) -> Int? {
        guard let n = take(key) else { return nil }
        guard case let .scalar(s) = n.kind, let v = Int(s.string.trimmingCharacters(in: " ")) else {
            throw ConfigError(path: child(key), line: n.line, message: "expected an integer")
        }
        guard range.contains(v) else {
            throw ConfigError(path: child(key), line: n.line, message: "\(v) is out of range \(range.lowerBound)…\(range.upperBound)")
        }
        return v
    }

    mutating func bool(_ key: String) throws(ConfigError) -> Bool? {
        guard let n = take(key) else { return nil }
        guard case let .scalar(s) = n.kind, let b = Yams.Node.scalar(s).bool else {
            throw ConfigError(path: child(key), line: n.line, message: "expected true or false")
        }
        return b
    }

    /// A duration (``checkedDuration(_:in:)``: 0 to ``DurationLimits/maximum``); out of range or
    /// not a duration is an error with the key path, the line and the limit.
    mutating func duration(_ key: String) throws(ConfigError) -> Duration? {
        guard let n = take(key) else { return nil }
        guard case let .scalar(s) = n.kind else {
            throw ConfigError(path: child(key), line: n.line, message: "expected a duration like 500ms, 5s, 2m, 1h or 7d (a bare number is seconds)")
        }
        do { return try checkedDuration(s.string) } catch { throw ConfigError(path: child(key), line: n.line, message: error.message) }
    }

    /// ``duration(_:)`` that must be longer than zero.
    mutating func positiveDuration(_ key: String) throws(ConfigError) -> Duration? {
        let line = line(of: key)
        guard let d = try duration(key) else { return nil }
        guard d > .zero else { throw ConfigError(path: child(key), line: line, message: "must be longer than 0") }
        return d
    }

    mutating func enumeration<E: RawRepresentable & CaseIterable>(_ key: String, _: E.Type) throws(ConfigError) -> E?
    where E.RawValue == String {
        guard let raw = try string(key) else { return nil }
        guard let v = E(rawValue: raw) else {
            throw ConfigError(path: child(key), line: line, message: "'\(raw)' is not one of \(E.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return v
    }
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
        var r = try MappingReader(node, path: path)
        if let url = try r.string("url") { try setURL(url, path: r.child("url"), line: node.line) }
        if let v = try r.string("client_id") { clientID = v }
        if let v = try r.string("base_topic") {
            guard !v.isEmpty, !v.contains("#"), !v.contains("+"), !v.hasPrefix("/"), !v.hasSuffix("/") else {
                throw ConfigError(path: r.child("base_topic"), line: node.line, message: "must be a topic without wildcards or leading/trailing '/'")
            }
            baseTopic = v
        }
        if let v = try r.enumeration("protocol", ProtocolVersion.self) { protocolVersion = v }
        if let line = r.line(of: "keepalive"), let v = try r.duration("keepalive") {
            // MQTT's keep-alive is a 16-bit number of seconds (libmosquitto also wants 5 or more).
            guard v == .zero || (Duration.seconds(5) ... .seconds(65_535)).contains(v) else {
                throw ConfigError(path: r.child("keepalive"), line: line, message: "must be 0 (off) or 5 s to 65535 s, not \(formatDuration(v))")
            }
            keepAlive = v
        }
        if let v = try r.string("username") { username = v }
        if let v = try r.string("password_file") { passwordFile = v }
        if let v = try r.string("password_env") { passwordEnvironment = v }
        if let n = r.take("password") {
            throw ConfigError(path: r.child("password"), line: n.line, message: "passwords are not kept in the config: use password_file or password_env")
        }
        if let v = try r.int("qos", in: 0...2) { qos = v }
        if let v = try r.bool("retain") { retainState = v }
        if let v = try r.duration("reconnect_min") { reconnectMin = v }
        if let v = try r.duration("reconnect_max") { reconnectMax = v }
        if let v = try r.enumeration("api", BridgeAPIAccess.self) { api = v }
        if let n = r.take("tls") {
            var t = tls ?? TLS()
            var tr = try MappingReader(n, path: r.child("tls"))
            if let v = try tr.string("ca_file") { t.caFile = v }
            if let v = try tr.string("ca_dir") { t.caDirectory = v }
            if let v = try tr.string("cert_file") { t.certificateFile = v }
            if let v = try tr.string("key_file") { t.keyFile = v }
            if let v = try tr.string("version") { t.version = v }
            if let v = try tr.bool("verify_hostname") { t.verifyHostname = v }
            try tr.finish()
            if (t.certificateFile == nil) != (t.keyFile == nil) {
                throw ConfigError(path: r.child("tls"), line: n.line, message: "cert_file and key_file go together")
            }
            tls = t
            useTLS = true
        }
        try r.finish()
        if reconnectMin > reconnectMax {
            throw ConfigError(path: path, line: node.line, message: "reconnect_min is above reconnect_max")
        }
    }

    /// `mqtt://host[:port]` or `mqtts://host[:port]` (default ports 1883 / 8883).
    mutating func setURL(_ url: String, path: String, line: Int) throws(ConfigError) {
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
            var r = try MappingReader(node, path: path)
            if let one = r.keyLine(of: "adapter"), let several = r.keyLine(of: "adapters") {
                throw ConfigError(path: path, line: max(one, several),
                                  message: "adapter and adapters both given: keep one (adapter: hci0 for one adapter, adapters: [hci0, hci1] for several)")
            }
            let adapterLine = r.line(of: "adapter")
            if let v = try r.string("adapter") {
                try Self.checkAdapterName(v, path: r.child("adapter"), line: adapterLine)
                adapter = v
            }
            if let n = r.take("adapters") { adapters = try Self.adapterList(n, path: r.child("adapters"), fromEnvironment: partial) }
            if let v = try r.int("max_connections", in: Self.maxConnectionsRange) { maxConnections = v }
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
            throw ConfigError(path: path, line: line, message: "'\(name)' is not an adapter name like hci0")
        }
    }
}

extension DatabaseSettings {
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        var r = try MappingReader(node, path: path)
        if let v = try r.string("path") { self.path = v }
        if let v = try r.int("history_max_events", in: 0...10_000_000) { historyMaxEvents = v }
        if let v = try r.duration("history_max_age") { historyMaxAge = v }
        try r.finish()
    }
}

extension HomeAssistantSettings {
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        var r = try MappingReader(node, path: path)
        if let v = try r.bool("enabled") { enabled = v }
        if let v = try r.string("discovery_prefix") { discoveryPrefix = v }
        try r.finish()
    }
}

extension MetricsSettings {
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        var r = try MappingReader(node, path: path)
        if let v = try r.string("listen") {
            guard let (h, p) = MetricsSettings.parseListen(v) else {
                // From the environment, `path` already names the key and the variable.
                throw ConfigError(path: partial ? path : r.child("listen"), line: partial ? nil : node.line,
                                  message: "'\(v)' is not HOST:PORT with an IP address and a port 1…65535 (e.g. 127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464)")
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
            guard hostName || isIP(name, family: AF_INET6) else {
                throw ConfigError(path: n.path, line: n.line,
                                  message: "'\(n.name)' is not a host name or IP address (no scheme, port or path: e.g. bridge.example, 192.168.1.20)")
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
        var r = try MappingReader(node, path: path)
        if let v = try r.string("listen") {
            guard let (h, p) = MetricsSettings.parseListen(v) else {
                throw ConfigError(path: partial ? path : r.child("listen"), line: partial ? nil : node.line,
                                  message: "'\(v)' is not HOST:PORT with an IP address and a port 1…65535 (e.g. 127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080)")
            }
            host = h
            port = p
        }
        if let v = try r.string("auth_token_file") {
            guard !v.isEmpty else {
                throw ConfigError(path: partial ? path : r.child("auth_token_file"), line: partial ? nil : node.line,
                                  message: "expected the path of a file holding the token")
            }
            authTokenFile = v
        }
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
            var r = try MappingReader(node, path: path)
            try r.allowOnly(["enabled", "hysteresis", "handover_after", "seen_interval", "lost_after", "claim_settle", "drain_timeout"])
            let lostAfterLine = r.line(of: "lost_after") ?? r.line(of: "seen_interval") ?? node.line
            if let v = try r.bool("enabled") { enabled = v }
            if let v = try r.int("hysteresis", in: 0...60) { hysteresis = v }
            if let v = try r.positiveDuration("handover_after") { handoverAfter = v }
            if let v = try r.positiveDuration("seen_interval") { seenInterval = v }
            if let v = try r.positiveDuration("lost_after") { lostAfter = v }
            if let v = try r.positiveDuration("claim_settle") { claimSettle = v }
            if let v = try r.positiveDuration("drain_timeout") { drainTimeout = v }
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
        var r = try MappingReader(node, path: path)
        try r.allowOnly(["id", "name", "address", "name_pattern", "adapter", "profile", "offline", "command_timeout",
                         "availability_timeout", "characteristics"])
        let id = try r.requiredString("id")
        guard id.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }), id.allSatisfy(\.isASCII) else {
            throw ConfigError(path: r.child("id"), line: node.line, message: "'\(id)' may only contain letters, digits, '_' and '-' (use name for a friendly name)")
        }
        guard let profileName = try r.string("profile") else {
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
        if let a = try r.string("address") {
            let upper = a.uppercased()
            let parts = upper.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 6, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isHexDigit) }) else {
                throw ConfigError(path: r.child("address"), line: node.line, message: "'\(a)' is not a Bluetooth address like C0:FF:EE:00:00:01")
            }
            address = upper
        }
        namePattern = try r.string("name_pattern")
        let adapterLine = r.line(of: "adapter")
        if let v = try r.string("adapter") {
            // Whether it is one of `bluetooth.adapters` is checked with the whole file (`validate`).
            try BluetoothSettings.checkAdapterName(v, path: r.child("adapter"), line: adapterLine)
            adapter = v
        }
        if address == nil, namePattern == nil {
            throw ConfigError(path: path, line: node.line, message: "needs an address or a name_pattern")
        }
        if let n = r.take("offline") {
            var o = try MappingReader(n, path: r.child("offline"))
            if let v = try o.enumeration("policy", OfflinePolicy.self) { offlinePolicy = v }
            if let v = try o.duration("deadline") { offlineDeadline = v }
            try o.finish()
        }
        if let v = try r.duration("command_timeout") { commandTimeout = v }
        if let v = try r.duration("availability_timeout") { availabilityTimeout = v }
        if let n = r.take("characteristics") {
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

extension CharacteristicMapping {
    init(_ node: ConfigNode, path: String) throws(ConfigError) {
        var r = try MappingReader(node, path: path)
        try r.allowOnly(["uuid", "service", "codec", "layout", "direction", "poll", "topic"])
        let uuid = try r.requiredString("uuid")
        guard CharacteristicMapping.isValidUUID(uuid) else {
            throw ConfigError(path: r.child("uuid"), line: node.line, message: "'\(uuid)' is not a UUID (16-bit like 2A37, 128-bit, or GP-XXXX)")
        }
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
        self.init(uuid: uuid, codec: codec, directions: directions, topic: try r.string("topic") ?? defaultTopic)
        guard !topic.isEmpty, !topic.contains("#"), !topic.contains("+"), !topic.hasPrefix("/"), !["set", "get", "response", "availability"].contains(topic) else {
            throw ConfigError(path: r.child("topic"), line: node.line, message: "'\(topic)' is not usable as a topic name")
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

    static func isValidUUID(_ s: String) -> Bool {
        let u = s.uppercased()
        if u.hasPrefix("GP-") { return u.count == 7 && u.dropFirst(3).allSatisfy(\.isHexDigit) }
        if u.hasPrefix("0X") { return isValidUUID(String(u.dropFirst(2))) }
        if u.count == 4 || u.count == 8 { return u.allSatisfy(\.isHexDigit) }
        let groups = u.split(separator: "-", omittingEmptySubsequences: false).map(\.count)
        return groups == [8, 4, 4, 4, 12] && u.replacingOccurrences("-", "").allSatisfy(\.isHexDigit)
    }
}

extension String {
    func replacingOccurrences(_ a: Character, _ b: String) -> String {
        var out = ""
        for c in self { if c == a { out += b } else { out.append(c) } }
        return out
    }
}
