import BinaryCoding
import GattLayout
import Testing

/// `GattLayout.keys`: the top-level keys a decoded value can have, as the decoder writes them.
@Suite struct GattLayoutKeysTests {
    typealias Key = GattLayout.Key

    @Test func heartRateMeasurement() throws {
        let keys = try builtin(.heartRateMeasurement).keys
        #expect(keys == [
            Key(name: "sensor_contact_detected", kind: .boolean, unit: nil, isConditional: false),
            Key(name: "sensor_contact_supported", kind: .boolean, unit: nil, isConditional: false),
            // The u8/u16 alternatives are one key, always there.
            Key(name: "heart_rate", kind: .number, unit: "bpm", isConditional: false),
            Key(name: "energy_expended", kind: .number, unit: "kJ", isConditional: true),
            Key(name: "rr_intervals", kind: .list, unit: "s", isConditional: true),
        ])
    }

    @Test func temperatureMeasurementAndBatteryLevel() throws {
        let keys = try builtin(.temperatureMeasurement).keys
        #expect(keys.map(\.name) == ["temperature_celsius", "temperature_fahrenheit", "time_stamp", "temperature_type"])
        #expect(keys[0].unit == "°C" && keys[1].unit == "°F" && keys.allSatisfy(\.isConditional))
        #expect(keys[2].kind == .object)
        guard case let .choice(names) = keys[3].kind else { Issue.record("\(keys[3])"); return }
        #expect(names.count == 9 && names.first == "armpit" && names.last == "tympanum")
        #expect(try builtin(.batteryLevel).keys == [Key(name: "battery_level", kind: .number, unit: "%", isConditional: false)])
    }

    /// Flags: value bits are keys (a bool, or a choice for an enumerated group, a number for a
    /// plain wide one); presence bits and pads are not. Every other type has its kind.
    @Test func flagsPadsAndTypes() throws {
        let l = try layout("""
            {"fields": [
              {"type": "flags", "size": 2, "bits": [{"name": "has_x", "bit": 0}, {"name": "alarm", "bit": 1},
                                                   {"name": "mode", "bit": 2, "width": 2, "enum": {"0": "idle", "1": "on"}},
                                                   {"name": "level", "bit": 4, "width": 3}]},
              {"name": "x", "type": "float32", "present_if": "has_x", "unit": "V"},
              {"type": "pad", "length": 2},
              {"name": "when", "type": "date_time"},
              {"name": "state", "type": "u8", "enum": {"0": "ok", "1": "fault"}},
              {"name": "id", "type": "bytes", "length": 4},
              {"name": "axes", "type": "i16", "repeat": 3},
              {"name": "label", "type": "utf8"}
            ]}
            """)
        #expect(l.keys == [
            Key(name: "alarm", kind: .boolean, unit: nil, isConditional: false),
            Key(name: "mode", kind: .choice(names: ["idle", "on"]), unit: nil, isConditional: false),
            Key(name: "level", kind: .number, unit: nil, isConditional: false),
            Key(name: "x", kind: .number, unit: "V", isConditional: true),
            Key(name: "when", kind: .object, unit: nil, isConditional: false),
            Key(name: "state", kind: .choice(names: ["ok", "fault"]), unit: nil, isConditional: false),
            Key(name: "id", kind: .text, unit: nil, isConditional: false),
            Key(name: "axes", kind: .list, unit: nil, isConditional: false),
            Key(name: "label", kind: .text, unit: nil, isConditional: false),
        ])
        // The keys are the decoder's: a value with every field present has exactly them, in order.
        let value = try l.decode(bytes("1f00" + "0000803f" + "0000" + "e8070b160c1e2d" + "01" + "deadbeef" + "010002000300" + "6869"))
        #expect(value.objectValue?.keys == l.keys.map(\.name))
    }
}
