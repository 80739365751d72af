import BinaryCoding
import Foundation
import Testing
@testable import BridgeConfig

@Suite struct ConfigurationTests {
    /// The minimal file of the bridge issue must work exactly as written.
    static let minimal = """
        mqtt:
          url: mqtt://127.0.0.1:1883
          base_topic: gatt2mqtt
        bluetooth:
          adapter: hci0
        database:
          path: ./state.sqlite
        devices:
          - id: camera
            address: C0:FF:EE:00:00:01
            profile: gopro
          - id: glasses
            address: C0:FF:EE:00:00:02
            profile: rokid
        """

    @Test func minimalFileWithDefaults() throws {
        let c = try Configuration(yaml: Self.minimal)
        #expect(c.mqtt.host == "127.0.0.1" && c.mqtt.port == 1883 && !c.mqtt.useTLS)
        #expect(c.mqtt.baseTopic == "gatt2mqtt")
        #expect(c.bluetooth.adapter == "hci0" && c.bluetooth.busAddress == nil && c.bluetooth.notify == .auto)
        #expect(c.database.path == "./state.sqlite")
        #expect(c.devices.map(\.id) == ["camera", "glasses"])
        #expect(c.devices[0].profile == .gopro && c.devices[1].profile == .rokid)
        #expect(c.devices[0].address == "C0:FF:EE:00:00:01")
        #expect(c.devices[0].offlinePolicy == .queue && c.devices[0].offlineDeadline == .seconds(60))
        #expect(c.devices[0].commandTimeout == .seconds(5))
    }

    @Test func emptyFileIsAllDefaults() throws {
        let c = try Configuration(yaml: "")
        #expect(c.devices.isEmpty && c.mqtt.port == 1883 && c.mqtt.protocolVersion == .v5)
    }

