import Foundation
import Testing

/// `gatt2mqtt layout decode|encode` contract: JSON or lowercase hex on stdout, exit 0; any invalid
/// input exits 1 with exactly one line on stderr.
@Suite struct LayoutCLITests {
    /// Tests/Layouts/<name>, found from this file (a user's clone has it; no ../shared needed).
    static func fixture(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Layouts").appendingPathComponent(name).path
    }

    @Test func decodeBuiltinHeartRate() async throws {
        let r = try await CLI.run(["layout", "decode", "--layout", "builtin:heart_rate_measurement", "164b20033003"])
        #expect(r.status == 0)
        #expect(r.stdout == #"{"sensor_contact_detected":true,"sensor_contact_supported":true,"heart_rate":75,"rr_intervals":[0.78125,0.796875]}"# + "\n")
        #expect(r.stderr.isEmpty)
    }

    @Test func encodeBuiltinTemperature() async throws {
        let r = try await CLI.run([
            "layout", "encode", "--layout", "builtin:temperature_measurement",
            #"{"temperature_fahrenheit":97.5,"time_stamp":{"year":2024,"month":11,"day":22,"hours":12,"minutes":30,"seconds":45},"temperature_type":"body"}"#,
        ])
        #expect(r.status == 0)
        #expect(r.stdout == "07cf0300ffe8070b160c1e2d02\n")
    }

    @Test func stdinInputs() async throws {
        let d = try await CLI.run(["layout", "decode", "--layout", "builtin:battery_level"], stdin: "0x5A\n")
        #expect(d.stdout == #"{"battery_level":90}"# + "\n")
        let e = try await CLI.run(["layout", "encode", "--layout", "builtin:battery_level", "-"], stdin: #"{"battery_level":7}"#)
        #expect(e.stdout == "07\n")
    }

    @Test func yamlLayoutFileBothWays() async throws {
        let file = Self.fixture("env-sensor.yaml")
        // flags 0x17: humidity, label, low battery, mode 1; 21.5 °C; 45.5 %; 1013 hPa; state fault; "hi".
        let hex = "176608c701f503 10 6869"
        let d = try await CLI.run(["layout", "decode", "--layout", file, hex])
        #expect(d.status == 0, "\(d.stderr)")
        #expect(d.stdout == #"{"low_battery":true,"mode":"measuring","temperature":21.5,"humidity":45.5,"pressure":1013,"state":"fault","label":"hi"}"# + "\n")
        let e = try await CLI.run(["layout", "encode", "--layout", file, String(d.stdout.dropLast())])
        #expect(e.status == 0, "\(e.stderr)")
        #expect(e.stdout == hex.replacingOccurrences(of: " ", with: "") + "\n")
        // Without the optional fields the flags follow.
        let short = try await CLI.run(["layout", "encode", "--layout", file, #"{"temperature":-0.5,"pressure":"NRes","state":0}"#])
        #expect(short.stdout == "00ceff000800\n")
    }

    @Test func yamlCoreSchemaScalars() async throws {
        let file = Self.fixture("switch.yaml")
        let d = try await CLI.run(["layout", "decode", "--layout", file, "01ff01"])
        #expect(d.stdout == #"{"power":"on","delay":511}"# + "\n", "\(d.stderr)")
        let e = try await CLI.run(["layout", "encode", "--layout", file, #"{"power":"standby","delay":2}"#])
        #expect(e.stdout == "0a0200\n", "\(e.stderr)")
        try await CLI.expectOneLineFailure(["layout", "decode", "--layout", file, "010002"], mentioning: "above the maximum 511")
        let show = try await CLI.run(["layout", "show", "--layout", file])
        #expect(show.status == 0)
        #expect(show.stdout.contains(#""uuid": "2A56""#))
        #expect(show.stdout.contains(#""0": "off""#))
    }

    @Test func showBuiltin() async throws {
        let r = try await CLI.run(["layout", "show", "--layout", "builtin:temperature_measurement"])
        #expect(r.status == 0)
        #expect(r.stdout.contains(#""type": "medfloat32""#))
    }

    @Test func jsonLayoutFile() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("layout-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("level.json")
        try Data(#"{"fields":[{"name":"level","type":"u16","endian":"big"}]}"#.utf8).write(to: file)
        let r = try await CLI.run(["layout", "decode", "--layout", file.path, "0102"])
        #expect(r.stdout == #"{"level":258}"# + "\n")
        let bad = dir.appendingPathComponent("bad.json")
        try Data(#"{"fields":[{"name":"level","type":"u16",}]}"#.utf8).write(to: bad)
        try await CLI.expectOneLineFailure(["layout", "decode", "--layout", bad.path, "00"], mentioning: "invalid JSON at byte")
    }

    @Test func invalidInputsExitOneWithOneLine() async throws {
        let hr = ["layout", "decode", "--layout", "builtin:heart_rate_measurement"]
        try await CLI.expectOneLineFailure(hr + ["16zz"], mentioning: "invalid hex at character 2")
        try await CLI.expectOneLineFailure(hr + ["1648000403"], mentioning: "need more data: field 'rr_intervals[1]' at byte 4")
        try await CLI.expectOneLineFailure(hr + [""], mentioning: "need more data: field 'flags' at byte 0")
        try await CLI.expectOneLineFailure(["layout", "decode", "--layout", "builtin:battery_level", "6500"], mentioning: "malformed: field 'battery_level' at byte 0")
        try await CLI.expectOneLineFailure(["layout", "decode", "--layout", "builtin:nope", "00"], mentioning: "unknown built-in layout 'nope'")
        try await CLI.expectOneLineFailure(["layout", "decode", "--layout", "/no/such/layout.yaml", "00"], mentioning: "cannot read layout file '/no/such/layout.yaml'")
        try await CLI.expectOneLineFailure(["layout", "decode", "--layout", Self.fixture("bad-unknown-key.yaml"), "00"],
                          mentioning: "invalid layout at fields[1].scael: unknown key 'scael'")
        try await CLI.expectOneLineFailure(["layout", "decode", "--layout", Self.fixture("bad-unknown-key.yaml"), "00"], mentioning: "(line 7)")
        let enc = ["layout", "encode", "--layout", "builtin:heart_rate_measurement"]
        try await CLI.expectOneLineFailure(enc + ["{"], mentioning: "invalid JSON at byte 1")
        try await CLI.expectOneLineFailure(enc + ["[1]"], mentioning: "expected a JSON object")
        try await CLI.expectOneLineFailure(enc + [#"{"heart_rate":"fast"}"#], mentioning: "invalid value at heart_rate")
        try await CLI.expectOneLineFailure(enc + [#"{"heart_rate":72,"colour":1}"#], mentioning: "unknown field 'colour'")
        try await CLI.expectOneLineFailure(["layout", "decode", "164b"], mentioning: "--layout")
    }

    @Test func badYAMLIsOneLine() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("layout-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let cases: [(String, String)] = [
            ("fields: [\n  - {name: a", "YAML"),
            ("fields:\n  - name: a\n    name: b\n    type: u8\n", "duplicated key(s): 'name'"),
            ("", "invalid layout at the top level"),
            ("fields:\n  - {name: a, type: u8, present_if: nothing}\n", "fields[0].present_if"),
            ("\u{1}\u{2}", "YAML"),
        ]
        for (i, (text, mention)) in cases.enumerated() {
            let file = dir.appendingPathComponent("case\(i).yaml")
            try Data(text.utf8).write(to: file)
            try await CLI.expectOneLineFailure(["layout", "decode", "--layout", file.path, "00"], mentioning: mention)
        }
    }
}
