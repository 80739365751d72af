import BinaryCoding
import Testing
@testable import BridgeConfig

/// Devices as JSON (bridge/request/device/add, runtime devices in the store): the file's rules.
@Suite struct DeviceJSONTests {
    @Test func roundTripsThroughJSON() throws {
        let yaml = """
            devices:
              - id: heart_rate
                name: Strap
                address: c0:ff:ee:00:00:03
                profile: custom
                offline: {policy: latest, deadline: 90s}
                command_timeout: 1500ms
                characteristics:
                  - {uuid: 2A37, codec: layout, layout: "builtin:heart_rate_measurement", direction: notify, topic: heart_rate}
                  - {uuid: 2A19, codec: layout, layout: "builtin:battery_level", direction: [read, notify], poll: 5m, topic: battery}
              - id: camera
                name_pattern: "GoPro [0-9]+"
                profile: gopro
            """
        let file = try Configuration(yaml: yaml)
        for d in file.devices {
            #expect(try DeviceConfig(json: d.json) == d)
        }
        let hr = try #require(file.devices.first)
        #expect(hr.json.objectValue?["command_timeout"] == "1500ms")
        #expect(hr.json.objectValue?["address"] == "C0:FF:EE:00:00:03")
    }

    @Test func errorsNameThePathWithoutLines() throws {
        func error(_ text: String) -> String? {
            guard let json = try? JSONValue(parsing: text) else { return "bad test JSON" }
            do { _ = try DeviceConfig(json: json); return nil } catch { return error.description }
        }
        #expect(error(#"{"id":"x","profile":"gopro"}"#) == "device: needs an address or a name_pattern")
        #expect(error(#"{"id":"x","profile":"Toaster!","address":"C0:FF:EE:00:00:09"}"#)?.hasPrefix("device.profile: ") == true)
        #expect(error(#"{"id":"x y","profile":"gopro","address":"C0:FF:EE:00:00:09"}"#)?.hasPrefix("device.id: 'x y' may only contain") == true)
        #expect(error(#"{"id":"x","profile":"gopro","address":"nope"}"#) == "device.address: 'nope' is not a Bluetooth address like C0:FF:EE:00:00:01 (or, for a passive device, a prefix pattern like A4:C1:38:*)")
        #expect(error(#"{"id":"x","profile":"gopro","address":"C0:FF:EE:00:00:09","colour":"red"}"#)?.hasPrefix("device.colour: unknown key") == true)
        #expect(error(#"[1]"#) == "device: expected an object")
    }

    @Test func optionsChangeOnlyTheOptionKeys() throws {
        let d = try DeviceConfig(json: try JSONValue(parsing: """
            {"id":"hr","address":"C0:FF:EE:00:00:03","profile":"custom",
             "characteristics":[{"uuid":"2A19","codec":"layout","layout":"builtin:battery_level","direction":"read","topic":"battery"}]}
            """))
        let changed = try d.applying(options: try JSONValue(parsing: """
            {"offline":{"policy":"reject"},"command_timeout":"2s","availability_timeout":"10m","poll":{"battery":"30s"},"name":"Strap"}
            """).objectValue!)
        #expect(changed.offlinePolicy == .reject && changed.offlineDeadline == d.offlineDeadline)
        #expect(changed.commandTimeout == .seconds(2) && changed.availabilityTimeout == .seconds(600) && changed.name == "Strap")
        #expect(changed.characteristics.first?.pollInterval == .seconds(30))
        let off = try changed.applying(options: ["poll": ["battery": "0"]])
        #expect(off.characteristics.first?.pollInterval == nil)
        #expect(throws: ConfigError.self) { try d.applying(options: ["address": "C0:FF:EE:00:00:05"]) }
        #expect(throws: ConfigError.self) { try d.applying(options: ["poll": ["heart": "1s"]]) }
        #expect(throws: ConfigError.self) { try d.applying(options: ["offline": ["policy": "sometimes"]]) }
        #expect(throws: ConfigError.self) { try d.applying(options: ["command_timeout": "soon"]) }
    }
}
