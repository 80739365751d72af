import BinaryCoding
import BridgeConfig
import Testing

/// Several adapters in one bridge (issue 14 §1, docs/configuration.md): `bluetooth.adapters`,
/// the single `bluetooth.adapter`, `bluetooth.max_connections`, a device's `adapter` pin; each
/// error with its key path and line; the environment; devices as JSON.
@Suite struct AdapterConfigTests {
    func error(_ yaml: String, environment: [String: String] = [:]) -> ConfigError? {
        do { _ = try Configuration(yaml: yaml, environment: environment); return nil } catch { return error }
    }

    static let twoDevices = """
        devices:
          - {id: camera, address: "C0:FF:EE:00:00:01", profile: gopro}
          - {id: glasses, address: "C0:FF:EE:00:00:02", profile: rokid, adapter: hci1}
        """

    @Test func defaults() throws {
        let c = try Configuration(yaml: "")
        #expect(c.bluetooth.adapters == ["hci0"] && c.bluetooth.adapter == "hci0")
        #expect(c.bluetooth.maxConnections == 7)
        #expect(c.adapterPins.isEmpty)
    }

    @Test func severalAdapters() throws {
        let c = try Configuration(yaml: """
            bluetooth:
              adapters: [hci1, hci0, hci12]
              max_connections: 5
            devices:
              - {id: camera, address: "c0:ff:ee:00:00:01", profile: gopro, adapter: hci12}
              - {id: glasses, address: "C0:FF:EE:00:00:02", profile: rokid}
              - {id: other, name_pattern: "^Rokid", profile: rokid, adapter: hci0}
            """)
        #expect(c.bluetooth.adapters == ["hci1", "hci0", "hci12"])
        #expect(c.bluetooth.adapter == "hci1")
        #expect(c.bluetooth.maxConnections == 5)
        #expect(c.devices.map(\.adapter) == ["hci12", nil, "hci0"])
        #expect(c.adapterPins == ["C0:FF:EE:00:00:01": "hci12"])
        #expect(c.pinsWithoutAddress == ["other"])
        // A block list is the same.
        let block = try Configuration(yaml: "bluetooth:\n  adapters:\n    - hci0\n    - hci1\n")
        #expect(block.bluetooth.adapters == ["hci0", "hci1"])
    }

    @Test func theSingleAdapterKeyStillWorks() throws {
        let c = try Configuration(yaml: "bluetooth:\n  adapter: hci1\n" + Self.twoDevices)
        #expect(c.bluetooth.adapters == ["hci1"] && c.bluetooth.adapter == "hci1")
        #expect(c.adapterPins == ["C0:FF:EE:00:00:02": "hci1"])
        // The computed property sets the one adapter.
        var b = BluetoothSettings()
        b.adapters = ["hci0", "hci1"]
        b.adapter = "hci3"
        #expect(b.adapters == ["hci3"])
    }

