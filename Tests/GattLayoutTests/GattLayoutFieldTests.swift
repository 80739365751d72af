import BinaryCoding
import GattLayout
import Testing

/// Every field type, both directions, and flag-conditioned presence.
@Suite struct GattLayoutFieldTests {
    /// Decodes `hex` with a one-field layout, checks the value, and encodes it back to `hex`.
    func roundTrip(_ field: String, _ hex: String, _ expected: String, line: Int = #line) throws {
        let l = try layout(#"{"fields":[\#(field)]}"#)
        let v = try l.decode(bytes(hex))
        #expect(v == json(#"{"v":\#(expected)}"#), "line \(line)")
        #expect(Hex.encode(try l.encode(v)) == Hex.encode(bytes(hex)), "line \(line)")
    }

    @Test func integers() throws {
        try roundTrip(#"{"name":"v","type":"u8"}"#, "ff", "255")
        try roundTrip(#"{"name":"v","type":"i8"}"#, "ff", "-1")
        try roundTrip(#"{"name":"v","type":"u16"}"#, "3412", "4660")
        try roundTrip(#"{"name":"v","type":"u16","endian":"big"}"#, "1234", "4660")
        try roundTrip(#"{"name":"v","type":"i16"}"#, "0080", "-32768")
        try roundTrip(#"{"name":"v","type":"u24"}"#, "563412", "1193046")
        try roundTrip(#"{"name":"v","type":"i24","endian":"big"}"#, "fffffe", "-2")
        try roundTrip(#"{"name":"v","type":"u32"}"#, "78563412", "305419896")
        try roundTrip(#"{"name":"v","type":"i32"}"#, "ffffff7f", "2147483647")
        try roundTrip(#"{"name":"v","type":"uint48"}"#, "010000000080", "140737488355329")
        try roundTrip(#"{"name":"v","type":"u64"}"#, "ffffffffffffffff", "18446744073709551615")
        try roundTrip(#"{"name":"v","type":"i64","endian":"big"}"#, "8000000000000000", "-9223372036854775808")
        try roundTrip(#"{"name":"v","type":"sint16"}"#, "feff", "-2")
    }

    @Test func integerRangesOnEncode() throws {
        let u8 = try layout(#"{"fields":[{"name":"v","type":"u8"}]}"#)
        #expect(layoutError { _ = try u8.encode(json(#"{"v":256}"#)) } == .invalidValue(path: "v", reason: "expected an integer in 0…255, found 256"))
        #expect(layoutError { _ = try u8.encode(json(#"{"v":-1}"#)) } == .invalidValue(path: "v", reason: "expected an integer in 0…255, found -1"))
        #expect(layoutError { _ = try u8.encode(json(#"{"v":1.5}"#)) } == .invalidValue(path: "v", reason: "expected an integer in 0…255, found 1.5"))
        #expect(layoutError { _ = try u8.encode(json(#"{"v":"7"}"#)) } == .invalidValue(path: "v", reason: "expected a number, found a string"))
        #expect(layoutError { _ = try u8.encode(json(#"{"v":true}"#)) } == .invalidValue(path: "v", reason: "expected a number, found boolean"))
        #expect(layoutError { _ = try u8.encode(json("[1]")) } == .invalidValue(path: "", reason: "expected a JSON object, found array"))
        #expect(try u8.encode(json(#"{"v":7.0}"#)) == [7])
        let i16 = try layout(#"{"fields":[{"name":"v","type":"i16"}]}"#)
        #expect(layoutError { _ = try i16.encode(json(#"{"v":32768}"#)) } == .invalidValue(path: "v", reason: "32768 is outside -32768…32767"))
        let i64 = try layout(#"{"fields":[{"name":"v","type":"i64"}]}"#)
        #expect(try i64.encode(json(#"{"v":-9223372036854775808}"#)) == [0, 0, 0, 0, 0, 0, 0, 0x80])
    }

    @Test func scaleAndOffset() throws {
        try roundTrip(#"{"name":"v","type":"i16","scale":0.01}"#, "6608", "21.5")
        try roundTrip(#"{"name":"v","type":"u8","scale":0.1}"#, "07", "0.7")
        try roundTrip(#"{"name":"v","type":"u8","scale":0.5,"offset":-40}"#, "64", "10")
        try roundTrip(#"{"name":"v","type":"u16","scale":"1/1024"}"#, "2003", "0.78125")
        try roundTrip(#"{"name":"v","type":"u8","scale":2.5}"#, "04", "10")
        try roundTrip(#"{"name":"v","type":"float32","scale":10}"#, "0000c03f", "15")
        let l = try layout(#"{"fields":[{"name":"v","type":"i16","scale":0.01,"min":-40,"max":85}]}"#)
        // Values are rounded to the nearest step.
        #expect(try l.encode(json(#"{"v":21.504}"#)) == bytes("6608"))
        #expect(layoutError { _ = try l.encode(json(#"{"v":90}"#)) } == .invalidValue(path: "v", reason: "90 is above the maximum 85"))
        #expect(layoutError { _ = try l.decode(bytes("2823")) } == .malformed(field: "v", offset: 0, reason: "value 90 is above the maximum 85"))
        #expect(layoutError { _ = try l.decode(bytes("4cf0")) } == .malformed(field: "v", offset: 0, reason: "value -40.2 is below the minimum -40"))
    }

    @Test func ieee754Floats() throws {
        try roundTrip(#"{"name":"v","type":"float32"}"#, "6666 1242", "36.6")
        try roundTrip(#"{"name":"v","type":"float32","endian":"big"}"#, "bf800000", "-1")
        try roundTrip(#"{"name":"v","type":"float64"}"#, "9a9999999999b93f", "0.1")
        try roundTrip(#"{"name":"v","type":"float64","endian":"big"}"#, "7fefffffffffffff", "1.7976931348623157e308")
        // The largest binary32 (shortest decimal 3.4028235e38 is above it as a double; found by fuzzing).
        try roundTrip(#"{"name":"v","type":"float32"}"#, "ffff7fff", "-3.4028235e38")
        try roundTrip(#"{"name":"v","type":"float32"}"#, "01000000", "1e-45")
        try roundTrip(#"{"name":"v","type":"float32"}"#, "0000c07f", #""NaN""#)
        try roundTrip(#"{"name":"v","type":"float32"}"#, "000080ff", #""-INFINITY""#)
        try roundTrip(#"{"name":"v","type":"float64"}"#, "000000000000f07f", #""+INFINITY""#)
        let f = try layout(#"{"fields":[{"name":"v","type":"float32"}]}"#)
        #expect(layoutError { _ = try f.encode(json(#"{"v":1e39}"#)) } == .invalidValue(path: "v", reason: "1e+39 is too large for a float32"))
        #expect(layoutError { _ = try f.encode(json(#"{"v":"NRes"}"#)) } == .invalidValue(path: "v", reason: "expected a number or one of NaN, +INFINITY, -INFINITY, found \"NRes\""))
    }

    @Test func medicalFloats() throws {
        try roundTrip(#"{"name":"v","type":"sfloat"}"#, "6cf1", "36.4")
        try roundTrip(#"{"name":"v","type":"medfloat16","endian":"big"}"#, "f16c", "36.4")
        try roundTrip(#"{"name":"v","type":"sfloat"}"#, "ff07", #""NaN""#)
        try roundTrip(#"{"name":"v","type":"sfloat"}"#, "0008", #""NRes""#)
        try roundTrip(#"{"name":"v","type":"sfloat"}"#, "fe07", #""+INFINITY""#)
        try roundTrip(#"{"name":"v","type":"sfloat"}"#, "0208", #""-INFINITY""#)
        try roundTrip(#"{"name":"v","type":"sfloat"}"#, "0108", #""reserved""#)
        try roundTrip(#"{"name":"v","type":"medfloat32"}"#, "6c0100ff", "36.4")
        try roundTrip(#"{"name":"v","type":"medfloat32"}"#, "01008000", #""reserved""#)
        let s = try layout(#"{"fields":[{"name":"v","type":"sfloat"}]}"#)
        #expect(layoutError { _ = try s.encode(json(#"{"v":1e12}"#)) } == .invalidValue(path: "v", reason: "1000000000000.0 is outside the range of an IEEE-11073 SFLOAT"))
        #expect(layoutError { _ = try s.encode(json(#"{"v":"nan"}"#)) } == .invalidValue(path: "v", reason: "expected a number or one of NaN, NRes, +INFINITY, -INFINITY, reserved, found \"nan\""))
    }

    @Test func textAndBytes() throws {
        try roundTrip(#"{"name":"v","type":"utf8"}"#, "48c3a9", #""Hé""#)
        try roundTrip(#"{"name":"v","type":"utf8","length":4}"#, "4869 0000", #""Hi""#)
        try roundTrip(#"{"name":"v","type":"utf8","length":2}"#, "4869", #""Hi""#)
        try roundTrip(#"{"name":"v","type":"utf8"}"#, "", #""""#)
        try roundTrip(#"{"name":"v","type":"bytes"}"#, "00ff10", #""00ff10""#)
        try roundTrip(#"{"name":"v","type":"bytes","length":2}"#, "abcd", #""abcd""#)
        let t = try layout(#"{"fields":[{"name":"v","type":"utf8","length":2}]}"#)
        #expect(layoutError { _ = try t.encode(json(#"{"v":"Hey"}"#)) } == .invalidValue(path: "v", reason: "3 UTF-8 bytes do not fit in 2"))
        #expect(layoutError { _ = try t.decode(bytes("c328")) } == .malformed(field: "v", offset: 0, reason: "not valid UTF-8"))
        let b = try layout(#"{"fields":[{"name":"v","type":"bytes","length":2}]}"#)
        #expect(layoutError { _ = try b.encode(json(#"{"v":"abc"}"#)) } == .invalidValue(path: "v", reason: "invalid hex at character 2: odd number of hex digits"))
        #expect(layoutError { _ = try b.encode(json(#"{"v":"ab"}"#)) } == .invalidValue(path: "v", reason: "expected 2 byte(s), found 1"))
    }

    @Test func enumsPadAndStructs() throws {
        try roundTrip(#"{"name":"v","type":"u8","enum":{"1":"on","0x10":"off"}}"#, "10", #""off""#)
        try roundTrip(#"{"name":"v","type":"u8","enum":{"1":"on"}}"#, "07", "7")
        try roundTrip(#"{"name":"v","type":"i8","enum":{"-1":"unknown"}}"#, "ff", #""unknown""#)
        let l = try layout(#"{"fields":[{"name":"a","type":"u8"},{"type":"pad","length":2},{"name":"v","type":"struct","fields":[{"name":"x","type":"u8"},{"name":"y","type":"utf8","length":3}]}]}"#)
        let v = try l.decode(bytes("01ffff 02 616263"))
        #expect(v == json(#"{"a":1,"v":{"x":2,"y":"abc"}}"#))
        #expect(try l.encode(v) == bytes("010000 02 616263"))
        #expect(layoutError { _ = try l.encode(json(#"{"a":1,"v":{"x":2,"y":"a","z":0}}"#)) } == .invalidValue(path: "v.z", reason: "unknown field 'z'"))
        #expect(layoutError { _ = try l.encode(json(#"{"a":1,"v":3}"#)) } == .invalidValue(path: "v", reason: "expected an object, found number"))
    }

    @Test func repeats() throws {
        try roundTrip(#"{"name":"v","type":"u16","repeat":2}"#, "01000200", "[1,2]")
        try roundTrip(#"{"name":"v","type":"i8","repeat":"rest"}"#, "ff0001", "[-1,0,1]")
        try roundTrip(#"{"name":"v","type":"u8","repeat":"rest"}"#, "", "[]")
        try roundTrip(#"{"name":"v","type":"date_time","repeat":"rest"}"#, "e8070b160c1e2d",
                      #"[{"year":2024,"month":11,"day":22,"hours":12,"minutes":30,"seconds":45}]"#)
        let l = try layout(#"{"fields":[{"name":"v","type":"u16","repeat":2}]}"#)
        #expect(layoutError { _ = try l.encode(json(#"{"v":[1]}"#)) } == .invalidValue(path: "v", reason: "expected exactly 2 element(s), found 1"))
        #expect(layoutError { _ = try l.encode(json(#"{"v":1}"#)) } == .invalidValue(path: "v", reason: "expected an array of 2, found number"))
        #expect(layoutError { _ = try l.decode(bytes("010002")) } == .needMoreData(field: "v[1]", offset: 2, needed: 2, available: 1))
    }

    static let flagged = #"""
        {"fields":[
          {"type":"flags","size":2,"endian":"big","bits":[
            {"name":"has_a","bit":0},{"name":"alarm","bit":1},{"name":"mode","bit":4,"width":3,"enum":{"1":"eco","2":"boost"}},
            {"name":"level","bit":8,"width":2},{"name":"no_b","bit":15}]},
          {"name":"a","type":"u8","present_if":"has_a"},
          {"name":"b","type":"u8","present_unless":"no_b"}]}
        """#

    @Test func flagBitsAndPresence() throws {
        let l = try layout(Self.flagged)
        // Big-endian flags 0x0213: has_a, alarm, mode 1, level 2; a = 5, b = 6.
        let v = try l.decode(bytes("0213 05 06"))
        #expect(v == json(#"{"alarm":true,"mode":"eco","level":2,"a":5,"b":6}"#))
        #expect(v.objectValue?.keys == ["alarm", "mode", "level", "a", "b"])
        #expect(try l.encode(v) == bytes("0213 05 06"))
        // No a, no b (bit 15 set); mode 3 has no name and stays a number.
        let w = try l.decode(bytes("8030"))
        #expect(w == json(#"{"alarm":false,"mode":3,"level":0}"#))
        #expect(try l.encode(w) == bytes("8030"))
        // Flag values default to 0 when absent; presence bits follow the fields given.
        #expect(try l.encode(json(#"{"b":1}"#)) == bytes("0000 01"))
        #expect(try l.encode(json(#"{"a":1,"b":2,"mode":"boost","level":3}"#)) == bytes("0321 01 02"))
        #expect(try l.encode(json(#"{}"#)) == bytes("8000"))
        #expect(layoutError { _ = try l.encode(json(#"{"level":4}"#)) } == .invalidValue(path: "level", reason: "expected a number from 0 to 3, found 4"))
        #expect(layoutError { _ = try l.encode(json(#"{"alarm":2}"#)) } == .invalidValue(path: "alarm", reason: "expected true, false, a number from 0 to 1, found 2"))
        #expect(layoutError { _ = try l.encode(json(#"{"mode":"turbo"}"#)) } == .invalidValue(path: "mode", reason: "unknown name 'turbo' (known: eco, boost)"))
        // Presence bits are not keys.
        #expect(layoutError { _ = try l.encode(json(#"{"has_a":true}"#)) } == .invalidValue(path: "has_a", reason: "unknown field 'has_a'"))
        #expect(layoutError { _ = try l.decode(bytes("0001")) } == .needMoreData(field: "a", offset: 2, needed: 1, available: 0))
    }

    @Test func alternativesFollowBitsFixedByOtherFields() throws {
        // v comes first, but w (present only when x is set) decides x, so v must take its u16 form.
        let l = try layout(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0}]},{"name":"v","type":"u8","present_unless":"x"},{"name":"v","type":"u16","present_if":"x"},{"name":"w","type":"u8","present_if":"x"}]}"#)
        #expect(try l.encode(json(#"{"v":5,"w":1}"#)) == bytes("01 0500 01"))
        #expect(try l.encode(json(#"{"v":5}"#)) == bytes("00 05"))
        #expect(try l.decode(bytes("01 0500 01")) == json(#"{"v":5,"w":1}"#))
        #expect(layoutError { _ = try l.encode(json(#"{"v":5,"w":1000}"#)) }
            == .invalidValue(path: "w", reason: "expected an integer in 0…255, found 1000"))
    }

    @Test func richLayoutParses() throws {
        let l = try layout(richLayoutJSON)
        #expect(l.name == "rich")
        #expect(l.shortUUID == 0xFFF1)
        #expect(l.fields.count == 20)
        #expect(try layout(#"{"uuid":"0000fff1-0000-1000-8000-00805F9B34FB","fields":[{"name":"a","type":"u8"}]}"#).shortUUID == 0xFFF1)
        #expect(try layout(#"{"uuid":"12345678-1234-5678-1234-56789abcdef0","fields":[{"name":"a","type":"u8"}]}"#).shortUUID == nil)
        #expect(try layout(#"{"uuid":"2a37","fields":[{"name":"a","type":"u8"}]}"#).uuid == "00002a37-0000-1000-8000-00805f9b34fb")
        #expect(try layout(#"{"uuid":"0000FFF1","fields":[{"name":"a","type":"u8"}]}"#).shortUUID == 0xFFF1)
    }
}

/// Widest cases, found while testing: 64-bit signed ranges, 64-bit flag groups.
@Suite struct GattLayoutWidthTests {
    @Test func sixtyFourBitEdges() throws {
        let l = try layout(#"{"fields":[{"name":"v","type":"i64","enum":{"-9223372036854775808":"min"}}]}"#)
        #expect(try l.decode(bytes("0000000000000080")) == json(#"{"v":"min"}"#))
        #expect(try l.encode(json(#"{"v":-1}"#)) == bytes("ffffffffffffffff"))
        let f = try layout(#"{"fields":[{"type":"flags","size":8,"bits":[{"name":"all","bit":0,"width":64}]}]}"#)
        #expect(try f.decode(bytes("ffffffffffffffff")) == json(#"{"all":18446744073709551615}"#))
        #expect(try f.encode(json(#"{"all":18446744073709551615}"#)) == bytes("ffffffffffffffff"))
    }
}
