import BinaryCoding
import BridgeConfig
import Foundation
import Testing

/// Passive devices (`profile: advertisement`) and `advertisement_formats` in the file
/// (docs/configuration.md "Passive devices"): the keys, their defaults, and each error with its
/// key path and line.
@Suite struct PassiveConfigTests {
    func error(_ yaml: String) -> ConfigError? {
        do { _ = try Configuration(yaml: yaml); return nil } catch { return error }
    }

    static let key = "00112233445566778899aabbccddeeff"

    @Test func aPassiveDeviceWithItsKeysAndDefaults() throws {
        let c = try Configuration(yaml: """
            devices:
              - id: porch
                address: a4:c1:38:00:00:01
                profile: advertisement
                format: bthome
                bindkey: \(Self.key.uppercased())
                min_interval: 30s
              - id: shed
                address: A4:C1:38:*
                profile: advertisement
                format: atc
                availability_timeout: 5m
            """)
        let porch = c.devices[0], shed = c.devices[1]
        #expect(porch.isPassive && porch.format == "bthome" && porch.address == "A4:C1:38:00:00:01")
        #expect(porch.bindkey == Array(0x00...0xFF).filter { $0 % 0x11 == 0 }.map(UInt8.init))
        #expect(porch.minInterval == .seconds(30))
        #expect(porch.availabilityTimeout == DeviceConfig.passiveAvailabilityTimeout)  // 900 s, Home Assistant's
        #expect(shed.availabilityTimeout == .seconds(300) && shed.minInterval == .zero && shed.bindkey == nil)
        #expect(shed.addressIsPattern && shed.matchesAddress("a4:c1:38:12:34:56") && !shed.matchesAddress("A4:C1:39:12:34:56"))
        #expect(porch.matchesAddress("A4:C1:38:00:00:01") && !porch.matchesAddress("A4:C1:38:00:00:02"))
        // The device's JSON keeps the key for the store; what is published redacts it.
        #expect(try DeviceConfig(json: porch.json) == porch)
        #expect(porch.json.objectValue?["bindkey"] == .string(Self.key))
        #expect(porch.publicJSON.objectValue?["bindkey"] == .string(Configuration.redacted))
        #expect(!c.json.jsonText.contains(Self.key))
        #expect(try DeviceConfig(json: shed.json) == shed)
    }

    @Test func theKeyFromAFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("passive-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let good = dir.appendingPathComponent("porch.key").path
        let bad = dir.appendingPathComponent("bad.key").path
        try Data((Self.key + "\n").utf8).write(to: URL(fileURLWithPath: good))
        try Data("not a key\n".utf8).write(to: URL(fileURLWithPath: bad))
        func yaml(_ file: String) -> String {
            """
            devices:
              - id: porch
                address: A4:C1:38:00:00:01
                profile: advertisement
                format: bthome
                bindkey_file: \(file)
            """
        }
        let c = try Configuration(yaml: yaml(good))
        #expect(c.devices[0].bindkey.map { Hex.encode($0) } == Self.key)
        #expect(c.devices[0].bindkeyFile == good)
        // The file's path is what the JSON gives (and the key is read again from it).
        #expect(c.devices[0].json.objectValue?["bindkey"] == nil)
        #expect(try DeviceConfig(json: c.devices[0].json) == c.devices[0])
        let missing = try #require(error(yaml(dir.appendingPathComponent("none.key").path)))
        #expect(missing.path == "devices[0].bindkey_file" && missing.line == 6 && missing.message.contains("none.key"))
        let wrong = try #require(error(yaml(bad)))
        #expect(wrong.path == "devices[0].bindkey_file" && wrong.line == 6 && wrong.message.contains("32 hex digits"))
    }

    @Test func errorsNameTheKeyAndLine() throws {
        func device(_ lines: String, profile: String = "advertisement") -> String {
            "devices:\n  - id: porch\n    address: A4:C1:38:00:00:01\n    profile: \(profile)\n" + lines
        }
        let noFormat = try #require(error(device("")))
        #expect(noFormat.path == "devices[0].format" && noFormat.message.contains("required"))
        let both = try #require(error(device("    format: bthome\n    bindkey: \(Self.key)\n    bindkey_file: /k\n")))
        #expect(both.path == "devices[0]" && both.line == 7 && both.message.contains("bindkey and bindkey_file"))
        let shortKey = try #require(error(device("    format: bthome\n    bindkey: 0011\n")))
        #expect(shortKey.path == "devices[0].bindkey" && shortKey.line == 6 && shortKey.message.contains("32 hex digits"))
        let mappings = try #require(error(device("    format: bthome\n    characteristics:\n      - uuid: 2A37\n")))
        #expect(mappings.path == "devices[0].characteristics" && mappings.message.contains("no characteristics"))
        let onCustom = try #require(error(device("    format: bthome\n", profile: "custom")))
        #expect(onCustom.path == "devices[0].format" && onCustom.line == 5 && onCustom.message.contains("only for profile: advertisement"))
        let pattern = try #require(error("devices:\n  - id: cam\n    address: A4:C1:38:*\n    profile: gopro\n"))
        #expect(pattern.path == "devices[0].address" && pattern.message.contains("only for a passive device"))
        let badPattern = try #require(error(device("    format: bthome\n").replacingOccurrences(of: "A4:C1:38:00:00:01", with: "A4:C1:3*")))
        #expect(badPattern.path == "devices[0].address" && badPattern.line == 3)
        let noAddress = try #require(error("devices:\n  - id: p\n    name_pattern: ATC\n    profile: advertisement\n    format: atc\n"))
        #expect(noAddress.path == "devices[0].address" && noAddress.message.contains("required for a passive device"))
    }

    @Test func userFormats() throws {
        let c = try Configuration(yaml: """
            advertisement_formats:
              my_plant:
                match: {service_data: FFF0}
                fields: [{name: moisture, type: u8}]
            """)
        #expect(c.advertisementFormats["my_plant"]?.objectValue?["match"] != nil)
        #expect(c.lines["advertisement_formats.my_plant"] == 2)
        #expect(c.json.objectValue?["advertisement_formats"]?.objectValue?["my_plant"] == c.advertisementFormats["my_plant"])
        let name = try #require(error("advertisement_formats:\n  My-Plant: {a: 1}\n"))
        #expect(name.path == "advertisement_formats.My-Plant" && name.line == 2 && name.message.contains("not a format name"))
        let notMap = try #require(error("advertisement_formats:\n  plant: 5\n"))
        #expect(notMap.path == "advertisement_formats.plant" && notMap.line == 2)
        let notMapping = try #require(error("advertisement_formats: [a]\n"))
        #expect(notMapping.path == "advertisement_formats")
    }

    /// A profile's whole-file check runs after loading; its error gets the line of the key it names.
    @Test func profilesCheckTheWholeFileWithLines() throws {
        struct Refuses: ProfileRules {
            let id: ProfileID = .advertisement
            func validate(configuration: Configuration) throws(ConfigError) {
                throw ConfigError(path: "devices[0].format", line: nil, message: "'\(configuration.devices[0].format ?? "")' is not a format")
            }
        }
        struct Custom: ProfileRules { let id: ProfileID = .custom }
        let yaml = "devices:\n  - id: porch\n    address: A4:C1:38:00:00:01\n    profile: advertisement\n    format: nope\n"
        do {
            _ = try Configuration(yaml: yaml, profiles: [Refuses(), Custom()])
            Issue.record("expected an error")
        } catch {
            #expect(error.path == "devices[0].format" && error.line == 5 && error.message == "'nope' is not a format")
        }
    }
}
