import BinaryCoding
import TestSupport
import Testing

@testable import CapsCodec

@Suite struct CapsJSONTests {
    @Test func looseFormInfersTypes() throws {
        let caps = try Caps(jsonText: """
            [null, true, false, 0, 4294967295, 4294967296, -1, -2147483648, -2147483649, 18446744073709551615,
             1.5, 2.0, "text", [1, ["x"]], {"name":"mix_record","open":true}, {"type":"LinearLayout"}]
            """)
        let expected: Caps = [
            .void, .uint32(1), .uint32(0), .uint32(0), .uint32(.max), .uint64(4_294_967_296), .int32(-1), .int32(.min),
            .int64(-2_147_483_649), .uint64(.max), .double(1.5), .double(2.0), .string("text"),
            .object([.uint32(1), .object([.string("x")])]), .string("{\"name\":\"mix_record\",\"open\":true}"),
            .string("{\"type\":\"LinearLayout\"}"),
        ]
        #expect(caps == expected)
    }

    @Test func typedAndLooseMembersMix() throws {
        let caps = try Caps(jsonText: #"["Dev", {"type":"k","value":"1765983621057000000"}, {"type":"B","value":"AAEC"}, {"type":"f","value":0.5}]"#)
        #expect(caps == [.string("Dev"), .uint64(1_765_983_621_057_000_000), .binary([0, 1, 2]), .float(0.5)])
    }

    @Test func typedFormAcceptsNumbersOrStringsForIntegers() throws {
        let caps = try Caps(jsonText: #"[{"type":"l","value":-5},{"type":"k","value":7},{"type":"u","value":"9"},{"type":"i","value":3.0},{"type":"u","value":true}]"#)
        #expect(caps == [.int64(-5), .uint64(7), .uint32(9), .int32(3), .uint32(1)])
    }

    @Test func canonicalFormIsExact() throws {
        let caps: Caps = [.void, .int32(-1), .uint32(2), .int64(.min), .uint64(.max), .float(1.5), .double(-2.5),
                          .string("é"), .binary([0xDE, 0xAD, 0xBE, 0xEF]), .object([])]
        #expect(caps.typedJSON.jsonText == """
            [{"type":"V"},{"type":"i","value":-1},{"type":"u","value":2},{"type":"l","value":"-9223372036854775808"},\
            {"type":"k","value":"18446744073709551615"},{"type":"f","value":1.5},{"type":"d","value":-2.5},\
            {"type":"S","value":"é"},{"type":"B","value":"3q2+7w=="},{"type":"O","value":[]}]
            """)
    }

    @Test func errorsNameThePath() throws {
        let cases: [(String, String)] = [
            (#"{"a":1}"#, "$"),
            (#"[{"type":"x","value":1}]"#, "$[0].type"),
            (#"[1,{"type":"u","value":-1}]"#, "$[1].value"),
            (#"[{"type":"u","value":4294967296}]"#, "$[0].value"),
            (#"[{"type":"i","value":2147483648}]"#, "$[0].value"),
            (#"[{"type":"i","value":1.5}]"#, "$[0].value"),
            (#"[{"type":"l","value":"12a"}]"#, "$[0].value"),
            (#"[{"type":"k","value":"-1"}]"#, "$[0].value"),
            (#"[{"type":"S","value":5}]"#, "$[0].value"),
            (#"[{"type":"S"}]"#, "$[0].value"),
            (#"[{"type":"V","value":1}]"#, "$[0].value"),
            (#"[{"type":"B","value":"@@@@"}]"#, "$[0].value"),
            (#"[{"type":"f","value":1e39}]"#, "$[0].value"),
            (#"[{"type":"d","value":"nan"}]"#, "$[0].value"),
            (#"[[{"type":"O","value":{}}]]"#, "$[0][0].value"),
            (#"[{"type":"O","value":[{"type":"q"}]}]"#, "$[0].value[0].type"),
        ]
        for (text, path) in cases {
            do {
                _ = try Caps(jsonText: text)
                Issue.record("\(text) was accepted")
            } catch {
                guard case let .invalidJSON(p, _) = error else { Issue.record("\(text): \(error)"); continue }
                #expect(p == path, "\(text)")
            }
        }
    }

    @Test func invalidJSONTextIsAnError() {
        #expect(throws: CapsError.self) { try Caps(jsonText: "[1,") }
    }

    @Test func base64RoundTripsAndRejectsGarbage() throws {
        var g = SeededRandom(seed: 5)
        for n in 0..<70 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &g) }
            let text = Base64.encode(bytes)
            #expect(text.count == (n + 2) / 3 * 4)
            #expect(try Base64.decode(text) == bytes)
            #expect(try Base64.decode(String(text.prefix { $0 != "=" })) == bytes, "unpadded")
        }
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64.encode(Array("fo".utf8)) == "Zm8=")
        for bad in ["Zm9v!", "Z", "Zm9=v", "Zm===", "Zm9", "Zm9vYmF=x", "Zh=="] {
            #expect(throws: Base64.DecodeError.self, "\(bad)") { try Base64.decode(bad) }
        }
    }
}