    @Test func adapterErrors() {
        #expect(error("bluetooth:\n  adapter: hci0\n  adapters: [hci0, hci1]") == ConfigError(
            path: "bluetooth", line: 3,
            message: "adapter and adapters both given: keep one (adapter: hci0 for one adapter, adapters: [hci0, hci1] for several)"))
        #expect(error("bluetooth:\n  adapters: [hci0]\n  adapter: hci1")?.line == 3)
        #expect(error("bluetooth:\n  adapters: []") == ConfigError(path: "bluetooth.adapters", line: 2, message: "expected at least one adapter, like [hci0]"))
        #expect(error("bluetooth:\n  adapters: hci0") == ConfigError(path: "bluetooth.adapters", line: 2, message: "expected a list of adapter names like [hci0, hci1]"))
        #expect(error("bluetooth:\n  adapters:\n    - hci0\n    - usb1") == ConfigError(
            path: "bluetooth.adapters[1]", line: 4, message: "'usb1' is not an adapter name like hci0"))
        #expect(error("bluetooth:\n  adapters: [hci0, hci1, hci0]") == ConfigError(path: "bluetooth.adapters[2]", line: 2, message: "hci0 is listed twice"))
        #expect(error("bluetooth:\n  adapters: [hci0, {a: 1}]")?.path == "bluetooth.adapters[1]")
        for bad in ["hci", "HCI0", "hci-1", "hci 0", "\"\"", "/org/bluez/hci0"] {
            #expect(error("bluetooth:\n  adapter: \(bad)")?.path == "bluetooth.adapter", "\(bad)")
        }
        #expect(error("bluetooth:\n  adapter: usb0") == ConfigError(path: "bluetooth.adapter", line: 2, message: "'usb0' is not an adapter name like hci0"))
        #expect(error("bluetooth:\n  max_connections: 0") == ConfigError(path: "bluetooth.max_connections", line: 2, message: "0 is out of range 1…32"))
        #expect(error("bluetooth:\n  max_connections: 33")?.message == "33 is out of range 1…32")
        #expect(error("bluetooth:\n  max_connections: many")?.message == "expected an integer")
        #expect(throws: Never.self) { try Configuration(yaml: "bluetooth:\n  max_connections: 32") }
    }

    @Test func aPinMustBeOneOfTheAdapters() {
        let yaml = """
            bluetooth:
              adapters: [hci0, hci1]
            devices:
              - {id: a, address: "C0:FF:EE:00:00:01", profile: gopro}
              - {id: b, address: "C0:FF:EE:00:00:02", profile: gopro, adapter: hci1}
              - id: c
                address: C0:FF:EE:00:00:03
                profile: gopro
                adapter: hci2
            """
        #expect(error(yaml) == ConfigError(path: "devices[2].adapter", line: 9,
                                           message: "'hci2' is not one of the bridge's adapters (bluetooth.adapters: hci0, hci1)"))
        // With the default adapter, and with the section after the devices.
        #expect(error(Self.twoDevices) == ConfigError(path: "devices[1].adapter", line: 3,
                                                      message: "'hci1' is not one of the bridge's adapters (bluetooth.adapters: hci0)"))
        #expect(error(Self.twoDevices + "\nbluetooth:\n  adapters: [hci0, hci1]") == nil)
        // The form is checked where the key is.
        #expect(error("devices:\n  - {id: a, address: \"C0:FF:EE:00:00:01\", profile: gopro, adapter: bt0}") == ConfigError(
            path: "devices[0].adapter", line: 2, message: "'bt0' is not an adapter name like hci0"))
    }

    @Test func environment() throws {
        let c = try Configuration(yaml: "bluetooth:\n  adapter: hci0\n" + Self.twoDevices, environment: [
            "GATT2MQTT_BLUETOOTH_ADAPTERS": "hci0, hci1", "GATT2MQTT_BLUETOOTH_MAX_CONNECTIONS": "10",
        ])
        #expect(c.bluetooth.adapters == ["hci0", "hci1"] && c.bluetooth.maxConnections == 10)
        // The single adapter from the environment replaces the file's list.
        let one = try Configuration(yaml: "bluetooth:\n  adapters: [hci0, hci1]", environment: ["GATT2MQTT_BLUETOOTH_ADAPTER": "hci2"])
        #expect(one.bluetooth.adapters == ["hci2"])

        #expect(error("", environment: ["GATT2MQTT_BLUETOOTH_ADAPTERS": "hci0,hci0"]) == ConfigError(
            path: "bluetooth.adapters (from GATT2MQTT_BLUETOOTH_ADAPTERS)", line: nil, message: "hci0 is listed twice"))
        #expect(error("", environment: ["GATT2MQTT_BLUETOOTH_ADAPTERS": ""]) == ConfigError(
            path: "bluetooth.adapters (from GATT2MQTT_BLUETOOTH_ADAPTERS)", line: nil, message: "expected at least one adapter, like [hci0]"))
        #expect(error("", environment: ["GATT2MQTT_BLUETOOTH_ADAPTERS": "hci0,,hci1"])?.message == "'' is not an adapter name like hci0")
        #expect(error("", environment: ["GATT2MQTT_BLUETOOTH_ADAPTER": "bt0"]) == ConfigError(
            path: "bluetooth.adapter (from GATT2MQTT_BLUETOOTH_ADAPTER)", line: nil, message: "'bt0' is not an adapter name like hci0"))
        #expect(error("", environment: ["GATT2MQTT_BLUETOOTH_MAX_CONNECTIONS": "99"]) == ConfigError(
            path: "bluetooth.max_connections (from GATT2MQTT_BLUETOOTH_MAX_CONNECTIONS)", line: nil, message: "99 is out of range 1…32"))
        #expect(error("", environment: ["GATT2MQTT_BLUETOOTH_ADAPTER": "hci0", "GATT2MQTT_BLUETOOTH_ADAPTERS": "hci0,hci1"]) == ConfigError(
            path: "GATT2MQTT_BLUETOOTH_ADAPTER", line: nil,
            message: "not with GATT2MQTT_BLUETOOTH_ADAPTERS: set one (GATT2MQTT_BLUETOOTH_ADAPTERS=hci0,hci1 for several)"))
        // A pin is checked against the adapters after the environment, at the pin's line.
        #expect(error(Self.twoDevices, environment: ["GATT2MQTT_BLUETOOTH_ADAPTERS": "hci0,hci2"]) == ConfigError(
            path: "devices[1].adapter", line: 3, message: "'hci1' is not one of the bridge's adapters (bluetooth.adapters: hci0, hci2)"))
    }

    @Test func devicesAsJSON() throws {
        let c = try Configuration(yaml: "bluetooth:\n  adapters: [hci0, hci1]\n" + Self.twoDevices)
        let glasses = c.devices[1]
        #expect(glasses.json.objectValue?["adapter"] == "hci1")
        #expect(c.devices[0].json.objectValue?["adapter"] == nil)
        #expect(try DeviceConfig(json: glasses.json) == glasses)
        #expect(try DeviceConfig(json: glasses.json, adapters: ["hci0", "hci1"]) == glasses)
        // The bridge's adapters known: a pin must be one of them; unknown: only the form.
        #expect(throws: ConfigError(path: "device.adapter", line: nil, message: "'hci1' is not one of the bridge's adapters (bluetooth.adapters: hci0)")) {
            try DeviceConfig(json: glasses.json, adapters: ["hci0"])
        }
        var other = glasses.json.objectValue ?? [:]
        other["adapter"] = "hci7"
        #expect(try DeviceConfig(json: .object(other)).adapter == "hci7")
        other["adapter"] = "radio"
        #expect(throws: ConfigError(path: "device.adapter", line: nil, message: "'radio' is not an adapter name like hci0")) {
            try DeviceConfig(json: .object(other))
        }
    }
}
