import BinaryCoding
import BridgeConfig
import BridgeStore
import DeviceProfiles
import Logging
import Synchronization
import TestSupport
import Testing
@testable import BridgeCore

/// The pure parts of zigbee2mqtt's shapes (docs/bridge-api.md): the event, the payloads that are
/// not objects, the exposes, the options and the redaction. End to end: CLITests/ZigbeeShapesTests.
@Suite struct ZigbeeShapesUnitTests {
    @Test func anEventHasTypeAndDataAndKeepsTheOldFields() {
        let e = BridgeEvent.json("device_removed", ["device": "porch", "forgotten": true])
        #expect(e.jsonText == #"{"type":"device_removed","data":{"device":"porch","forgotten":true,"friendly_name":"porch"},"device":"porch","forgotten":true}"#)
        #expect(BridgeEvent.json("scan_stopped", ["seen": 2]).jsonText == #"{"type":"scan_stopped","data":{"seen":2},"seen":2}"#)
    }

    @Test func payloadsThatAreNotObjects() {
        #expect(BridgeAPIExtension.shorthand("device/remove", "camera") == ["id": "camera"])
        #expect(BridgeAPIExtension.shorthand("pair", "camera") == ["id": "camera"])
        #expect(BridgeAPIExtension.shorthand("scan", true) == [:])
        #expect(BridgeAPIExtension.shorthand("scan", false) == ["seconds": 0])
        #expect(BridgeAPIExtension.shorthand("permit_join", 12) == ["seconds": 12])
        #expect(BridgeAPIExtension.shorthand("restart", "") == [:])
        #expect(BridgeAPIExtension.shorthand("device/remove", 12) == nil)
        #expect(BridgeAPIExtension.shorthand("device/rename", "camera") == nil)
        #expect(BridgeAPIExtension.shorthand("options", "debug") == nil)
        #expect(BridgeAPIExtension.permitJoin(["time": 254, "device": "router"]) == ["seconds": 254])
        #expect(BridgeAPIExtension.permitJoin(["value": false]) == ["seconds": 0])
    }

    @Test func controlsBecomeExposes() {
        let controls: [JSONValue] = [
            ["component": "switch", "object": "shutter", "name": "Shutter", "payload_on": "ON", "payload_off": "OFF", "command_topic": "b/cam/set"],
            ["component": "number", "object": "brightness", "name": "Brightness", "min": 0, "max": 15, "step": 1, "command_topic": "b/g/set"],
            ["component": "setting", "object": "fps", "name": "FPS", "options": ["30", "60"], "command_topic": "b/cam/set"],
            ["component": "button", "object": "locate", "name": "Locate", "payload_press": "PRESS", "command_topic": "b/cam/set"],
            ["component": "get", "object": "level", "name": "Read level", "command_topic": "b/x/get"],
            ["component": "write", "object": "level", "name": "Write level", "command_topic": "b/x/level/write"],
        ]
        let e = Bridge.exposes(controls).compactMap(\.objectValue)
        #expect(e.count == 5)
        #expect(e[0]["type"] == "binary" && e[0]["access"] == 3 && e[0]["value_on"] == "ON")
        #expect(e[1]["type"] == "numeric" && e[1]["value_max"] == 15 && e[1]["value_step"] == 1)
        #expect(e[2]["type"] == "enum" && e[2]["values"] == ["30", "60"] && e[2]["access"] == 2)
        #expect(e[3]["values"] == ["PRESS"])
        #expect(e[4]["property"] == "level" && e[4]["type"] == "text" && e[4]["access"] == 7)
    }

