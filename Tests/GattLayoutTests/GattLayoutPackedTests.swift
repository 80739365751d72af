import BinaryCoding
import GattLayout
import TestSupport
import Testing

/// The language features for packed and fixed formats (docs/layouts.md): `invalid` sentinels,
/// scaled flag groups, sign and magnitude, `parts`, and `pad` with a constant `value`.
@Suite struct GattLayoutPackedTests {
    @Test func anInvalidSentinelOmitsTheKeyAndIsWrittenForAMissingOne() throws {
        let l = try layout(#"{"fields":[{"name":"t","type":"i16","endian":"big","scale":0.005,"invalid":32768},{"name":"h","type":"u16","invalid":[65535,65534]},{"name":"n","type":"u8"}]}"#)
        #expect(try l.decode(bytes("12fc 1000 07")) == json(#"{"t":24.3,"h":16,"n":7}"#))
        #expect(try l.decode(bytes("8000 ffff 07")) == json(#"{"n":7}"#))
        #expect(try l.decode(bytes("8001 feff 07")) == json(#"{"t":-163.835,"n":7}"#))
        #expect(try l.encode(json(#"{"n":7}"#)) == bytes("8000 ffff 07"))
        #expect(try l.encode(json(#"{"t":24.3,"h":16,"n":7}"#)) == bytes("12fc 1000 07"))
        // The sentinel of a signed field may be written as its negative value too.
        let negative = try layout(#"{"fields":[{"name":"a","type":"i16","invalid":-32768}]}"#)
        #expect(try negative.decode(bytes("0080")) == json("{}"))
        #expect(negative.keys.first?.isConditional == true)
    }

    @Test func aFlagGroupCanBeScaledOffsetAndHaveASentinel() throws {
        // RuuviTag's power info: 11 bits of voltage above 1.6 V in mV, 5 bits of tx power in 2 dBm above −40.
        let l = try layout(#"""
        {"fields":[{"type":"flags","size":2,"endian":"big","bits":[
          {"name":"voltage","bit":5,"width":11,"scale":"1/1000","offset":1.6,"invalid":2047,"unit":"V"},
          {"name":"tx_power","bit":0,"width":5,"scale":2,"offset":-40,"invalid":31}]}]}
        """#)
        let v = try l.decode(bytes("ac36"))
        #expect(abs((v["voltage"]?.doubleValue ?? 0) - 2.977) < 1e-9)
        #expect(v["tx_power"] == .double(4))
        #expect(try l.decode(bytes("ffff")) == json("{}"))
        #expect(try l.encode(json(#"{"voltage":2.977,"tx_power":4}"#)) == bytes("ac36"))
        #expect(try l.encode(json("{}")) == bytes("ffff"))
        #expect(l.keys.map(\.unit) == ["V", nil])
        let tooHigh = layoutError { _ = try l.encode(json(#"{"voltage":5,"tx_power":4}"#)) }
        #expect(tooHigh?.description == "invalid value at voltage: 5 gives raw 3400, outside 0…2047")
    }

    @Test func signAndMagnitude() throws {
        let l = try layout(#"{"fields":[{"name":"v","type":"i24","endian":"big","sign":"magnitude"}]}"#)
        #expect(try l.decode(bytes("81c289")) == json(#"{"v":-115337}"#))
        #expect(try l.decode(bytes("01c289")) == json(#"{"v":115337}"#))
        #expect(try l.decode(bytes("800000")) == json(#"{"v":0}"#))
        #expect(try l.encode(json(#"{"v":-115337}"#)) == bytes("81c289"))
        #expect(try l.encode(json(#"{"v":8388607}"#)) == bytes("7fffff"))
        let e = layoutError { _ = try l.encode(json(#"{"v":-8388608}"#)) }
        #expect(e?.description == "invalid value at v: -8388608 is outside -8388607…8388607")
        let unsigned = layoutError { _ = try layout(#"{"fields":[{"name":"v","type":"u24","sign":"magnitude"}]}"#) }
        #expect(unsigned == .invalidLayout(path: "fields[0].sign", reason: "key 'sign' does not apply to type 'u24'"))
    }

    @Test func partsSplitOneIntegerIntoMeasurements() throws {
        // Govee H5075: |v| = temperature × 10000 + humidity × 10, the sign on the temperature only.
        let l = try layout(#"""
        {"fields":[{"type":"i24","endian":"big","sign":"magnitude","parts":[
          {"name":"temperature","divide":1000,"signed":true,"scale":"1/10","unit":"°C"},
          {"name":"humidity","modulo":1000,"scale":"1/10","unit":"%"}]},
          {"name":"battery","type":"u8"}]}
        """#)
        #expect(try l.decode(bytes("81c289 64")) == json(#"{"temperature":-11.5,"humidity":33.7,"battery":100}"#))
        #expect(try l.decode(bytes("034db2 64")) == json(#"{"temperature":21.6,"humidity":49.8,"battery":100}"#))
        #expect(try l.encode(json(#"{"temperature":-11.5,"humidity":33.7,"battery":100}"#)) == bytes("81c289 64"))
        // Below zero with no whole degree: the temperature part is 0, never −0.
        let small = try l.decode(bytes("800005 64"))
        #expect(small == json(#"{"temperature":0,"humidity":0.5,"battery":100}"#))
        if case let .double(t)? = small["temperature"] { #expect(t.sign == .plus) }
        #expect(l.keys.map(\.name) == ["temperature", "humidity", "battery"])
        #expect(l.keys.map(\.unit) == ["°C", "%", nil])
        let big = layoutError { _ = try l.encode(json(#"{"temperature":1,"humidity":100.5,"battery":1}"#)) }
        #expect(big?.description == "invalid value at humidity: 100.5 gives raw 1005, which does not fit the part")
        let unknown = layoutError { _ = try l.encode(json(#"{"temperature":1,"humidity":1,"battery":1,"parts":3}"#)) }
        #expect(unknown?.description == "invalid value at parts: unknown field 'parts'")
        let scaled = layoutError { _ = try layout(#"{"fields":[{"type":"u16","scale":2,"parts":[{"name":"a"}]}]}"#) }
        #expect(scaled == .invalidLayout(path: "fields[0].scale", reason: "key 'scale' does not apply to a field with 'parts' (give it to each part)"))
        let zero = layoutError { _ = try layout(#"{"fields":[{"type":"u16","parts":[{"name":"a","divide":0}]}]}"#) }
        #expect(zero == .invalidLayout(path: "fields[0].parts[0].divide", reason: "expected a whole number ≥ 1, found 0"))
        let twice = layoutError { _ = try layout(#"{"fields":[{"type":"u16","parts":[{"name":"a"}]},{"name":"a","type":"u8"}]}"#) }
        #expect(twice == .invalidLayout(path: "fields[1].name", reason: "'a' is already used (only alternatives on one flag bit may share a name)"))
    }

    @Test func overlappingPartsAndSentinelAlternativesAreRefused() throws {
        let overlap = layoutError { _ = try layout(#"{"fields":[{"type":"u16","parts":[{"name":"a"},{"name":"b","divide":10}]}]}"#) }
        #expect(overlap == .invalidLayout(
            path: "fields[0].parts[1]",
            reason: "the digits of 'b' overlap those of 'a' (a lower part needs a modulo with divide × modulo ≤ the next part's divide)"))
        _ = try layout(#"{"fields":[{"type":"u16","parts":[{"name":"b","divide":100},{"name":"a","modulo":10}]}]}"#)  // digit 1 unused: fine
        let alternatives = layoutError {
            _ = try layout(#"{"fields":[{"type":"flags","bits":[{"name":"wide","bit":0}]},{"name":"x","type":"u8","invalid":255,"present_unless":"wide"},{"name":"x","type":"u16","present_if":"wide"}]}"#)
        }
        #expect(alternatives == .invalidLayout(path: "fields[2]", reason: "alternatives of 'x' cannot have an 'invalid' value"))
    }

    @Test func partsOfTheMinimumAndOfA64BitValueEncodeBack() throws {
        // No part carries the sign: the minimum's magnitude, 2^15, can only be −32768.
        let small = try layout(#"{"fields":[{"type":"i16","parts":[{"name":"a","modulo":10},{"name":"b","divide":10}]}]}"#)
        let minimum = try small.decode(bytes("0080"))
        #expect(minimum == json(#"{"a":8,"b":3276}"#))
        #expect(try small.encode(minimum) == bytes("0080"))
        let wide = try layout(#"{"fields":[{"type":"u64","parts":[{"name":"a","modulo":10},{"name":"b","divide":10}]}]}"#)
        let top = try wide.decode(bytes("ffffffffffffffff"))
        #expect(try wide.encode(top) == bytes("ffffffffffffffff"))
        // A repeated field's missing element is its sentinel again.
        let list = try layout(#"{"fields":[{"name":"v","type":"u8","invalid":255,"repeat":3}]}"#)
        let decoded = try list.decode(bytes("01ff03"))
        #expect(decoded == json(#"{"v":[1,null,3]}"#))
        #expect(try list.encode(decoded) == bytes("01ff03"))
    }

    @Test func aPadWithAValueIsAConstant() throws {
        let l = try layout(#"{"fields":[{"type":"pad","value":"0599"},{"name":"x","type":"u8"}]}"#)
        #expect(try l.decode(bytes("0599 07")) == json(#"{"x":7}"#))
        #expect(try l.encode(json(#"{"x":7}"#)) == bytes("0599 07"))
        let wrong = layoutError { _ = try l.decode(bytes("0699 07")) }
        #expect(wrong?.description == "malformed: field 'pad' at byte 0: expected the bytes 0599, found 0699")
        let mismatch = layoutError { _ = try layout(#"{"fields":[{"type":"pad","value":"05","length":2}]}"#) }
        #expect(mismatch == .invalidLayout(path: "fields[0].length", reason: "length 2 differs from the 1 byte(s) of 'value'"))
        let notHex = layoutError { _ = try layout(#"{"fields":[{"type":"pad","value":"zz"}]}"#) }
        #expect(notHex == .invalidLayout(path: "fields[0].value", reason: "expected 1…512 bytes as hex text, found \"zz\""))
    }

    @Test func decimalScalesGiveTheNearestDouble() throws {
        // raw × scale + offset in whole numbers, divided once: the decimal's own double.
        let l = try layout(#"""
        {"fields":[{"name":"v","type":"u16","scale":"1/1000","offset":1.6},{"name":"p","type":"u16","scale":0.01,"offset":500},
                   {"name":"a","type":"i16","scale":0.00980665},{"name":"r","type":"u16","scale":"1/1024"}]}
        """#)
        #expect(try l.decode(bytes("6105 feff ff7f 0004")) == json(#"{"v":2.977,"p":1155.34,"a":321.33450055,"r":1}"#))
        #expect(try l.encode(json(#"{"v":2.977,"p":1155.34,"a":321.33450055,"r":1}"#)) == bytes("6105 feff ff7f 0004"))
    }

    @Test func aWideScaledFlagGroupRefusesAValueBeyondItsBits() throws {
        let l = try layout(#"{"fields":[{"type":"flags","size":8,"bits":[{"name":"w","bit":0,"width":64,"scale":1}]}]}"#)
        let e = layoutError { _ = try l.encode(json(#"{"w":1.8446744073709552e19}"#)) }
        #expect(e?.description == "invalid value at w: 1.8446744073709552e+19 gives raw 1.8446744073709552e+19, outside 0…18446744073709551615")
    }

    @Test func randomBytesThroughEveryPackedFeatureRoundTrip() throws {
        let l = try layout(#"""
        {"fields":[{"type":"pad","value":"a5"},
          {"type":"i24","sign":"magnitude","invalid":8388608,"parts":[
            {"name":"t","divide":1000,"signed":true,"scale":"1/10"},{"name":"h","modulo":1000,"scale":0.1}]},
          {"type":"flags","size":2,"endian":"big","bits":[
            {"name":"v","bit":4,"width":12,"scale":"1/1000","offset":1.6,"invalid":4095},{"name":"b","bit":0,"width":3}]},
          {"name":"s","type":"i16","endian":"big","sign":"magnitude","scale":0.005,"invalid":[32768,65535]},
          {"name":"n","type":"u8","invalid":255}]}
        """#)
        var rng = SeededRandom(seed: 0x9ACC_ED00)
        var omitted = 0
        for _ in 0..<5000 {
            var raw = (0..<9).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            raw[0] = 0xA5
            if rng.next() % 8 == 0 { raw[1...3] = [0, 0, 0x80] }  // the field's sentinel, now and then
            let decoded = try l.decode(raw)
            if decoded["t"] == nil { omitted += 1 }
            let again = try l.decode(try l.encode(decoded))
            #expect(again == decoded, "\(Hex.encode(raw)): \(decoded.jsonText)")
            if again != decoded { return }
            if case let .double(t)? = decoded["t"], t == 0 { #expect(t.sign == .plus, "\(Hex.encode(raw)): −0") }
        }
        #expect(omitted > 100)
    }

    @Test func sentinelValuesAreChecked() throws {
        let tooBig = layoutError { _ = try layout(#"{"fields":[{"name":"a","type":"u8","invalid":256}]}"#) }
        #expect(tooBig == .invalidLayout(path: "fields[0].invalid", reason: "expected a raw value from 0 to 255, found 256"))
        let negative = layoutError { _ = try layout(#"{"fields":[{"name":"a","type":"u8","invalid":[1,-1]}]}"#) }
        #expect(negative == .invalidLayout(path: "fields[0].invalid[1]", reason: "expected a raw value from 0 to 255, found -1"))
        let presence = layoutError {
            _ = try layout(#"{"fields":[{"type":"flags","bits":[{"name":"p","bit":0,"invalid":1}]},{"name":"x","type":"u8","present_if":"p"}]}"#)
        }
        #expect(presence?.description.contains("controls presence") == true)
    }
}
