import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import BridgeCore

/// `bridge/request/…` over fakes: the registry, its persistence and precedence, the scan's guess.
@Suite struct BridgeRequestTests {
    static let fileDevice: DeviceConfig = {
        var d = DeviceConfig(id: "dev", profile: .custom)
        d.address = "C0:FF:EE:00:00:09"
        d.characteristics = [CharacteristicMapping(uuid: "FFF2", codec: .raw, directions: [.notify], topic: "reading")]
        return d
    }()

    static let strap = Advertisement(address: "C0:FF:EE:00:00:0A", name: "Strap", rssi: -60,
                                     serviceUUIDs: ["0000180d-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb"])

    static func bridge(_ store: BridgeStore, _ mqtt: FakeMQTT, central: FakeAdapterCentral, devices: [DeviceConfig] = [fileDevice]) throws -> Bridge {
        var config = Configuration()
        config.mqtt.reconnectMin = .milliseconds(20)
        config.mqtt.reconnectMax = .milliseconds(40)
        config.devices = devices
        return try Bridge(configuration: config, store: store, mqtt: mqtt, central: central, drivers: { _ in TestDriver() },
                          tick: .milliseconds(10))
    }

    static func central() -> FakeAdapterCentral {
        FakeAdapterCentral(FakeCentral(["C0:FF:EE:00:00:09": FakeDevice(), "C0:FF:EE:00:00:0A": FakeDevice()]),
                           advertisements: [strap, Advertisement(address: "C0:FF:EE:00:00:09", rssi: -70)])
    }

    static func request(_ bridge: Bridge, _ mqtt: FakeMQTT, _ action: String, _ body: String) async throws -> JSONValue {
        let before = mqtt.messages("gatt2mqtt/bridge/response/\(action)").count
        bridge.handle(InboundMessage(topic: "gatt2mqtt/bridge/request/\(action)", payload: Array(body.utf8)))
        let all = try await mqtt.wait(for: "gatt2mqtt/bridge/response/\(action)", count: before + 1, timeout: .seconds(20))  // a deadline: device/add waits up to its own timeout (5 s) first, on a loaded machine longer
        return try JSONValue(parsing: all[before].payload)
    }

    static func running(_ bridge: Bridge, _ body: () async throws -> Void) async throws {
        try await bridge.running(body)
    }

