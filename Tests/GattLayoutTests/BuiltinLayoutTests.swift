import BinaryCoding
import GattLayout
import Testing

/// Built-ins against real-world notifications (Bluetooth GATT Specification Supplement).
@Suite struct BuiltinLayoutTests {
    @Test func uuidsAndNames() throws {
        #expect(BuiltinLayout.batteryLevel.uuid16 == 0x2A19)
        #expect(BuiltinLayout.heartRateMeasurement.uuid16 == 0x2A37)
        #expect(BuiltinLayout.temperatureMeasurement.uuid16 == 0x2A1C)
        #expect(BuiltinLayout.temperature.uuid16 == 0x2A6E)
        #expect(BuiltinLayout.humidity.uuid16 == 0x2A6F)
        #expect(BuiltinLayout(uuid16: 0x2A6F) == .humidity)
        #expect(BuiltinLayout(uuid16: 0x2A37) == .heartRateMeasurement)
        #expect(BuiltinLayout(uuid16: 0x2A00) == nil)
        for b in BuiltinLayout.allCases {
            let l = try GattLayout.builtin(named: b.rawValue)
            #expect(l.shortUUID == b.uuid16)
            #expect(l.name == b.rawValue)
            #expect(l.uuid == "0000\(String(b.uuid16, radix: 16))-0000-1000-8000-00805f9b34fb")
        }
        #expect(layoutError { _ = try GattLayout.builtin(named: "heart_rate") }
            == .unknownBuiltin(name: "heart_rate", known: ["battery_level", "heart_rate_measurement", "temperature_measurement",
                                                                       "temperature", "humidity"]))
    }

    @Test func batteryLevel() throws {
        let l = try builtin(.batteryLevel)
        #expect(try l.decode(bytes("5a")) == json(#"{"battery_level":90}"#))
        #expect(try l.decode(bytes("00")) == json(#"{"battery_level":0}"#))
        #expect(try l.decode(bytes("64")) == json(#"{"battery_level":100}"#))
        #expect(layoutError { _ = try l.decode(bytes("65")) }
            == .malformed(field: "battery_level", offset: 0, reason: "value 101 is above the maximum 100"))
        #expect(layoutError { _ = try l.decode([]) } == .needMoreData(field: "battery_level", offset: 0, needed: 1, available: 0))
        #expect(layoutError { _ = try l.decode(bytes("5a00")) }
            == .malformed(field: "battery_level", offset: 1, reason: "1 unexpected byte(s) after the last field"))
        #expect(try l.encode(json(#"{"battery_level":42}"#)) == bytes("2a"))
        #expect(layoutError { _ = try l.encode(json(#"{"battery_level":101}"#)) }
            == .invalidValue(path: "battery_level", reason: "101 is above the maximum 100"))
    }

    @Test func heartRateUInt8WithContact() throws {
        let l = try builtin(.heartRateMeasurement)
        // Flags 0x06: u8 format, contact supported and detected; 72 bpm.
        let v = try l.decode(bytes("0648"))
        #expect(v == json(#"{"sensor_contact_detected":true,"sensor_contact_supported":true,"heart_rate":72}"#))
        #expect(v.objectValue?.keys == ["sensor_contact_detected", "sensor_contact_supported", "heart_rate"])
        #expect(try l.encode(v) == bytes("0648"))
        // Supported but not detected (0x04).
        #expect(try l.decode(bytes("0450"))["sensor_contact_detected"] == false)
    }

    @Test func heartRateWithRRIntervals() throws {
        let l = try builtin(.heartRateMeasurement)
        // Polar-style: flags 0x16 (RR present, contact), 75 bpm, RR 0x0320 = 800/1024 s, 0x0330 = 816/1024 s.
        let v = try l.decode(bytes("164b20033003"))
        #expect(v == json(#"{"sensor_contact_detected":true,"sensor_contact_supported":true,"heart_rate":75,"rr_intervals":[0.78125,0.796875]}"#))
        #expect(try l.encode(v) == bytes("164b20033003"))
        // One RR interval of exactly one second.
        #expect(try l.decode(bytes("10480004")) == json(#"{"sensor_contact_detected":false,"sensor_contact_supported":false,"heart_rate":72,"rr_intervals":[1]}"#))
        // RR flag set but no interval: an empty list.
        #expect(try l.decode(bytes("1048"))["rr_intervals"] == .array([]))
    }

    @Test func heartRateUInt16WithEnergy() throws {
        let l = try builtin(.heartRateMeasurement)
        // Flags 0x09: u16 format + energy expended; 0x0101 = 257 bpm; energy 0x0578 = 1400 kJ.
        let v = try l.decode(bytes("0901017805"))
        #expect(v == json(#"{"sensor_contact_detected":false,"sensor_contact_supported":false,"heart_rate":257,"energy_expended":1400}"#))
        #expect(try l.encode(v) == bytes("0901017805"))
        // Everything: u16 + contact + energy + two RR intervals.
        let all = try l.decode(bytes("1f3c00e803000410 04"))
        #expect(all == json(#"{"sensor_contact_detected":true,"sensor_contact_supported":true,"heart_rate":60,"energy_expended":1000,"rr_intervals":[1,1.015625]}"#))
        // 60 fits in a u8, so the encoder picks the 8-bit form (the first alternative).
        #expect(try l.encode(all) == bytes("1e3ce803000410 04"))
    }

    @Test func heartRateEncoderChoosesFormatByValue() throws {
        let l = try builtin(.heartRateMeasurement)
        #expect(try l.encode(json(#"{"heart_rate":255}"#)) == bytes("00ff"))
        #expect(try l.encode(json(#"{"heart_rate":256}"#)) == bytes("010001"))
        #expect(try l.encode(json(#"{"heart_rate":72,"energy_expended":5,"rr_intervals":[]}"#)) == bytes("18480500"))
        #expect(layoutError { _ = try l.encode(json(#"{"heart_rate":70000}"#)) }
            == .invalidValue(path: "heart_rate", reason: "expected an integer in 0…65535, found 70000"))
        #expect(layoutError { _ = try l.encode(json(#"{"energy_expended":5}"#)) }
            == .invalidValue(path: "heart_rate", reason: "missing field 'heart_rate' (required while flag bit 'heart_rate_u16' is clear)"))
        #expect(layoutError { _ = try l.encode(json(#"{"heart_rate":72,"rr":[1]}"#)) }
            == .invalidValue(path: "rr", reason: "unknown field 'rr'"))
        #expect(layoutError { _ = try l.encode(json(#"{"heart_rate":72,"rr_intervals":[64]}"#)) }
            == .invalidValue(path: "rr_intervals[0]", reason: "64 gives raw 65536, outside 0…65535"))
    }

    @Test func heartRateTruncated() throws {
        let l = try builtin(.heartRateMeasurement)
        #expect(layoutError { _ = try l.decode(bytes("01")) } == .needMoreData(field: "heart_rate", offset: 1, needed: 2, available: 0))
        #expect(layoutError { _ = try l.decode(bytes("0148")) } == .needMoreData(field: "heart_rate", offset: 1, needed: 2, available: 1))
        #expect(layoutError { _ = try l.decode(bytes("084878")) } == .needMoreData(field: "energy_expended", offset: 2, needed: 2, available: 1))
        #expect(layoutError { _ = try l.decode(bytes("1048000403")) } == .needMoreData(field: "rr_intervals[1]", offset: 4, needed: 2, available: 1))
        #expect(layoutError { _ = try l.decode([]) } == .needMoreData(field: "flags", offset: 0, needed: 1, available: 0))
    }

    @Test func temperatureCelsius() throws {
        let l = try builtin(.temperatureMeasurement)
        // 36.4 °C = mantissa 364, exponent −1: 6c 01 00 ff.
        let v = try l.decode(bytes("006c0100ff"))
        #expect(v == json(#"{"temperature_celsius":36.4}"#))
        #expect(try l.encode(v) == bytes("006c0100ff"))
    }

    @Test func temperatureFahrenheitWithTimeStampAndType() throws {
        let l = try builtin(.temperatureMeasurement)
        // Flags 0x07; 97.5 °F (975e-1); 2024-11-22 12:30:45; type 2 (body).
        let hex = "07cf0300ffe8070b160c1e2d02"
        let v = try l.decode(bytes(hex))
        #expect(v == json(#"{"temperature_fahrenheit":97.5,"time_stamp":{"year":2024,"month":11,"day":22,"hours":12,"minutes":30,"seconds":45},"temperature_type":"body"}"#))
        #expect(try l.encode(v) == bytes(hex))
        // Celsius with time stamp only, and celsius with type only (9 = tympanum).
        #expect(try l.decode(bytes("026c0100ffe8070b160c1e2d"))["time_stamp"]?["year"] == 2024)
        #expect(try l.decode(bytes("046c0100ff09"))["temperature_type"] == "tympanum")
        // A reserved type stays a number.
        #expect(try l.decode(bytes("046c0100ff0a"))["temperature_type"] == 10)
        // Unknown date parts (0) are kept as 0.
        #expect(try l.decode(bytes("026c0100ff00000000000000"))["time_stamp"] == json(#"{"year":0,"month":0,"day":0,"hours":0,"minutes":0,"seconds":0}"#))
    }

    @Test func temperatureSpecialValuesAndErrors() throws {
        let l = try builtin(.temperatureMeasurement)
        #expect(try l.decode(bytes("00ffff7f00")) == json(#"{"temperature_celsius":"NaN"}"#))
        #expect(try l.decode(bytes("0000008000")) == json(#"{"temperature_celsius":"NRes"}"#))
        #expect(try l.decode(bytes("01feff7f00")) == json(#"{"temperature_fahrenheit":"+INFINITY"}"#))
        #expect(try l.encode(json(#"{"temperature_celsius":"-INFINITY"}"#)) == bytes("0002008000"))
        #expect(layoutError { _ = try l.encode(json(#"{"temperature_celsius":36.4,"temperature_fahrenheit":97.5}"#)) }
            == .invalidValue(path: "temperature_fahrenheit", reason: "'temperature_fahrenheit' needs flag bit 'fahrenheit' set, but 'temperature_celsius' needs it clear; give only one of them"))
        #expect(layoutError { _ = try l.encode(json(#"{"temperature_celsius":36.4,"temperature_type":"nose"}"#)) }
            == .invalidValue(path: "temperature_type", reason: "unknown name 'nose' (known: armpit, body, ear, finger, gastrointestinal_tract, mouth, rectum, toe, tympanum)"))
        #expect(layoutError { _ = try l.encode(json(#"{"temperature_celsius":36.4,"time_stamp":{"year":2024,"month":11}}"#)) }
            == .invalidValue(path: "time_stamp.day", reason: "missing field 'day'"))
        #expect(layoutError { _ = try l.decode(bytes("066c0100ffe8070b160c1e2d")) }
            == .needMoreData(field: "temperature_type", offset: 12, needed: 1, available: 0))
        #expect(layoutError { _ = try l.decode(bytes("026c0100ffe807")) }
            == .needMoreData(field: "time_stamp.month", offset: 7, needed: 1, available: 0))
    }

    /// GSS Temperature (0x2A6E): sint16, 0.01 °C, as an Environmental Sensing sensor notifies it.
    @Test func temperature() throws {
        let l = try builtin(.temperature)
        #expect(try l.decode(bytes("6608")) == json(#"{"temperature":21.5}"#))  // 0x0866 = 2150
        #expect(try l.decode(bytes("6b08")) == json(#"{"temperature":21.55}"#))
        #expect(try l.decode(bytes("18fc")) == json(#"{"temperature":-10}"#))  // −1000
        #expect(try l.decode(bytes("4d95")) == json(#"{"temperature":-273.15}"#))  // the minimum
        #expect(try l.decode(bytes("ff7f")) == json(#"{"temperature":327.67}"#))
        // 0x8000 is "value is not known": below the minimum, so not a temperature.
        #expect(layoutError { _ = try l.decode(bytes("0080")) }
            == .malformed(field: "temperature", offset: 0, reason: "value -327.68 is below the minimum -273.15"))
        #expect(layoutError { _ = try l.decode(bytes("66")) } == .needMoreData(field: "temperature", offset: 0, needed: 2, available: 1))
        #expect(try l.encode(json(#"{"temperature":21.55}"#)) == bytes("6b08"))
        #expect(try l.encode(json(#"{"temperature":-0.01}"#)) == bytes("ffff"))
        #expect(layoutError { _ = try l.encode(json(#"{"temperature":-300}"#)) }
            == .invalidValue(path: "temperature", reason: "-300 is below the minimum -273.15"))
    }

    /// GSS Humidity (0x2A6F): uint16, 0.01 %, 0…100.
    @Test func humidity() throws {
        let l = try builtin(.humidity)
        #expect(try l.decode(bytes("9411")) == json(#"{"humidity":45}"#))  // 0x1194 = 4500
        #expect(try l.decode(bytes("ad11")) == json(#"{"humidity":45.25}"#))
        #expect(try l.decode(bytes("0000")) == json(#"{"humidity":0}"#))
        #expect(try l.decode(bytes("1027")) == json(#"{"humidity":100}"#))
        #expect(layoutError { _ = try l.decode(bytes("1127")) }
            == .malformed(field: "humidity", offset: 0, reason: "value 100.01 is above the maximum 100"))
        // 0xFFFF is "value is not known".
        #expect(layoutError { _ = try l.decode(bytes("ffff")) }
            == .malformed(field: "humidity", offset: 0, reason: "value 655.35 is above the maximum 100"))
        #expect(try l.encode(json(#"{"humidity":45.25}"#)) == bytes("ad11"))
        #expect(layoutError { _ = try l.encode(json(#"{"humidity":-1}"#)) }
            == .invalidValue(path: "humidity", reason: "-1 is below the minimum 0"))
    }
}
