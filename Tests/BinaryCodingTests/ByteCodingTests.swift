import Testing
@testable import BinaryCoding

@Suite struct ByteReaderTests {
    @Test func readsIntegersInBothByteOrders() throws {
        var r = ByteReader([0x01, 0x02, 0x03, 0x04, 0x05, 0x06])
        #expect(try r.readInteger(endianness: .big, as: UInt16.self) == 0x0102)
        #expect(try r.readInteger(endianness: .little, as: UInt32.self) == 0x0605_0403)
        #expect(r.isAtEnd)
    }

    @Test func shortReadLeavesReaderUntouched() throws {
        var r = ByteReader([0xAA, 0xBB, 0xCC])
        _ = try r.readUInt8()
        #expect(throws: ByteReaderError.insufficientData(offset: 1, needed: 4, available: 2)) {
            try r.readInteger(endianness: .big, as: UInt32.self)
        }
        #expect(r.offset == 1)
        #expect(try r.readInteger(endianness: .big, as: UInt16.self) == 0xBBCC)
    }

    @Test func sliceOffsetsAreRelative() throws {
        let data: [UInt8] = [9, 9, 1, 2, 3]
        var r = ByteReader(data[2...])
        #expect(r.offset == 0)
        #expect(Array(try r.readBytes(count: 2)) == [1, 2])
        #expect(r.offset == 2 && r.remaining == 1)
    }

    @Test func writerRoundTripsSignedValues() throws {
        var w = ByteWriter()
        w.writeInteger(Int16(-2), endianness: .little)
        w.writeInteger(Int64(-5), endianness: .big)
        #expect(w.bytes == [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFB])
        var r = ByteReader(w.bytes)
        #expect(try r.readInteger(endianness: .little, as: Int16.self) == -2)
        #expect(try r.readInteger(endianness: .big, as: Int64.self) == -5)
    }
}