    /// `bridge/info`: every configured adapter in `adapters`, the first in `adapter` (issue 14 §1).
    @Test func infoListsTheAdapters() throws {
        var config = Configuration()
        config.bluetooth.adapters = ["hci1", "hci0"]
        let bridge = try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: FakeMQTT(), central: Self.central(),
                                drivers: { _ in TestDriver() }, tick: .milliseconds(10))
        #expect(bridge.info["adapter"] == "hci1")
        #expect(bridge.info["adapters"] == ["hci1", "hci0"])
    }

    /// The bridge device's scan switch (Home Assistant discovery) drives the scan through
    /// `bridge/request/scan` as its config says, and its state follows `bridge/info`: on while
    /// the scan runs, off once it is stopped; the restart-required sensor is off.
    @Test func theScanSwitchOfHomeAssistantStartsAndStopsTheScan() async throws {
        var config = Configuration()
        config.homeAssistant.enabled = true
        config.devices = [Self.fileDevice]
        let mqtt = FakeMQTT()
        let central = Self.central()
        let bridge = try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: mqtt, central: central,
                                drivers: { _ in TestDriver() }, tick: .milliseconds(10))
        let entities = try #require(bridge.discovery).bridgeEntities()
        func shown(_ object: String, _ info: OutboundMessage?) throws -> String? {
            let state = try #require(entities.first { $0.object == object }?.state)
            let message = try #require(info)
            let json = try JSONValue(parsing: message.payload)
            return state.rendered(in: try #require(json.objectValue))
        }
        try await Self.running(bridge) {
            let configs = try await mqtt.wait(for: "homeassistant/switch/gatt2mqtt_bridge/scan/config")
            let scan = try JSONValue(parsing: configs[0].payload)
            let command = try #require(scan["command_topic"]?.stringValue)
            let on = try #require(scan["payload_on"]?.stringValue)
            let off = try #require(scan["payload_off"]?.stringValue)
            #expect(scan["state_topic"] == "gatt2mqtt/bridge/info")
            let first = try await mqtt.wait(for: "gatt2mqtt/bridge/info")
            #expect(try shown("scan", first.last) == "OFF" && shown("restart_required", first.last) == "OFF")
            bridge.handle(InboundMessage(topic: command, payload: Array(on.utf8)))
            let running = try await mqtt.wait(for: "gatt2mqtt/bridge/info", "bridge/info while scanning") {
                $0.contains { $0.text.contains(#""scanning":true"#) }
            }
            #expect(try shown("scan", running.last) == "ON")
            _ = try await mqtt.wait(for: "gatt2mqtt/bridge/scan")
            bridge.handle(InboundMessage(topic: command, payload: Array(off.utf8)))
            let stopped = try await mqtt.wait(for: "gatt2mqtt/bridge/info", "bridge/info after the scan") {
                $0.last?.text.contains(#""scanning":false"#) == true && $0.contains { $0.text.contains(#""scanning":true"#) }
            }
            #expect(try shown("scan", stopped.last) == "OFF")
            #expect(central.log.calls == ["scan", "stop"])
        }
    }

    /// The frontend's address as configured (`frontend.url`, else its listen address) is the
    /// devices' `configuration_url` in the bridge's discovery; no frontend, no link.
    @Test func theFrontendsAddressIsTheDevicesConfigurationURL() throws {
        func url(_ frontend: FrontendSettings?) throws -> JSONValue? {
            var config = Configuration()
            config.homeAssistant.enabled = true
            config.devices = [Self.fileDevice]
            config.frontend = frontend
            let bridge = try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: FakeMQTT(), central: Self.central(),
                                    drivers: { _ in TestDriver() }, tick: .milliseconds(10))
            let first = try #require(bridge.discoveryMessages(for: Self.fileDevice).first)
            return try JSONValue(parsing: first.payload)["device"]?["configuration_url"]
        }
        var frontend = FrontendSettings(host: "192.168.1.20", port: 8080, authTokenFile: "/etc/gatt2mqtt/token")
        #expect(try url(frontend) == "http://192.168.1.20:8080/#/device/dev")
        frontend.url = "https://gw.example/gatt2mqtt/"
        #expect(try url(frontend) == "https://gw.example/gatt2mqtt/#/device/dev")
        #expect(try url(FrontendSettings(host: "0.0.0.0", port: 8080, allowUnauthenticated: true)) == nil)
        #expect(try url(nil) == nil)
    }

    /// `bridge/info`'s `config_schema`: the configuration's JSON Schema (docs/config-schema.json),
    /// with this bridge's profiles as the choices of a device's `profile`.
    @Test func infoCarriesTheConfigurationSchema() throws {
        let bridge = try Bridge(configuration: Configuration(), store: try BridgeStore.inMemory(), mqtt: FakeMQTT(), central: Self.central(),
                                drivers: { _ in TestDriver() }, tick: .milliseconds(10))
        let ids = bridge.profiles.profiles.map(\.id)
        #expect(!ids.isEmpty)
        let schema = try #require(bridge.info["config_schema"])
        #expect(schema == ConfigSchema.json(profiles: ids))
        #expect(schema["properties"]?["devices"]?["items"]?["properties"]?["profile"]?["enum"] == .array(ids.map { .string($0.rawValue) }))
    }

    @Test func scanGuessAddsTheDeviceWhichSurvivesARestartAndYieldsToTheFile() async throws {
        let store = try BridgeStore.inMemory()
        let central = Self.central()
        let mqtt = FakeMQTT()
        let first = try Self.bridge(store, mqtt, central: central)
        try await Self.running(first) {
            let scan = try await Self.request(first, mqtt, "scan", #"{"seconds":5,"transaction":1}"#)
            #expect(scan == ["status": "ok", "data": ["scanning": true, "seconds": 5.0], "transaction": 1])
            let seen = try await mqtt.wait(for: "gatt2mqtt/bridge/scan", count: 2)
            // One result per device, in the order the adapter reports them (either).
            #expect(Set(seen.map(\.text)) == [
                #"{"address":"C0:FF:EE:00:00:09","name":null,"rssi":-70,"service_uuids":[],"manufacturer_data":{},"service_data":{},"configured":true,"device":"dev","profile_guess":null,"connected":false,"paired":false}"#,
                #"{"address":"C0:FF:EE:00:00:0A","name":"Strap","rssi":-60,"service_uuids":["180D","180F"],"manufacturer_data":{},"service_data":{},"configured":false,"profile_guess":"heart_rate","connected":false,"paired":false}"#,
            ])
            // The configured device's RSSI reaches its state (its diagnostic entity).
            let state = try await mqtt.wait(for: "gatt2mqtt/dev", "a state with the RSSI") { $0.contains { $0.text.contains(#""rssi":-70"#) } }
            #expect(state.contains { (try? JSONValue(parsing: $0.payload))?.objectValue?["rssi"] == -70 })
            let added = try await Self.request(first, mqtt, "device/add", #"{"id":"strap","address":"C0:FF:EE:00:00:0A"}"#)
            #expect(added.objectValue?["status"] == "ok", "\(added.jsonText)")
            #expect(added.objectValue?["data"]?.objectValue?["profile"] == "heart_rate")
            let topics = added.objectValue?["data"]?.objectValue?["device"]?.objectValue?["characteristics"]?.arrayValue?.compactMap { $0.objectValue?["topic"]?.stringValue }
            #expect(topics == ["heart_rate", "battery"], "the template, with battery since 180F is advertised")
            let stop = try await Self.request(first, mqtt, "scan", #"{"seconds":0}"#)
            #expect(stop.objectValue?["data"] == ["scanning": false])
            #expect(central.log.calls == ["scan", "stop"])
        }
        #expect(try store.runtimeDevices().map(\.id) == ["strap"])

        // A restart: the runtime device is back, after the file's.
        let mqtt2 = FakeMQTT()
        let second = try Self.bridge(store, mqtt2, central: Self.central())
        try await Self.running(second) {
            let devices = try await mqtt2.wait(for: "gatt2mqtt/bridge/devices")
            let list = try JSONValue(parsing: devices[0].payload).arrayValue ?? []
            #expect(list.map { $0.objectValue?["id"] } == ["dev", "strap"])
            #expect(list.map { $0.objectValue?["source"] } == ["file", "mqtt"])
            _ = try await mqtt2.wait(for: "gatt2mqtt/strap/availability")
        }

        // The file now has that address: the runtime device yields.
        var fileStrap = DeviceConfig(id: "chest", profile: .custom)
        fileStrap.address = "C0:FF:EE:00:00:0A"
        fileStrap.characteristics = Self.fileDevice.characteristics
        let third = try Self.bridge(store, FakeMQTT(), central: Self.central(), devices: [Self.fileDevice, fileStrap])
        #expect(third.deviceConfigs.map(\.id) == ["dev", "chest"])
        #expect(try store.runtimeDevices().isEmpty)
    }

    /// Numbers in requests are checked (issue 20): huge, negative, infinite or not a number is
    /// an `invalid_value` error naming the key and the limit, nothing changes, and the bridge goes
    /// on (`"options":{"command_timeout":"1e16"}` used to kill it).
    @Test func outOfRangeNumbersAreInvalidValues() async throws {
        let store = try BridgeStore.inMemory()
        let mqtt = FakeMQTT()
        let bridge = try Self.bridge(store, mqtt, central: Self.central())
        try await Self.running(bridge) {
            func refused(_ action: String, _ body: String, _ expected: String) async throws {
                let r = try await Self.request(bridge, mqtt, action, body)
                #expect(r.objectValue?["status"] == "error", "\(r.jsonText)")
                #expect(r.objectValue?["code"] == "invalid_value", "\(r.jsonText)")
                #expect(r.objectValue?["error"]?.stringValue == expected, "\(r.jsonText)")
                #expect(r.objectValue?["transaction"] == "t", "\(r.jsonText)")
            }
            let add = #"{"id":"strap","address":"C0:FF:EE:00:00:0A","profile":"heart_rate","transaction":"t""#
            try await refused("device/add", add + #","options":{"command_timeout":"1e16"}}"#,
                              "options.command_timeout: '1e16' is above the maximum of 31536000 s (365d)")
            try await refused("device/add", add + #","options":{"offline":{"deadline":"-5s"}}}"#,
                              "options.offline.deadline: '-5s' is negative (a duration is 0 or more)")
            try await refused("device/add", add + #","options":{"availability_timeout":"nan"}}"#,
                              "options.availability_timeout: 'nan' is not a duration (expected e.g. 500ms, 5s, 2m, 1h or 7d; a bare number is seconds)")
            try await refused("device/add", add + #","timeout":1e300}"#, "timeout: 1e+300 is above the maximum of 300 s")
            try await refused("device/add", add + #","timeout":1e999}"#, "timeout: inf is not a finite number of seconds")
            try await refused("device/add", add + #","timeout":-1}"#, "timeout: -1 is negative (a duration is 0 or more)")
            try await refused("device/add", add + #","timeout":"soon"}"#, "timeout: expected a number of seconds from 0.001 s to 300 s")
            try await refused("scan", #"{"seconds":1e16,"transaction":"t"}"#, "seconds: 1e+16 is above the maximum of 600 s")
            try await refused("scan", #"{"seconds":-5,"transaction":"t"}"#, "seconds: -5 is negative (a duration is 0 or more)")
            try await refused("scan", #"{"seconds":"all","transaction":"t"}"#, "seconds: expected a number of seconds from 0 s to 600 s")
            #expect(bridge.session("strap") == nil)
            #expect(try store.runtimeDevices().isEmpty)
            // A runtime device's options: the same checks.
            let added = try await Self.request(bridge, mqtt, "device/add", add + "}")
            #expect(added.objectValue?["status"] == "ok", "\(added.jsonText)")
            try await refused("device/options", #"{"id":"strap","options":{"command_timeout":1e300},"transaction":"t"}"#,
                              "options.command_timeout: '1e+300' is above the maximum of 31536000 s (365d)")
            try await refused("device/options", #"{"id":"strap","options":{"poll":{"heart_rate":"400d"}},"transaction":"t"}"#,
                              "options.poll.heart_rate: '400d' is above the maximum of 31536000 s (365d)")
            // The bridge goes on: a command to the file's device still works.
            bridge.handle(InboundMessage(topic: "gatt2mqtt/dev/set", payload: Array(#"{"command":"ping","value":4}"#.utf8)))
            let ok = try await mqtt.wait(for: "gatt2mqtt/dev/response")
            #expect(ok.last?.text.contains(#""status":"ok""#) == true)
        }
    }

    @Test func aDeviceThatNeverConnectsIsNotAdded() async throws {
        let store = try BridgeStore.inMemory()
        let mqtt = FakeMQTT()
        let bridge = try Self.bridge(store, mqtt, central: Self.central())
        try await Self.running(bridge) {
            let r = try await Self.request(bridge, mqtt, "device/add",
                                           #"{"id":"ghost","address":"C0:FF:EE:00:00:0F","profile":"battery","timeout":5}"#)
            #expect(r.objectValue?["status"] == "error")
            #expect(r.objectValue?["error"]?.stringValue?.hasPrefix("C0:FF:EE:00:00:0F was not connected within 5 s: not_found:") == true, "\(r.jsonText)")
            #expect(r.objectValue?["error"]?.stringValue?.hasSuffix("; nothing was added") == true)
            #expect(bridge.session("ghost") == nil)
            #expect(try store.runtimeDevices().isEmpty && store.devices().map(\.id) == ["dev"])
            // The bridge goes on: a command to the file's device still works.
            bridge.handle(InboundMessage(topic: "gatt2mqtt/dev/set", payload: Array(#"{"command":"ping","value":4}"#.utf8)))
            let ok = try await mqtt.wait(for: "gatt2mqtt/dev/response")
            #expect(ok.last?.text.contains(#""status":"ok""#) == true)
        }
    }

    @Test func fileDevicesAreRefusedAndPairingGoesToTheAdapter() async throws {
        let store = try BridgeStore.inMemory()
        let mqtt = FakeMQTT()
        let central = Self.central()
        let bridge = try Self.bridge(store, mqtt, central: central)
        try await Self.running(bridge) {
            let remove = try await Self.request(bridge, mqtt, "device/remove", #"{"id":"dev"}"#)
            #expect(remove.objectValue?["error"]?.stringValue == "'dev' is defined in the configuration file: edit it there, then send config/reload (or SIGHUP)")
            let unknown = try await Self.request(bridge, mqtt, "device/rename", #"{"from":"nobody","to":"x"}"#)
            #expect(unknown.objectValue?["error"] == "from: no device 'nobody'")
            let reload = try await Self.request(bridge, mqtt, "config/reload", "")
            #expect(reload.objectValue?["error"] == "this bridge has no configuration file to reload")
            let paired = try await Self.request(bridge, mqtt, "pair", #"{"id":"dev"}"#)
            #expect(paired.objectValue?["data"] == ["id": "dev", "paired": true])
            #expect(try store.devices().first?.paired == true)
            let unpaired = try await Self.request(bridge, mqtt, "unpair", #"{"id":"dev"}"#)
            #expect(unpaired.objectValue?["data"] == ["id": "dev", "paired": false])
            #expect(central.log.calls == ["pair C0:FF:EE:00:00:09", "forget C0:FF:EE:00:00:09"])
            let badKey = try await Self.request(bridge, mqtt, "pair", #"{"id":"dev","pin":1234}"#)
            #expect(badKey.objectValue?["error"] == "unknown key 'pin' (expected id)")
        }
    }
}
