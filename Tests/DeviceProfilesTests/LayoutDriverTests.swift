import BinaryCoding
import Foundation
import BridgeConfig
import BridgeCore
import Testing
@testable import DeviceProfiles

@Suite struct LayoutDriverTests {
    static let yaml = """
        devices:
          - id: sensor
            address: C0:FF:EE:00:00:03
            profile: custom
            characteristics:
              - {uuid: 2A37, codec: layout, layout: "builtin:heart_rate_measurement", topic: heart_rate}
              - {uuid: 2A19, codec: layout, layout: "builtin:battery_level", direction: [read, notify], poll: 30s, topic: battery}
              - uuid: FFF1
                codec: layout
                direction: write
                topic: led
                layout:
                  fields:
                    - {name: on, type: u8}
                    - {name: level, type: u16, endian: little}
              - {uuid: FFF2, codec: raw, direction: [write, notify], topic: raw}
        """

    func driver() throws -> LayoutDriver { try LayoutDriver(device: Configuration(yaml: Self.yaml).devices[0]) }

    /// Each readable mapping without `poll:` is read after every connect (a polled one is read
    /// on connect by its poll already); write-only and notify-only mappings are not.
    @Test func readableMappingsAreReadAtConnect() throws {
        var d = try LayoutDriver(device: Configuration(yaml: """
            devices:
              - id: sensor
                address: C0:FF:EE:00:00:03
                profile: custom
                characteristics:
                  - {uuid: 2A37, codec: layout, layout: "builtin:heart_rate_measurement", topic: heart_rate}
                  - {uuid: 2A19, codec: layout, layout: "builtin:battery_level", direction: [read, notify], topic: battery}
                  - {uuid: 2A6E, codec: layout, layout: "builtin:temperature", direction: read, poll: 30s, topic: temperature}
                  - {uuid: FFF1, codec: raw, direction: [read, write], topic: raw}
                  - {uuid: FFF2, codec: raw, direction: write, topic: control}
            """).devices[0])
        let reads = try d.startupRequests()
        #expect(reads.map(\.read) == [CharacteristicID("2A19"), CharacteristicID("FFF1")])
        #expect(reads.allSatisfy { $0.writes.isEmpty && $0.bypassesBusyGate })
        #expect(try d.startupRequests() == reads, "again on the next connect")
        // The value read is published as a notification's would be: the topic and the state.
        #expect(d.decodeRead(CharacteristicID("2A19"), [85]) == [.characteristic(topic: "battery", value: ["battery_level": 85]),
                                                                 .state(["battery": ["battery_level": 85]])])
        var polled = try driver()
        #expect(try polled.startupRequests().isEmpty, "the only readable mapping is polled")
    }

    @Test func notificationsDecodeToTopicAndState() throws {
        var d = try driver()
        #expect(d.notifyCharacteristics.map(\.uuid) == ["2A37", "2A19", "FFF2"])
        #expect(d.polls.count == 1 && d.polls[0].interval == .seconds(30) && d.polls[0].request.read == CharacteristicID("2A19"))
        let out = d.receive(GATTNotification(characteristic: CharacteristicID("2A37"), value: [0x00, 0x48]))
        let hr: JSONValue = ["sensor_contact_detected": false, "sensor_contact_supported": false, "heart_rate": 72]
        #expect(out == [.characteristic(topic: "heart_rate", value: hr), .state(["heart_rate": hr])])
        let raw = d.receive(GATTNotification(characteristic: CharacteristicID("FFF2"), value: [0xAB]))
        #expect(raw.first == .characteristic(topic: "raw", value: "ab"))
    }

    @Test func writesEncodeThroughTheMapping() throws {
        var d = try driver()
        let r = try d.encode(["led": ["on": 1, "level": 513]], mtu: 23)
        #expect(r.writes == [.init(CharacteristicID("FFF1"), [0x01, 0x01, 0x02])] && r.attribute == "led")
        let w = try d.encodeWrite(topic: "raw", payload: Array("0a0b".utf8), mtu: 23)
        #expect(w.writes.first?.value == [0x0A, 0x0B])
    }

    @Test func getReadsAndDecodes() throws {
        var d = try driver()
        let r = try d.encode(["get": ["battery"]], mtu: 23)
        #expect(r.read == CharacteristicID("2A19") && r.writes.isEmpty)
        #expect(d.decodeRead(CharacteristicID("2A19"), [85]).last == .state(["battery": ["battery_level": 85]]))
    }

    @Test func badInputIsNamed() throws {
        var d = try driver()
        #expect { _ = try d.encode(["heart_rate": 1], mtu: 23) } throws: { "\($0)".contains("not writable") }
        #expect { _ = try d.encode(["led": ["on": 1]], mtu: 23) } throws: { ($0 as? CommandError)?.code == .invalidValue }
        #expect { _ = try d.encode(["nope": 1], mtu: 23) } throws: { ($0 as? CommandError)?.code == .unknownCommand }
        let garbage = d.receive(GATTNotification(characteristic: CharacteristicID("2A19"), value: []))
        if case .malformed? = garbage.first {} else { Issue.record("expected malformed: \(garbage)") }
    }

    @Test func badLayoutIsAConfigError() throws {
        let yaml = Self.yaml.replacingOccurrences(of: "builtin:battery_level", with: "builtin:toaster")
        #expect { _ = try LayoutDriver(device: Configuration(yaml: yaml).devices[0]) } throws: {
            ($0 as? ConfigError)?.path.contains("characteristics[1].layout") == true
        }
    }
}
