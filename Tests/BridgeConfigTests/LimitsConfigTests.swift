import BridgeConfig
import Testing

/// `limits:` and `mqtt.api` (docs/configuration.md, docs/bridge-api.md): defaults, the keys,
/// sizes with units, each error with its key path and line, the environment.
@Suite struct LimitsConfigTests {
    func error(_ yaml: String, environment: [String: String] = [:]) -> ConfigError? {
        do { _ = try Configuration(yaml: yaml, environment: environment); return nil } catch { return error }
    }

    @Test func defaults() throws {
        let c = try Configuration(yaml: "")
        #expect(c.limits.maxPayload == 256 * 1024)
        #expect(c.limits.maxCommands == 100)
        #expect(c.limits.maxQueued == 100)
        #expect(c.limits.redeliveryCache == 1024 * 1024)
        #expect(c.mqtt.api == .full)
        #expect(try Configuration(yaml: "limits: {}").limits == LimitSettings())
    }

    @Test func fullSection() throws {
        let c = try Configuration(yaml: """
            mqtt:
              api: read_only
            limits:
              max_payload: 64KiB
              max_commands: 10
              max_queued: 20
              redelivery_cache: 2MiB
            """)
        #expect(c.mqtt.api == .readOnly)
        #expect(c.limits.maxPayload == 65_536 && c.limits.maxCommands == 10 && c.limits.maxQueued == 20)
        #expect(c.limits.redeliveryCache == 2 * 1024 * 1024)
        #expect(try Configuration(yaml: "limits:\n  max_payload: 4096").limits.maxPayload == 4096)
        #expect(try Configuration(yaml: "limits:\n  max_payload: 300 k").limits.maxPayload == 300 * 1024)
        #expect(try Configuration(yaml: "limits:\n  redelivery_cache: 0").limits.redeliveryCache == 0)
        #expect(try Configuration(yaml: "mqtt:\n  api: off").mqtt.api == .off)
    }

    @Test func errorsNameTheKeyAndLine() {
        let unit = error("limits:\n  max_payload: 1GB")
        #expect(unit?.path == "limits.max_payload" && unit?.line == 2)
        #expect(unit?.message.contains("256KiB") == true)
        let small = error("limits:\n  max_payload: 100")
        #expect(small?.path == "limits.max_payload" && small?.message.contains("out of range") == true)
        #expect(error("limits:\n  max_payload: 1024MiB")?.path == "limits.max_payload")
        #expect(error("limits:\n  max_payload: 99999999999999999999")?.path == "limits.max_payload")
        #expect(error("limits:\n  max_commands: 0")?.path == "limits.max_commands")
        #expect(error("limits:\n  max_queued: -1")?.path == "limits.max_queued")
        let typo = error("limits:\n  max_payloads: 1")
        #expect(typo?.path == "limits.max_payloads" && typo?.line == 2)
        let api = error("mqtt:\n  api: readonly")
        #expect(api?.path == "mqtt.api" && api?.message.contains("full, read_only, off") == true)
    }

    @Test func environment() throws {
        let c = try Configuration(yaml: "limits:\n  max_queued: 5", environment: [
            "GATT2MQTT_LIMITS_MAX_PAYLOAD": "1MiB", "GATT2MQTT_LIMITS_MAX_COMMANDS": "7", "GATT2MQTT_MQTT_API": "off",
        ])
        #expect(c.limits.maxPayload == 1024 * 1024 && c.limits.maxCommands == 7 && c.limits.maxQueued == 5)
        #expect(c.mqtt.api == .off)
        let bad = error("", environment: ["GATT2MQTT_LIMITS_MAX_QUEUED": "lots"])
        #expect(bad?.path == "limits.max_queued (from GATT2MQTT_LIMITS_MAX_QUEUED)")
        #expect(error("", environment: ["GATT2MQTT_LIMITS_NOPE": "1"])?.path.contains("GATT2MQTT_LIMITS_NOPE") == true)
    }
}