    @Test func unknownKeyNamesPathAndLine() {
        let yaml = Self.minimal.replacingOccurrences(of: "profile: rokid", with: "profile: rokid\n    colour: red")
        #expect(throws: ConfigError(path: "devices[1].colour", line: 15, message: "unknown key (expected one of adapter, address, availability_timeout, bindkey, bindkey_file, characteristics, command_timeout, format, id, min_interval, name, name_pattern, offline, profile)")) {
            try Configuration(yaml: yaml)
        }
        #expect(throws: ConfigError(path: "mqtt.colour", line: 2, message: "unknown key (expected one of api, base_topic, client_id, keepalive, password_env, password_file, protocol, qos, reconnect_max, reconnect_min, retain, tls, url, username)")) {
            try Configuration(yaml: "mqtt:\n  colour: red")
        }
    }

    @Test func badValuesNamePath() {
        func error(_ yaml: String) -> ConfigError? {
            do { _ = try Configuration(yaml: yaml); return nil } catch { return error }
        }
        #expect(error("mqtt:\n  url: http://x")?.path == "mqtt.url")
        #expect(error("mqtt:\n  qos: 3")?.message == "3 is out of range 0…2")
        #expect(error("mqtt:\n  password: hunter2")?.path == "mqtt.password")
        #expect(error("devices:\n  - id: a\n    address: nope\n    profile: gopro")?.path == "devices[0].address")
        #expect(error("devices:\n  - id: a\n    address: C0:FF:EE:00:00:01\n    profile: Toaster!")?.path == "devices[0].profile")
        #expect(error("devices:\n  - id: a b\n    address: C0:FF:EE:00:00:01\n    profile: gopro")?.path == "devices[0].id")
        #expect(error("devices:\n  - id: a\n    profile: gopro")?.message == "needs an address or a name_pattern")
        #expect(error("devices:\n  - {id: a, address: C0:FF:EE:00:00:01, profile: gopro}\n  - {id: a, address: C0:FF:EE:00:00:02, profile: gopro}")?.path == "devices[1].id")
        #expect(error("mqtt: [1, 2]")?.message == "expected a mapping (key: value)")
        #expect(error("bluetooth:\n  notify: acquire") == ConfigError(path: "bluetooth.notify", line: 2, message: "'acquire' is not one of auto, start"))
        #expect((try? Configuration(yaml: "bluetooth:\n  notify: start"))?.bluetooth.notify == .start)
        let syntax = error("mqtt:\n  url: [unclosed\n")
        #expect(syntax?.message.hasPrefix("invalid YAML") == true && syntax?.line != nil)
    }

    @Test func customDeviceWithLayouts() throws {
        let c = try Configuration(yaml: """
            devices:
              - id: hrm
                name: Garage/Heart rate
                name_pattern: "^Polar"
                profile: custom
                offline: {policy: latest, deadline: 2m}
                characteristics:
                  - uuid: 2A37
                    codec: layout
                    layout: builtin:heart_rate_measurement
                    topic: heart_rate
                  - uuid: 2a19
                    codec: layout
                    layout:
                      fields:
                        - {name: level, type: u8}
                    direction: [read, notify]
                    poll: 30s
                    topic: battery
                  - uuid: 0000fff1-0000-1000-8000-00805f9b34fb
                    direction: write
            """)
        let d = c.devices[0]
        #expect(d.offlinePolicy == .latest && d.offlineDeadline == .seconds(120))
        #expect(d.namePattern == "^Polar" && d.name == "Garage/Heart rate")
        #expect(d.characteristics[0].layout == .string("builtin:heart_rate_measurement"))
        #expect(d.characteristics[0].directions == [.notify])
        #expect(d.characteristics[1].layout == ["fields": [["name": "level", "type": "u8"]]])
        #expect(d.characteristics[1].pollInterval == .seconds(30) && d.characteristics[1].directions == [.read, .notify])
        #expect(d.characteristics[2].codec == .raw && d.characteristics[2].topic == "0000fff1-0000-1000-8000-00805f9b34fb")
    }

    @Test func environmentOverrides() throws {
        let c = try Configuration(yaml: Self.minimal, environment: [
            "GATT2MQTT_MQTT_URL": "mqtts://broker.local", "GATT2MQTT_DATABASE_PATH": "/var/lib/g/s.sqlite",
            "GATT2MQTT_BLUETOOTH_BUS_ADDRESS": "unix:path=/tmp/bus", "PATH": "/usr/bin",
        ])
        #expect(c.mqtt.host == "broker.local" && c.mqtt.port == 8883 && c.mqtt.useTLS)
        #expect(c.database.path == "/var/lib/g/s.sqlite")
        #expect(c.bluetooth.busAddress == "unix:path=/tmp/bus")
        #expect(throws: ConfigError.self) { try Configuration(yaml: "", environment: ["GATT2MQTT_MQTT_COLOUR": "x"]) }
        #expect(throws: ConfigError.self) { try Configuration(yaml: "", environment: ["GATT2MQTT_NOPE": "x"]) }
    }

    /// `log_level` in the file and GATT2MQTT_LOG_LEVEL (which wins); a bad value names its source.
    @Test func logLevelFromFileAndEnvironment() throws {
        #expect(try Configuration(yaml: "").logLevel == .info)
        #expect(try Configuration(yaml: "log_level: debug").logLevel == .debug)
        #expect(try Configuration(yaml: "log_level: debug", environment: ["GATT2MQTT_LOG_LEVEL": "warning"]).logLevel == .warning)
        #expect(throws: ConfigError(path: "log_level", line: 1, message: "'loud' is not one of trace, debug, info, notice, warning, error, critical")) {
            try Configuration(yaml: "log_level: loud")
        }
        #expect(throws: ConfigError(path: "log_level (from GATT2MQTT_LOG_LEVEL)", line: nil,
                                    message: "'loud' is not one of trace, debug, info, notice, warning, error, critical")) {
            try Configuration(yaml: "", environment: ["GATT2MQTT_LOG_LEVEL": "loud"])
        }
    }

    @Test(arguments: [("500ms", Duration.milliseconds(500)), ("5s", .seconds(5)), ("2m", .seconds(120)),
                      ("1h", .seconds(3600)), ("7d", .seconds(604_800)), ("1.5", .milliseconds(1500))])
    func durations(_ text: String, _ expected: Duration) {
        #expect(parseDuration(text) == expected)
    }

    @Test func invalidDurations() {
        #expect(parseDuration("soon") == nil)
        #expect(parseDuration("-1s") == nil)
        #expect(parseDuration("") == nil)
    }

    /// `metrics.listen` (docs/metrics.md): off without the section; IP addresses and localhost;
    /// a bad address names the key, the line and the expected form.
    @Test func metricsSection() throws {
        #expect(try Configuration(yaml: Self.minimal).metrics == nil)
        #expect(try Configuration(yaml: "metrics:\n  listen: 127.0.0.1:9464").metrics == MetricsSettings(host: "127.0.0.1", port: 9464))
        #expect(try Configuration(yaml: "metrics: {listen: \"0.0.0.0:9100\"}").metrics == MetricsSettings(host: "0.0.0.0", port: 9100))
        #expect(try Configuration(yaml: "metrics: {listen: \"[::1]:9100\"}").metrics == MetricsSettings(host: "::1", port: 9100))
        #expect(try Configuration(yaml: "metrics: {listen: \"localhost:9100\"}").metrics == MetricsSettings(host: "127.0.0.1", port: 9100))
        #expect(try Configuration(yaml: "metrics: {}").metrics?.listen == "127.0.0.1:9464")
        #expect(MetricsSettings(host: "::1", port: 9100).listen == "[::1]:9100")

        let expected = "is not HOST:PORT with an IP address and a port 1…65535 (e.g. 127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464)"
        for bad in ["127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:+80", "127.0.0.1:", "256.0.0.1:9464",
                    "metrics.example:9464", ":9464", "[::1]9464", "[::1:9464", "::1:9464", "[127.0.0.1]:9464"] {
            #expect(throws: ConfigError(path: "metrics.listen", line: 3, message: "'\(bad)' \(expected)"), "\(bad)") {
                try Configuration(yaml: "devices: []\nmetrics:\n  listen: \"\(bad)\"")
            }
        }
        #expect(throws: ConfigError(path: "metrics.port", line: 2, message: "unknown key (expected one of allowed_hosts, listen)")) {
            try Configuration(yaml: "metrics:\n  port: 9464")
        }
        #expect(throws: ConfigError(path: "metrics", line: 1, message: "expected a mapping (key: value)")) {
            try Configuration(yaml: "metrics: 9464")
        }
    }

    /// GATT2MQTT_METRICS_LISTEN turns the endpoint on (or moves it); empty turns it off.
    @Test func metricsFromEnvironment() throws {
        let on = try Configuration(yaml: Self.minimal, environment: ["GATT2MQTT_METRICS_LISTEN": "127.0.0.1:9999"])
        #expect(on.metrics == MetricsSettings(host: "127.0.0.1", port: 9999))
        let moved = try Configuration(yaml: "metrics: {listen: \"127.0.0.1:9464\"}", environment: ["GATT2MQTT_METRICS_LISTEN": "[::1]:9465"])
        #expect(moved.metrics == MetricsSettings(host: "::1", port: 9465))
        let off = try Configuration(yaml: "metrics: {listen: \"127.0.0.1:9464\"}", environment: ["GATT2MQTT_METRICS_LISTEN": ""])
        #expect(off.metrics == nil)
        #expect(throws: ConfigError(path: "metrics.listen (from GATT2MQTT_METRICS_LISTEN)", line: nil,
                                    message: "'9464' is not HOST:PORT with an IP address and a port 1…65535 (e.g. 127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464)")) {
            try Configuration(yaml: "", environment: ["GATT2MQTT_METRICS_LISTEN": "9464"])
        }
        #expect(throws: ConfigError.self) { try Configuration(yaml: "", environment: ["GATT2MQTT_METRICS_PORT": "9464"]) }
    }

    @Test func ipv6BrokerURL() throws {
        let c = try Configuration(yaml: "mqtt:\n  url: mqtt://[::1]:1884")
        #expect(c.mqtt.host == "::1" && c.mqtt.port == 1884)
    }
}

@Suite struct ShippedConfigTests {
    static var configDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../config").standardized
    }

    /// Every YAML file shipped under config/ validates.
    @Test func shippedFilesValidate() throws {
        let fm = FileManager.default
        var files = try fm.contentsOfDirectory(atPath: Self.configDirectory.path).filter { $0.hasSuffix(".yaml") }
        files += try fm.contentsOfDirectory(atPath: Self.configDirectory.appendingPathComponent("examples").path)
            .filter { $0.hasSuffix(".yaml") }.map { "examples/" + $0 }
        #expect(files.count >= 5)
        for f in files {
            let text = try String(contentsOf: Self.configDirectory.appendingPathComponent(f), encoding: .utf8)
            #expect(throws: Never.self, "\(f)") { try Configuration(yaml: text) }
        }
    }
}