    @Test func optionsAreCheckedByTheFilesRulesAndKeptInTheStore() throws {
        #expect(RuntimeOptions.flatten(["limits": ["max_queued": 5], "log_level": "debug"]).map(\.key) == ["limits.max_queued", "log_level"])
        let parsed = try RuntimeOptions.parse([("limits.max_queued", 5), ("database.history_max_age", "2d")])
        #expect(parsed.limits.maxQueued == 5 && parsed.database.historyMaxAge == .seconds(2 * 86400))
        #expect(throws: ConfigError.self) { try RuntimeOptions.parse([("limits.max_queued", 0)]) }
        let store = try BridgeStore.inMemory()
        try store.setOption("limits.max_queued", value: "7")
        try store.setOption("log_level", value: #""debug""#)
        try store.setOption("gone.away", value: "1")
        let applied = RuntimeOptions.applyingStored(store, to: Configuration(), logger: .init(label: "t"))
        #expect(applied.limits.maxQueued == 7 && applied.logLevel == .debug && applied.limits.maxPayload == LimitSettings().maxPayload)
    }

    @Test func theConfigurationAsJSONHasNoSecret() throws {
        var c = Configuration()
        c.mqtt.passwordFile = "/etc/gatt2mqtt/password"
        c.mqtt.username = "bridge"
        let o = try #require(c.json.objectValue?["mqtt"]?.objectValue)
        #expect(o["password_file"] == "/etc/gatt2mqtt/password" && o["username"] == "bridge")
        let redacted = Configuration.redactingSecrets(["a": ["password": "x", "auth_token": "y", "bindkey": "z", "password_env": "PW"], "b": [["secret": 1]]])
        #expect(redacted.jsonText == #"{"a":{"password":"<redacted>","auth_token":"<redacted>","bindkey":"<redacted>","password_env":"PW"},"b":[{"secret":"<redacted>"}]}"#)
        // The file's shape: it loads again to the same configuration.
        #expect(try Configuration(yaml: c.json.jsonText) == c)
    }

    /// The options kept in the store apply at start: the log level (unless `--log-level` was
    /// given) through the runtime's hook, the others in the configuration the bridge runs with.
    @Test func keptOptionsApplyAtStartAndTheFlagWins() throws {
        let store = try BridgeStore.inMemory()
        try store.setOption("log_level", value: #""debug""#)
        try store.setOption("limits.max_queued", value: "7")
        let levels = Mutex<[LogLevel]>([])
        let control = BridgeControl(setLogLevel: { l in levels.withLock { $0.append(l) } })
        let bridge = try Bridge(configuration: Configuration(), store: store, mqtt: FakeMQTT(), central: FakeCentral([:]),
                                drivers: { _ in TestDriver() }, control: control)
        #expect(levels.withLock { $0 } == [.debug] && bridge.info["log_level"] == "debug")
        #expect(bridge.limits.maxQueued == 7 && bridge.info["config"]?["limits"]?["max_queued"] == 7)
        let flagged = try Bridge(configuration: Configuration(), store: store, mqtt: FakeMQTT(), central: FakeCentral([:]),
                                 drivers: { _ in TestDriver() },
                                 control: BridgeControl(setLogLevel: { l in levels.withLock { $0.append(l) } }, logLevel: .warning))
        #expect(levels.withLock { $0 } == [.debug] && flagged.info["log_level"] == "warning")
    }

    /// `backup` hands out the database: `mqtt.api: read_only` refuses it (docs/security.md).
    @Test func readOnlyRefusesBackup() throws {
        var config = Configuration()
        config.mqtt.api = .readOnly
        let bridge = try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: FakeMQTT(), central: FakeCentral([:]),
                                drivers: { _ in TestDriver() })
        #expect(bridge.forbidden("backup")?.contains("read_only") == true && bridge.forbidden("health_check") == nil)
    }

    /// `health_check`s that come while a Bluetooth check runs wait for it and share its answer:
    /// a flood of requests opens one D-Bus client, not one each.
    @Test func concurrentHealthChecksShareOneBluetoothCheck() async throws {
        let calls = Mutex(0)
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        var control = BridgeControl()
        control.checkBluetooth = {
            calls.withLock { $0 += 1 }
            for await _ in gate { break }
            return BluetoothHealth(bus: true, bluez: false, adapters: ["hci0": "unknown"], problems: ["org.bluez not on the bus"])
        }
        let bridge = try Bridge(configuration: Configuration(), store: try BridgeStore.inMemory(), mqtt: FakeMQTT(), central: FakeCentral([:]),
                                drivers: { _ in TestDriver() }, control: control)
        let health = try #require(bridge.extensions.health)
        async let a = health.check()
        async let b = health.check()
        async let c = health.check()
        #expect(await eventually { calls.withLock { $0 } == 1 && health.bluetoothWaiters.withLock { $0?.count } == 2 })
        open.yield()
        let results = await [a, b, c]
        #expect(calls.withLock { $0 } == 1)
        for r in results {
            #expect(r["healthy"] == false && r["reasons"] == ["org.bluez not on the bus"] && r["checks"]?["bluez"] == false, "\(r)")
        }
    }
}
