import BinaryCoding
import Testing
@testable import BridgeConfig

/// The one checked parser of durations from outside (Sources/BridgeConfig/Durations.swift): a
/// documented maximum, and errors naming the key and the limit instead of a trap (issue 20).
@Suite struct DurationTests {
    @Test(arguments: [("500ms", Duration.milliseconds(500)), ("5s", .seconds(5)), ("2m", .seconds(120)), ("1h", .seconds(3600)),
                      ("7d", .seconds(604_800)), ("1.5", .milliseconds(1500)), ("1e3", .seconds(1000)), ("365d", DurationLimits.maximum),
                      ("0", .zero), (" 5s ", .seconds(5))])
    func inRange(_ text: String, _ expected: Duration) throws {
        #expect(try checkedDuration(text) == expected)
    }

    @Test func theMaximumIs365Days() {
        #expect(DurationLimits.maximum == .seconds(365 * 86_400))
        #expect(secondsText(DurationLimits.maximum) == "31536000 s (365d)")
        #expect(secondsText(.milliseconds(1500)) == "1.5 s" && secondsText(.milliseconds(5)) == "0.005 s" && secondsText(.seconds(600)) == "600 s")
    }

    @Test(arguments: ["1e16", "1e300", "1e307d", "366d", "31536001", "8760.1h"])
    func tooLongIsAnErrorNamingTheMaximum(_ text: String) {
        #expect(throws: DurationError("'\(text)' is above the maximum of 31536000 s (365d)")) { try checkedDuration(text) }
    }

    @Test(arguments: ["nan", "NaN", "inf", "-inf", "infinity", "soon", "", "5x", "0x10", "s", "1e", "--1"])
    func notANumberIsNotADuration(_ text: String) {
        #expect(throws: DurationError("'\(text)' is not a duration (expected e.g. 500ms, 5s, 2m, 1h or 7d; a bare number is seconds)")) {
            try checkedDuration(text)
        }
    }

    @Test func negativeIsAnError() {
        #expect(throws: DurationError("'-1s' is negative (a duration is 0 or more)")) { try checkedDuration("-1s") }
    }

    @Test func secondsFromOutside() throws {
        #expect(try checkedDuration(seconds: 2.5) == .milliseconds(2500))
        #expect(throws: DurationError("is not a finite number of seconds")) { try checkedDuration(seconds: .nan) }
        #expect(throws: DurationError("is not a finite number of seconds")) { try checkedDuration(seconds: .infinity) }
        #expect(throws: DurationError("is negative (a duration is 0 or more)")) { try checkedDuration(seconds: -1) }
        #expect(throws: DurationError("is above the maximum of 31536000 s (365d)")) { try checkedDuration(seconds: 1e16) }
        #expect(throws: DurationError("is above the maximum of 31536000 s (365d)")) { try checkedDuration(seconds: .greatestFiniteMagnitude) }
        // A narrower range names its own limits.
        #expect(throws: DurationError("is above the maximum of 600 s")) { try checkedDuration(seconds: 601, in: .zero ... .seconds(600)) }
        #expect(throws: DurationError("is below the minimum of 0.001 s")) { try checkedDuration(seconds: 0, in: .milliseconds(1) ... .seconds(300)) }
    }

    /// `command_timeout: 1e300` trapped ("Double value cannot be converted to Int64"): now the
    /// configuration error with the key path, the line and the limit.
    @Test func aHugeDurationInTheFileIsAConfigError() throws {
        let yaml = "devices:\n  - id: cam\n    address: C0:FF:EE:00:00:01\n    profile: gopro\n    command_timeout: 1e300\n"
        #expect(throws: ConfigError(path: "devices[0].command_timeout", line: 5, message: "'1e300' is above the maximum of 31536000 s (365d)")) {
            try Configuration(yaml: yaml)
        }
        #expect(throws: ConfigError(path: "mqtt.keepalive", line: 2, message: "'nan' is not a duration (expected e.g. 500ms, 5s, 2m, 1h or 7d; a bare number is seconds)")) {
            try Configuration(yaml: "mqtt:\n  keepalive: nan\n")
        }
        // A key with a narrower range names it: MQTT's keep-alive is 16 bits of seconds.
        #expect(throws: ConfigError(path: "mqtt.keepalive", line: 2, message: "must be 0 (off) or 5 s to 65535 s, not 86400s")) {
            try Configuration(yaml: "mqtt:\n  keepalive: 1d\n")
        }
        #expect(try Configuration(yaml: "mqtt:\n  keepalive: 65535\n").mqtt.keepAlive == .seconds(65535))
        #expect(throws: ConfigError(path: "database.history_max_age", line: 2, message: "'-1d' is negative (a duration is 0 or more)")) {
            try Configuration(yaml: "database:\n  history_max_age: -1d\n")
        }
        // From the environment, the same check.
        do {
            _ = try Configuration(yaml: "", environment: ["GATT2MQTT_MQTT_RECONNECT_MAX": "1e16"])
            Issue.record("1e16 s was taken")
        } catch {
            #expect(error.path.contains("GATT2MQTT_MQTT_RECONNECT_MAX") && error.message == "'1e16' is above the maximum of 31536000 s (365d)", "\(error)")
        }
    }

    /// The shape of `device/add` and `device/options`: a number or a string, both checked.
    @Test func aHugeDurationInADeviceOptionIsAConfigError() throws {
        var d = DeviceConfig(id: "cam", profile: .gopro)
        d.address = "C0:FF:EE:00:00:01"
        #expect(throws: ConfigError(path: "options.command_timeout", line: nil, message: "'1e16' is above the maximum of 31536000 s (365d)")) {
            try d.applying(options: ["command_timeout": "1e16"])
        }
        do {
            _ = try d.applying(options: ["availability_timeout": .double(1e300)])
            Issue.record("1e300 s was taken")
        } catch {
            #expect(error.path == "options.availability_timeout" && error.message.hasSuffix("is above the maximum of 31536000 s (365d)"), "\(error)")
        }
        #expect(try d.applying(options: ["command_timeout": "365d"]).commandTimeout == DurationLimits.maximum)
    }
}
