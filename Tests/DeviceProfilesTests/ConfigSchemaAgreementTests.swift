import BinaryCoding
import BridgeConfig
import DeviceProfiles
import Foundation
import TestSupport
import Testing

/// The configuration's JSON Schema (docs/config-schema.json) and the loader agree: every file in
/// `config/` loads and validates against the schema; each bad file below is refused by both; and
/// what only the bridge can check (one key against another, a value against the rest of the
/// file) is listed, so the list stays what the schema's descriptions say.
///
/// The schema is checked by Python's `jsonschema` (Draft-07, and the schema itself against
/// the metaschema): an implementation independent of the generator, so a keyword the generator
/// gets wrong is caught rather than shared (scripts/setup installs it).
@Suite struct ConfigSchemaAgreementTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let schema = ConfigSchema.json(profiles: DeviceProfiles.all.map(\.id))

    static let script = """
        import json, sys
        from jsonschema import Draft7Validator
        schema = json.load(open(sys.argv[1]))
        Draft7Validator.check_schema(schema)
        v = Draft7Validator(schema)
        out = []
        for instance in json.load(open(sys.argv[2])):
            errors = sorted(v.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
            out.append(None if not errors else "/".join(map(str, errors[0].absolute_path)) + ": " + errors[0].message)
        print(json.dumps(out))
        """

    /// The first schema error of each instance (nil: valid), from `python3 -c script`, run off
    /// the cooperative pool (python's start-up would hold one of its two threads).
    static func schemaErrors(_ instances: [JSONValue]) async throws -> [String?] {
        try await offThePool { try blockingSchemaErrors(instances) }
    }

    private static func blockingSchemaErrors(_ instances: [JSONValue]) throws -> [String?] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("config-schema-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let schemaFile = dir.appendingPathComponent("schema.json"), instancesFile = dir.appendingPathComponent("instances.json")
        try Data(schema.jsonText.utf8).write(to: schemaFile)
        try Data(JSONValue.array(instances).jsonText.utf8).write(to: instancesFile)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", script, schemaFile.path, instancesFile.path]
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw SchemaCheckError(text: "python3 with jsonschema (scripts/setup installs it) failed: \(String(decoding: errors, as: UTF8.self))")
        }
        let answers = try JSONValue(parsing: output).arrayValue ?? []
        return answers.map { $0.stringValue }
    }

    struct SchemaCheckError: Error, CustomStringConvertible { let text: String; var description: String { text } }

    static func configFiles() throws -> [URL] {
        let fm = FileManager.default
        return try ["config", "config/examples"].flatMap { dir in
            try fm.contentsOfDirectory(atPath: root.appendingPathComponent(dir).path).filter { $0.hasSuffix(".yaml") }.sorted()
                .map { root.appendingPathComponent(dir).appendingPathComponent($0) }
        }
    }

    @Test func everyExampleLoadsAndValidatesAgainstTheSchema() async throws {
        let files = try Self.configFiles()
        #expect(files.count >= 6)
        var instances: [JSONValue] = []
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            #expect(throws: Never.self, "\(file.lastPathComponent)") { _ = try Configuration(yaml: text, profiles: DeviceProfiles.all) }
            #expect(text.hasPrefix("# yaml-language-server: $schema="), "\(file.lastPathComponent) has no modeline")
            instances.append(try YAMLDocument.parse(text).value)
        }
        for (file, error) in zip(files, try await Self.schemaErrors(instances)) {
            #expect(error == nil, "\(file.lastPathComponent): \(error ?? "")")
        }
    }

    static let device = #"{id: cam, address: "C0:FF:EE:00:00:01", profile: gopro"#

    /// Files the loader refuses and the schema refuses too, one fault each.
    static let bad = [
        "- not a mapping",
        "mqtt: {colour: red}",
        "mqtt: {qos: 3}",
        "mqtt: {protocol: 4}",
        "mqtt: {password: secret}",
        #"mqtt: {base_topic: "a/#"}"#,
        "mqtt: {base_topic: a/}",
        #"mqtt: {url: "http://broker"}"#,
        "mqtt: {keepalive: soon}",
        "mqtt: {retain: maybe}",
        "mqtt: {api: write_only}",
        "mqtt: {tls: {cert_file: c.pem}}",
        "mqtt: {tls: {key_file: k.pem}}",
        "bluetooth: {adapter: usb0}",
        "bluetooth: {adapter: hci0, adapters: [hci1]}",
        "bluetooth: {adapters: []}",
        "bluetooth: {adapters: [hci0, hci0]}",
        "bluetooth: {max_connections: 33}",
        "bluetooth: {notify: acquire}",
        "database: {history_max_age: -1d}",
        "database: {history_max_events: -1}",
        "homeassistant: {enabled: 1}",
        #"metrics: {listen: "example.com:9464"}"#,
        #"frontend: {allowed_hosts: ["http://bridge.example"]}"#,
        "log_level: loud",
        #"node_id: "a b""#,
        "cluster: {hysteresis: 61}",
        "cluster: {seen_interval: 0}",
        "cluster: {lost_after: 10 s}",
        "limits: {max_payload: 100}",
        "limits: {max_payload: 1GB}",
        "limits: {max_commands: 0}",
        "devices: {id: cam}",
        "devices: [{id: cam, address: \"C0:FF:EE:00:00:01\"}]",
        "devices: [{id: cam, address: \"C0:FF:EE:00:00:01\", profile: toaster}]",
        "devices: [{id: cam, profile: gopro}]",
        "devices: [{id: \"my cam\", address: \"C0:FF:EE:00:00:01\", profile: gopro}]",
        "devices: [{id: cam, address: \"C0:FF:EE\", profile: gopro}]",
        "devices: [{id: cam, address: \"C0:FF:EE:00:00:01\", adapter: bt0, profile: gopro}]",
        "devices: [\(device), colour: red}]",
        "devices: [\(device), offline: {policy: later}}]",
        "devices: [\(device), command_timeout: 5 minutes}]",
        "devices: [\(device), characteristics: [{uuid: xyz}]}]",
        "devices: [\(device), characteristics: [{uuid: 2A37, codec: layout}]}]",
        "devices: [\(device), characteristics: [{uuid: 2A37, codec: raw, layout: \"builtin:battery_level\"}]}]",
        "devices: [\(device), characteristics: [{uuid: 2A37, direction: sideways}]}]",
        "devices: [\(device), characteristics: [{uuid: 2A37, topic: set}]}]",
        "devices: [\(device), characteristics: [{uuid: 2A37, topic: \"a/#\"}]}]",
        "devices: [\(device), characteristics: [{uuid: 2A37, poll: often}]}]",
    ]

    @Test func badFilesAreRefusedByTheLoaderAndTheSchema() async throws {
        var instances: [JSONValue] = []
        for yaml in Self.bad {
            #expect(throws: ConfigError.self, "\(yaml)") { _ = try Configuration(yaml: yaml, profiles: DeviceProfiles.all) }
            instances.append(try YAMLDocument.parse(yaml).value)
        }
        for (yaml, error) in zip(Self.bad, try await Self.schemaErrors(instances)) {
            #expect(error != nil, "the schema accepts \(yaml)")
        }
    }

    /// What a schema cannot state and only the bridge checks: each of these passes the schema
    /// and is refused by the loader, and the schema of the key named (`mqtt.keepalive`) says
    /// "checked by the bridge".
    static let onlyTheBridge: [(yaml: String, key: String)] = [
        ("mqtt: {keepalive: 3s}", "mqtt.keepalive"),
        ("mqtt: {reconnect_min: 1m, reconnect_max: 1s}", "mqtt.reconnect_min"),
        ("cluster: {seen_interval: 30s, lost_after: 10s}", "cluster.lost_after"),
        ("database: {history_max_age: 400d}", "database.history_max_age"),
        (#"metrics: {listen: "127.0.0.1:70000"}"#, "metrics.listen"),
        (#"frontend: {listen: "0.0.0.0:8080"}"#, "frontend.auth_token_file"),
        ("devices: [\(device)}, \(device)}]", "devices"),
        ("devices: [{id: bridge, address: \"C0:FF:EE:00:00:01\", profile: gopro}]", "devices"),
        ("devices: [\(device), adapter: hci1}]", "devices"),
        ("devices: [{id: s, address: \"C0:FF:EE:00:00:01\", profile: custom}]", "devices.characteristics"),
    ]

    /// The schema of `key` (`mqtt.keepalive`; through a list's items: `devices.characteristics`).
    static func property(_ key: String) -> JSONValue? {
        var node: JSONValue? = schema
        for part in key.split(separator: ".") {
            if let items = node?["items"] { node = items }
            node = node?["properties"]?[String(part)]
        }
        return node
    }

    @Test func whatOnlyTheBridgeChecksIsListedAndDescribed() async throws {
        var instances: [JSONValue] = []
        for (yaml, _) in Self.onlyTheBridge {
            #expect(throws: ConfigError.self, "\(yaml)") { _ = try Configuration(yaml: yaml, profiles: DeviceProfiles.all) }
            instances.append(try YAMLDocument.parse(yaml).value)
        }
        for ((yaml, key), error) in zip(Self.onlyTheBridge, try await Self.schemaErrors(instances)) {
            #expect(error == nil, "the schema now refuses \(yaml) (\(error ?? "")): move it to `bad`")
            let text = Self.property(key)?.jsonText ?? ""
            #expect(text.contains("checked by the bridge"), "\(key): \(text)")
        }
    }
}
