import Foundation
import Testing

@Suite struct CheckConfigCLITests {
    static let configDir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../config").standardized.path

    @Test func acceptsTheShippedDemo() async throws {
        let r = try await CLI.run(["check-config", Self.configDir + "/demo.yaml"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("6 device(s)"))
    }

    @Test func typoIsOneLineWithPathAndLine() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bad-\(UUID().uuidString).yaml")
        try "devices:\n  - id: x\n    adress: C0:FF:EE:00:00:01\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let r = try await CLI.run(["check-config", file.path])
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.contains("line 3: devices[0].adress: unknown key") == true)
    }

    /// Several adapters (issue 14 §1): the summary names them and the pins; a pin to an adapter
    /// the bridge does not have is one line with the key path and line.
    @Test func severalAdaptersAndPins() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("adapters-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: file) }
        let yaml = """
            bluetooth:
              adapters: [hci0, hci1]
              max_connections: 4
            devices:
              - {id: camera, address: "C0:FF:EE:00:00:01", profile: gopro, adapter: hci1}
              - {id: glasses, address: "C0:FF:EE:00:00:02", profile: rokid}
            """
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        let r = try await CLI.run(["check-config", file.path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("adapters hci0, hci1 (at most 4 links each), 2 device(s)"), "\(r.stdout)")
        #expect(r.stdout.contains("camera: gopro at C0:FF:EE:00:00:01 through hci1, offline policy queue"), "\(r.stdout)")
        #expect(r.stdout.contains("glasses: rokid at C0:FF:EE:00:00:02, offline policy queue"), "\(r.stdout)")

        try yaml.replacingOccurrences(of: "[hci0, hci1]", with: "[hci0]").write(to: file, atomically: true, encoding: .utf8)
        let bad = try await CLI.run(["check-config", file.path])
        #expect(bad.status == 1)
        let lines = bad.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(bad.stderr)")
        #expect(lines.first?.contains("line 5: devices[0].adapter: 'hci1' is not one of the bridge's adapters (bluetooth.adapters: hci0)") == true, "\(bad.stderr)")
    }

    /// `command_timeout: 1e300` ended in a trap (exit 132, a backtrace): now one line with the
    /// key path, the line and the limit, and exit 1 (issue 20).
    @Test func aHugeDurationIsOneLineWithPathLineAndLimit() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("huge-\(UUID().uuidString).yaml")
        try "devices:\n  - id: cam\n    address: C0:FF:EE:00:00:01\n    profile: gopro\n    command_timeout: 1e300\n"
            .write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        try await CLI.expectOneLineFailure(["check-config", file.path],
                                           mentioning: "line 5: devices[0].command_timeout: '1e300' is above the maximum of 31536000 s (365d)")
    }

    /// The commands' `--seconds` and interval options go through the same checked parser: a
    /// huge, infinite or NaN number is one line naming the option and the limit (`simulate
    /// --seconds 1e300` used to start and then trap).
    @Test func hugeSecondsOptionsAreOneLineFailures() async throws {
        try await CLI.expectOneLineFailure(["simulate", "--seconds", "1e300"],
                                           mentioning: "--seconds 1e+300 is above the maximum of 31536000 s (365d)")
        try await CLI.expectOneLineFailure(["simulate", "--heart-rate-interval", "inf"],
                                           mentioning: "--heart-rate-interval inf is not a finite number of seconds")
        try await CLI.expectOneLineFailure(["peripherals", "--socket", "/tmp/never-made.sock", "--seconds", "nan"], mentioning: "--seconds nan is not a finite number of seconds")
        try await CLI.expectOneLineFailure(["scan", "--seconds", "1e16"], mentioning: "--seconds 1e+16 is above the maximum of 3600 s")
        try await CLI.expectOneLineFailure(["gatt", "--device", "C0:FF:EE:00:00:01", "--services", "--seconds=-1"],
                                           mentioning: "--seconds -1.0 is negative")
    }

    /// `advertisement_formats` (issue 23): a user's layout format is read, and a mistake inside
    /// one is one line naming its key path and line.
    @Test func advertisementFormatsAreLayoutFormats() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("formats-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: file) }
        let yaml = """
            advertisement_formats:
              leaf:
                match: {manufacturer_id: 0xFFFE, prefix: "4C"}
                layout:
                  fields:
                    - {type: pad, value: "4C"}
                    - {name: wetness, type: u16, unit: "%"}
            devices:
              - {id: bed, address: "C0:FF:EE:00:00:09", profile: advertisement, format: leaf}

            """
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        let r = try await CLI.run(["check-config", file.path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("bed: advertisement at C0:FF:EE:00:00:09"), "\(r.stdout)")

        try yaml.replacingOccurrences(of: "type: u16", with: "type: u17").write(to: file, atomically: true, encoding: .utf8)
        try await CLI.expectOneLineFailure(["check-config", file.path],
                                           mentioning: "line 7: advertisement_formats.leaf.layout.fields[1].type:")
        try yaml.replacingOccurrences(of: "prefix: \"4C\"", with: "prefix: \"4\"").write(to: file, atomically: true, encoding: .utf8)
        try await CLI.expectOneLineFailure(["check-config", file.path],
                                           mentioning: "line 3: advertisement_formats.leaf.match.prefix: expected 1…31 bytes as hex text")
    }

    @Test func missingFile() async throws {
        let r = try await CLI.run(["check-config", "/nonexistent/gatt2mqtt.yaml"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("cannot read"))
    }
}

/// A "billion laughs" YAML file (nine levels of nine aliases) is refused at once, naming the line.
@Suite struct YAMLAliasCLITests {
    /// A "billion laughs" file (`Tests/TestSupport/Fixtures/billion-laughs.yaml`, also used by YAMLTests).
    static let billionLaughs = try! String(
        contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("TestSupport/Fixtures/billion-laughs.yaml"), encoding: .utf8)

    @Test func checkConfigAndLayoutRefuseItFast() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("lol-\(UUID().uuidString).yaml")
        try Self.billionLaughs.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        // Refused with the alias named, before anything expands it (it took 28 s and 1.6 GB when
        // expanded; no timing is asserted: a loaded machine's seconds prove nothing).
        let r = try await CLI.run(["check-config", file.path])
        #expect(r.status == 1)
        #expect(r.stderr.contains("line 1: b[0]: YAML anchors and aliases are not supported"), "\(r.stderr)")
        try await CLI.expectOneLineFailure(["layout", "show", "--layout", file.path], mentioning: "YAML line 1: anchors and aliases are not supported")
    }
}