@Suite struct HexTests {
    @Test func encodesLowercase() { #expect(Hex.encode([0x00, 0xAB, 0xFF]) == "00abff") }
    @Test func decodesWithSeparatorsAndPrefix() throws {
        #expect(try Hex.decode("0xDE ad:be-EF") == [0xDE, 0xAD, 0xBE, 0xEF])
    }
    @Test func rejectsOddAndBadCharacters() {
        #expect(throws: Hex.DecodeError.self) { try Hex.decode("abc") }
        #expect(throws: Hex.DecodeError(offset: 2, reason: "unexpected character 'z'")) { try Hex.decode("abzz") }
    }
}

@Suite struct JSONValueTests {
    @Test func parsesAndKeepsOrderAndPrecision() throws {
        let v = try JSONValue(parsing: #"{"b":1,"a":[true,null,"x\u00e9\ud83d\ude00"],"big":18446744073709551615,"n":-9223372036854775808,"f":1.5e3}"#)
        #expect(v.objectValue?.keys == ["b", "a", "big", "n", "f"])
        #expect(v["big"] == .uint(UInt64.max))
        #expect(v["n"] == .int(Int64.min))
        #expect(v["f"] == .double(1500))
        #expect(v["a"]?.arrayValue?[2] == .string("xé😀"))
        #expect(v.jsonText == #"{"b":1,"a":[true,null,"xé😀"],"big":18446744073709551615,"n":-9223372036854775808,"f":1500}"#)
    }

    @Test func objectEqualityIgnoresOrder() throws {
        #expect(try JSONValue(parsing: #"{"a":1,"b":2}"#) == JSONValue(parsing: #"{"b":2,"a":1}"#))
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\ud800\"", "tru", "[1] x", "\"a\u{01}\""])
    func rejectsMalformed(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: text) }
    }

    @Test func readsStringsWithAndWithoutEscapes() throws {
        // Without an escape a string is taken from the input whole; with one, the run before it is
        // kept and the rest read byte by byte: both ways give the same text.
        let cases: [(String, String)] = [
            (#""""#, ""), (#""plain""#, "plain"), ("\"é 😀 long enough not to be a small string\"", "é 😀 long enough not to be a small string"),
            (#""a\"b""#, "a\"b"), (#""\n""#, "\n"), (#""run before\tand after""#, "run before\tand after"), (#""\u00e9x""#, "éx"),
        ]
        for (text, expected) in cases {
            #expect(try JSONValue(parsing: text) == .string(expected), "\(text)")
            #expect(try JSONValue(parsing: "{\(text):\(text)}") == .object([expected: .string(expected)]), "\(text) as a member")
        }
        // Errors name the same offset whichever way the string was read: after the closing quote
        // for bytes that are not UTF-8, at the byte for a control character or a cut-off input.
        func offset(_ bytes: [UInt8]) -> (Int, String)? {
            do { _ = try JSONValue(parsing: bytes); return nil } catch { return (error.offset, error.reason) }
        }
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\"), n = UInt8(ascii: "n")
        #expect(offset([quote, 0x61, 0xFF, quote])! == (4, "string is not valid UTF-8"))
        #expect(offset([quote, backslash, n, 0xC3, quote])! == (5, "string is not valid UTF-8"))
        #expect(offset([quote, 0x61, 0x01, quote])! == (2, "control character in string"))
        #expect(offset([quote, 0x61, 0x62])! == (3, "unterminated string"))
        #expect(offset(Array("[tru]".utf8))! == (1, "invalid literal"))
        #expect(offset(Array("nul".utf8))! == (0, "unexpected end of input"))
        #expect(try JSONValue(parsing: "[true,false,null]") == .array([.bool(true), .bool(false), .null]))
    }

    @Test func rejectsExcessiveNesting() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: deep) }
    }

    @Test func writesIntegersInDecimal() {
        for v: Int64 in [0, 7, 9, 10, 99, 100, -1, -9, -10, 1_000_000_007, .max, .min] {
            #expect(JSONValue.int(v).jsonText == String(v))
        }
        for v: UInt64 in [0, 10, .max] { #expect(JSONValue.uint(v).jsonText == String(v)) }
        #expect(JSONValue.array([.int(-12), .uint(340), .int(5)]).jsonText == "[-12,340,5]")
    }

    @Test func escapesControlCharacters() throws {
        #expect(JSONValue.string("a\"\\\n\u{01}").jsonText == #""a\"\\\n\u0001""#)
        // Runs between escapes are copied whole: escapes first, last, side by side, none at all.
        #expect(JSONValue.string("").jsonText == #""""#)
        #expect(JSONValue.string("plain é 😀").jsonText == "\"plain é 😀\"")
        #expect(JSONValue.string("\"x\"").jsonText == #""\"x\"""#)
        #expect(JSONValue.string("\t\r\u{1f}ab\\").jsonText == #""\t\r\u001fab\\""#)
        // Every ASCII character reads back as itself, alone and around a non-ASCII one.
        let ascii = String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self)
        for s in [ascii, ascii + "é" + ascii] {
            #expect(try JSONValue(parsing: JSONValue.string(s).jsonText) == .string(s))
        }
    }
}

@Suite struct JSONNumberEqualityTests {
    /// Found by Fuzz/JSON: an integral double is written without a fraction and reads back as an int.
    @Test func integralDoubleRoundTrips() throws {
        let v = try JSONValue(parsing: "[1,-2.5e3]")
        #expect(try JSONValue(parsing: v.jsonText) == v)
        #expect(JSONValue.int(5) == .double(5))
        #expect(JSONValue.int(5) != .double(5.5))
        #expect(JSONValue.uint(UInt64.max) != .int(-1))
    }
}

