import BinaryCoding
@testable import BridgeConfig
import Testing

/// The declared shape (``ConfigSection``) the loader reads by and the schema is generated from:
/// its patterns compile and say what the parsers take, and every declared key is read.
@Suite struct ConfigShapeTests {
    /// Every string rule of the shape, with where it is.
    static func rules(_ section: ConfigSection, _ path: String = "") -> [(String, StringRule)] {
        section.keys.flatMap { k -> [(String, StringRule)] in
            func walk(_ shape: ConfigShape, _ p: String) -> [(String, StringRule)] {
                switch shape {
                case let .string(rule?): return [(p, rule)]
                case let .section(s): return rules(s, p)
                case let .list(item, _, _): return walk(item, p + "[]")
                default: return []
                }
            }
            return walk(k.shape, path.isEmpty ? k.name : "\(path).\(k.name)")
        }
    }

    @Test func everyPatternCompilesAsSwiftRegex() throws {
        let all = Self.rules(Configuration.shape(profiles: nil))
        #expect(all.count >= 12)
        for (path, rule) in all {
            #expect(throws: Never.self, "\(path)") { _ = try Regex(rule.pattern) }
            #expect(rule.pattern.hasPrefix("^") && rule.pattern.hasSuffix("$"), "\(path): JSON Schema patterns are not anchored")
        }
        for p in [DurationLimits.pattern, byteSizePattern] { #expect(throws: Never.self) { _ = try Regex(p) } }
    }

    @Test(arguments: ["hci0", "hci12"], ["hci", "hci-1", "usb0", "HCI0", "hci0 ", "hci٣"])
    func adapterRule(good: String, bad: String) {
        #expect(BluetoothSettings.isAdapterName(good))
        #expect(!BluetoothSettings.isAdapterName(bad))
    }

    @Test func rulesKeepWhatTheHandWrittenChecksTook() {
        for u in ["2A37", "0x2a37", "0000180D", "GP-0072", "gp-0072", "0000180d-0000-1000-8000-00805f9b34fb"] {
            #expect(CharacteristicMapping.isValidUUID(u), "\(u)")
        }
        for u in ["2A3", "GP-72", "0000180d-0000-1000-8000-00805f9b34f", "xyzw", ""] { #expect(!CharacteristicMapping.isValidUUID(u), "\(u)") }
        for t in ["a", "a/b", "battery", "sets"] { #expect(StringRule.mappingTopic.matches(t), "\(t)") }
        for t in ["", "set", "get", "response", "availability", "/a", "a/#", "a+"] { #expect(!StringRule.mappingTopic.matches(t), "\(t)") }
        for t in ["gatt2mqtt", "home/ble"] { #expect(StringRule.baseTopic.matches(t), "\(t)") }
        for t in ["", "/a", "a/", "a/#", "+"] { #expect(!StringRule.baseTopic.matches(t), "\(t)") }
        for a in ["C0:FF:EE:00:00:01", "c0:ff:ee:00:00:01"] { #expect(StringRule.address.matches(a), "\(a)") }
        for a in ["C0:FF:EE:00:00", "C0-FF-EE-00-00-01", "C0:FF:EE:00:00:0G"] { #expect(!StringRule.address.matches(a), "\(a)") }
        #expect(Configuration.isValidNodeID(String(repeating: "a", count: 64)))
        #expect(!Configuration.isValidNodeID(String(repeating: "a", count: 65)))
    }

    /// The schema's duration pattern says what ``checkedDuration(_:in:)`` reads (its range aside:
    /// a duration past 365 days as text is the bridge's to refuse).
    @Test func durationPatternAgreesWithTheParser() throws {
        let regex = try Regex(DurationLimits.pattern)
        for text in ["5", "1.5", "500ms", "5s", "2m", "1h", "7d", "1e3", "1e-3s", ".5s", " 5s ", "+5s", "0", "2.5e1m"] {
            #expect((try? regex.wholeMatch(in: text)) != nil, "\(text)")
            #expect((try? checkedDuration(text)) != nil, "\(text)")
        }
        for text in ["", "s", "-1", "-1d", "nan", "inf", "5 s", "5w", "1,5s", "0x10", "5ss", "--5"] {
            #expect((try? regex.wholeMatch(in: text)) == nil, "\(text)")
            #expect((try? checkedDuration(text)) == nil, "\(text)")
        }
    }

    @Test func byteSizePatternAgreesWithTheParser() throws {
        let regex = try Regex(byteSizePattern)
        for text in ["262144", "256KiB", "256 KiB", "1MiB", "1m", "512B", "4kb", "2MB"] {
            #expect((try? regex.wholeMatch(in: text)) != nil, "\(text)")
            #expect(parseByteSize(text) != nil, "\(text)")
        }
        for text in ["", "KiB", "1GB", "1.5MiB", "-1", "1Ki", "1 M B"] {
            #expect((try? regex.wholeMatch(in: text)) == nil, "\(text)")
            #expect(parseByteSize(text) == nil, "\(text)")
        }
    }

    /// A file with every declared key: the loader reads each (a declared key it did not read
    /// would be refused as "declared but not read").
    @Test func theLoaderReadsEveryDeclaredKey() throws {
        let yaml = """
            mqtt:
              url: mqtts://broker.example:8883
              client_id: bridge-1
              base_topic: home/ble
              protocol: 3.1.1
              keepalive: 60s
              username: bridge
              password_file: /run/secrets/mqtt
              password_env: MQTT_PASSWORD
              qos: 2
              retain: false
              reconnect_min: 1s
              reconnect_max: 1m
              api: read_only
              tls: {ca_file: /etc/ca.pem, ca_dir: /etc/ssl/certs, cert_file: c.pem, key_file: k.pem, version: tlsv1.3, verify_hostname: false}
            bluetooth:
              adapters: [hci0, hci1]
              max_connections: 5
              bus_address: unix:path=/run/dbus/system_bus_socket
              notify: start
            database: {path: /tmp/x.sqlite, history_max_events: 5, history_max_age: 1d}
            homeassistant: {enabled: false, discovery_prefix: ha}
            metrics: {listen: "127.0.0.1:9464", allowed_hosts: [bridge.example]}
            frontend: {listen: "127.0.0.1:8080", auth_token_file: /etc/token, allow_unauthenticated: false, allowed_hosts: ["[::1]"]}
            log_level: debug
            node_id: garage
            cluster: {enabled: true, hysteresis: 3, handover_after: 5s, seen_interval: 2s, lost_after: 10s, claim_settle: 500ms, drain_timeout: 2s}
            limits: {max_payload: 64KiB, max_commands: 10, max_queued: 10, redelivery_cache: 0}
            devices:
              - id: sensor
                name: Sensor
                name_pattern: "^Sensor"
                adapter: hci1
                profile: custom
                offline: {policy: latest, deadline: 30s}
                command_timeout: 2s
                availability_timeout: 1m
                characteristics:
                  - {uuid: 2A19, service: 180F, codec: layout, layout: "builtin:battery_level", direction: [read, notify], poll: 1m, topic: battery}
              - {id: cam, address: "C0:FF:EE:00:00:01", profile: gopro}
              - {id: porch, address: "A4:C1:38:00:00:01", profile: advertisement, format: bthome, bindkey: 00112233445566778899aabbccddeeff, min_interval: 10s}
            advertisement_formats:
              mine: {match: {service_data: FFF0}}
            """
        let c = try Configuration(yaml: yaml)
        #expect(c.mqtt.tls?.verifyHostname == false && c.cluster.drainTimeout == .seconds(2) && c.devices[0].offlinePolicy == .latest)
        let keys = Self.keyCount(Configuration.shape(profiles: nil))
        // Each declared key appears in the file above (mqtt.password, refused, and the one of
        // bluetooth.adapter/adapters not given aside).
        // bindkey_file is read at load (PassiveConfigTests has a file), so not with bindkey here.
        for key in Self.keyNames(Configuration.shape(profiles: nil))
        where !["mqtt.password", "bluetooth.adapter", "devices[].address", "devices[].bindkey_file"].contains(key) {
            let last = String(key.split(separator: ".").last ?? "")
            #expect(yaml.contains("\(last):"), "\(key) is declared but not in the test's file")
        }
        #expect(keys > 60)
    }

    static func keyNames(_ section: ConfigSection, _ path: String = "") -> [String] {
        section.keys.flatMap { k -> [String] in
            let p = path.isEmpty ? k.name : "\(path).\(k.name)"
            switch k.shape {
            case let .section(s): return [p] + keyNames(s, p)
            case let .list(.section(s), _, _): return [p] + keyNames(s, p + "[]")
            default: return [p]
            }
        }
    }

    static func keyCount(_ section: ConfigSection) -> Int { keyNames(section).count }

    @Test func schemaStatesTheDeclarations() throws {
        let schema = ConfigSchema.json(profiles: [.gopro, .rokid, .custom])
        #expect(schema["$schema"]?.stringValue == "http://json-schema.org/draft-07/schema#")
        #expect(schema["additionalProperties"] == false)
        let mqtt = try #require(schema["properties"]?["mqtt"])
        #expect(mqtt["properties"]?["qos"] == ["description": "QoS of state publishes; default 1.", "type": "integer", "minimum": 0, "maximum": 2])
        #expect(mqtt["properties"]?["protocol"]?["enum"] == ["3.1.1", "5", 5])
        #expect(mqtt["properties"]?["password"]?["not"] == [:])
        let device = try #require(schema["properties"]?["devices"]?["items"])
        #expect(device["required"] == ["id", "profile"])
        #expect(device["properties"]?["profile"]?["enum"] == ["gopro", "rokid", "custom"])
        #expect(device["allOf"] == [["anyOf": [["required": ["address"]], ["required": ["name_pattern"]]]],
                                    ["not": ["required": ["bindkey", "bindkey_file"]]]])
        #expect(schema["properties"]?["advertisement_formats"]?["additionalProperties"] == ["type": "object"])
        #expect(schema["properties"]?["advertisement_formats"]?["propertyNames"]?["pattern"] == .string(StringRule.formatName.pattern))
        #expect(ConfigSchema.text(profiles: nil).hasSuffix("}\n"))
    }
}
