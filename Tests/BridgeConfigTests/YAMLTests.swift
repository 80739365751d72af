import BinaryCoding
import Foundation
import Testing
@testable import BridgeConfig

/// The one YAML → JSON conversion (YAMLDocument): its rules, the same for an inline layout in the
/// configuration and a layout file; anchors and aliases refused before anything expands.
@Suite struct YAMLTests {
    /// A "billion laughs" file (`Tests/TestSupport/Fixtures/billion-laughs.yaml`, also used by the CLI's tests).
    static let billionLaughs = try! String(
        contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("TestSupport/Fixtures/billion-laughs.yaml"), encoding: .utf8)

    /// The scalars whose reading differs between YAML 1.1 and 1.2, or between the converters this replaced.
    static let scalars = """
        fields:
          - {name: a, type: u8, values: {0: True, 1: Null, 2: 0o17, 3: .inf, 4: ~, 5: 017, 6: on, 7: !!str 5, 8: 1e3, 9: "true", 10: 0x1F, 11: -.5, 12: FALSE, 13: 18446744073709551615}}
        """

    static let expected: JSONValue = ["fields": [["name": "a", "type": "u8", "values": [
        "0": true, "1": nil, "2": 15, "3": ".inf", "4": nil, "5": 17, "6": "on", "7": "5", "8": 1000.0, "9": "true", "10": 31,
        "11": -0.5, "12": false, "13": .uint(UInt64.max),
    ]]]]

    @Test func theCoreSchemaRules() throws {
        #expect(try YAMLDocument.parse(Self.scalars).value == Self.expected)
    }

    @Test func anInlineLayoutReadsAsTheSameFile() throws {
        let indented = Self.scalars.split(separator: "\n").map { "          " + $0 }.joined(separator: "\n")
        let config = try Configuration(yaml: """
            devices:
              - id: sw
                address: "C0:FF:EE:00:00:01"
                profile: custom
                characteristics:
                  - uuid: "2A56"
                    codec: layout
                    layout:
            \(indented)
            """)
        #expect(config.devices[0].characteristics[0].layout == Self.expected)
    }

    /// Refused before anything walks into the aliases (expanding them took 28 s and 1.6 GB).
    @Test func billionLaughsIsRefusedAtOnceInBothPaths() throws {
        #expect(throws: YAMLConversionError(line: 1, reason: "anchors and aliases are not supported (the node here is used again through an alias)")) {
            try YAMLDocument.parse(Self.billionLaughs)
        }
        do {
            _ = try Configuration(yaml: Self.billionLaughs)
            Issue.record("accepted")
        } catch {
            #expect(error.description == "line 1: b[0]: YAML anchors and aliases are not supported (the node here is used again through an alias)")
        }
    }

    @Test func anAliasOfAScalarOrInASequenceIsRefusedToo() {
        let alias = "anchors and aliases are not supported (the node here is used again through an alias)"
        #expect(throws: YAMLConversionError(line: 2, reason: alias)) { try YAMLDocument.parse("a: 1\nb: &x 2\nc: *x\n") }
        #expect(throws: YAMLConversionError(line: 1, reason: alias)) { try YAMLDocument.parse("- &x [1]\n- *x\n") }
        #expect(throws: YAMLConversionError(line: 1, reason: alias)) { try YAMLDocument.parse("- &x 1\n- *x\n") }
        #expect(throws: ConfigError(path: "mqtt.port", line: 2, message: "YAML " + alias)) {
            try Configuration(yaml: "mqtt:\n  host: &h x\n  port: *h\n")
        }
    }

    /// What looks alike but is no alias: empty values, a mapping and its first key at one place,
    /// equal values written twice.
    @Test func noFalseAlarms() throws {
        let text = "a:\nb:\nc: {d: [1, 1], e: {f: }}\ng:\n  - h: 1\n    i:\n  - - 1\n    - 1\n"
        let value = try YAMLDocument.parse(text).value
        #expect(value == ["a": nil, "b": nil, "c": ["d": [1, 1], "e": ["f": nil]], "g": [["h": 1, "i": nil], [1, 1]]])
    }
}