@Suite struct JSONObjectTests {
    /// The writer's text is the object's: empty, flat, nested (twice, then members after), escaped.
    @Test func theWriterWritesWhatTheObjectWould() {
        #expect(JSONObjectWriter().finish() == Array("{}".utf8))
        var w = JSONObjectWriter(capacity: 0)
        w.member("a", 1)
        w.member("s", string: "x\"y\n")
        w.member("o") { o in
            o.member("p") { p in p.member("q", .null) }
            o.member("e") { _ in }
            o.member("r", ["z": [true, false]])
        }
        w.member("after", 2.5)
        w.member("raw", json: #"{"k":["v\"",1]}"#)  // a value's text made before, copied as it is
        let expected: JSONValue = ["a": 1, "s": "x\"y\n", "o": ["p": ["q": .null], "e": [:], "r": ["z": [true, false]]], "after": 2.5,
                                   "raw": ["k": ["v\"", 1]]]
        let text = w.finish()
        #expect(text == expected.jsonBytes)
        #expect(String(decoding: text, as: UTF8.self) == #"{"a":1,"s":"x\"y\n","o":{"p":{"q":null},"e":{},"r":{"z":[true,false]}},"after":2.5,"raw":{"k":["v\"",1]}}"#)
    }

    @Test func indexStaysRightThroughReplaceAndRemove() {
        var o: JSONObject = ["a": 1, "b": 2, "c": 3]
        o["b"] = nil
        #expect(o.keys == ["a", "c"] && o["c"] == 3 && o["b"] == nil)
        o["a"] = 10
        o["d"] = 4
        #expect(o.keys == ["a", "c", "d"] && o["a"] == 10 && o["d"] == 4)
        o["a"] = nil
        #expect(o["c"] == 3 && o["d"] == 4 && o.count == 2)
        var big = JSONObject()
        for i in 0..<1000 { big["k\(i)"] = .int(Int64(i)) }
        #expect(big["k999"] == 999 && big.count == 1000)
    }

    /// Past 15 members the ordered storage hashes its keys: order, replace in place, removal and
    /// merge behave the same on both sides of that size.
    @Test(arguments: [3, 15, 16, 40, 200])
    func orderMergeAndEqualityAtEverySize(size: Int) throws {
        var o = JSONObject()
        for i in 0..<size { o["k\(i)"] = .int(Int64(i)) }
        o["k0"] = "first"  // replaced in place
        o["k1"] = nil      // removed
        o.merge(["k2": true, "new": .null])
        let expectedKeys = ["k0"] + (2..<size).map { "k\($0)" } + ["new"]
        #expect(o.keys == expectedKeys)
        #expect(o["k0"] == "first" && o["k1"] == nil && o["k2"] == true && o["new"] == .null)
        for i in 3..<size { #expect(o["k\(i)"] == .int(Int64(i))) }
        // Text in member order; parsed back, equal; equality ignores order.
        let text = JSONValue.object(o).jsonText
        #expect(text.hasPrefix(#"{"k0":"first","k2":true"#) && text.hasSuffix(#","new":null}"#))
        #expect(try JSONValue(parsing: text) == .object(o))
        let reversed = JSONObject(Array(o.members).reversed())
        #expect(reversed == o && reversed.keys == expectedKeys.reversed())
        var fewer = o
        fewer["new"] = nil
        #expect(fewer != o)
    }
}

/// FNV-1a's buffer, array and UTF-8 paths give what the byte-by-byte generic one gives (the
/// published 64-bit FNV-1a of "a" is af63dc4c8601ec8c).
@Suite struct FNV1aTests {
    @Test func everyPathGivesTheSameDigest() {
        let bytes: [UInt8] = Array("gatt2mqtt/camera0/set {\"command\":\"set_shutter\"}".utf8)
        var generic = FNV1a()
        generic.add(bytes.lazy.map { $0 })
        var array = FNV1a()
        array.add(bytes)
        var text = FNV1a()
        text.add("gatt2mqtt/camera0/set {\"command\":\"set_shutter\"}".utf8)
        var buffer = FNV1a()
        bytes.withUnsafeBytes { buffer.add($0) }
        #expect(array.value == generic.value && text.value == generic.value && buffer.value == generic.value)
        var a = FNV1a()
        a.add([0x61])
        #expect(a.value == 0xaf63_dc4c_8601_ec8c)
    }
}
