import BinaryCoding
import Testing

@testable import CapsCodec

@Suite struct CapsVectorTests {
    @Test func everyVectorEncodesAndDecodesExactly() throws {
        let all = try Vectors.encodable()
        #expect(all.count >= 60)
        for (file, v) in all {
            let id = v["id"]?.stringValue ?? "?"
            let bytes = try Vectors.bytes(v["hex"])
            let expected = try Vectors.expected(try #require(v["members"]))
            #expect(bytes.count == v["size"]?.intValue, "\(file) \(id): size")
            #expect(try expected.encoded() == bytes, "\(file) \(id): encode")
            #expect(try expected.encodedSize() == bytes.count, "\(file) \(id): encodedSize")
            #expect(try Caps(decoding: bytes) == expected, "\(file) \(id): decode")
        }
    }

    /// The vector member lists read through the codec's JSON reader (typed form, with the
    /// vectors' `bits`/`value_hex` keys) give the same bytes.
    @Test func vectorMemberJSONReadsAsTypedForm() throws {
        for (file, v) in try Vectors.encodable() {
            let id = v["id"]?.stringValue ?? "?"
            let caps = try Caps(json: try #require(v["members"]))
            #expect(try caps.encoded() == Vectors.bytes(v["hex"]), "\(file) \(id)")
        }
    }

    /// Decoded → canonical JSON shows the vectors' values (l/k as strings, S text, B base64).
    @Test func canonicalJSONMatchesVectorValues() throws {
        func check(_ json: JSONValue, _ vector: JSONValue, _ id: String) throws {
            let got = try #require(json.arrayValue)
            let want = try #require(vector.arrayValue)
            try #require(got.count == want.count, "\(id)")
            for (g, w) in zip(got, want) {
                let type = try #require(w["type"]?.stringValue)
                #expect(g["type"]?.stringValue == type, "\(id)")
                switch type {
                case "V": #expect(g["value"] == nil, "\(id)")
                case "i", "u", "l", "k", "S": #expect(g["value"] == w["value"], "\(id) \(type)")
                case "B": #expect(try Base64.decode(try #require(g["value"]?.stringValue)) == Vectors.bytes(w["value_hex"]), "\(id)")
                case "f", "d":
                    if let d = w["value"]?.doubleValue { #expect(g["value"]?.doubleValue == d, "\(id)") }
                case "O": try check(try #require(g["value"]), try #require(w["value"]), id)
                default: Issue.record("type \(type)")
                }
            }
        }
        for (_, v) in try Vectors.encodable() {
            let caps = try Caps(decoding: try Vectors.bytes(v["hex"]))
            try check(caps.typedJSON, try #require(v["members"]), v["id"]?.stringValue ?? "?")
        }
    }

    @Test func invalidVectorsAreRejectedWithTypedErrors() throws {
        let expected: [String: CapsError.Malformation] = [
            "wrong_version": .unsupportedVersion(4),
            "size_too_small": .trailingBytes(count: 1),
            "unknown_type_code": .unknownTypeCode(0x78),
            "overlong_uleb32": .integerTooLong(bits: 32),
            "string_past_end": .pastEnd("string of 5 bytes"),
            "member_count_past_end": .pastEnd("type code list of 3 members"),
            "float_truncated": .pastEnd("float32"),
        ]
        let vectors = try Vectors.vectors("invalid.json")
        #expect(vectors.count == 7)
        for v in vectors {
            let id = try #require(v["id"]?.stringValue)
            let bytes = try Vectors.bytes(v["hex"])
            switch v["expect"]?.stringValue {
            case "reject":
                #expect(throws: CapsError.self, "\(id)") { try Caps(decoding: bytes) }
                if let m = expected[id] { #expect(malformation { _ = try Caps(decoding: bytes) } == m, "\(id)") }
            case "either":
                if let caps = try? Caps(decoding: bytes) { #expect(try Caps(decoding: caps.encoded()) == caps) }
            default: Issue.record("unknown expectation in \(id)")
            }
        }
    }

    @Test func rawLEB128Vectors() throws {
        let raw = try #require(Vectors.load("leb128.json")["raw_leb128"]?.arrayValue)
        #expect(raw.count >= 20)
        for r in raw {
            let bytes = try Vectors.bytes(r["hex"])
            let text = try #require(r["value"]?.stringValue)
            #expect(bytes.count == r["byte_count"]?.intValue)
            if r["kind"]?.stringValue == "ULEB128" {
                let value = try #require(UInt64(text))
                #expect(LEB128.encodeUnsigned(value) == bytes, "\(text)")
                #expect(LEB128.unsignedSize(value) == bytes.count)
                let (d, n) = try LEB128.decodeUnsigned(bytes)
                #expect(d == value && n == bytes.count, "\(text)")
            } else {
                let value = try #require(Int64(text))
                #expect(LEB128.encodeSigned(value) == bytes, "\(text)")
                #expect(LEB128.signedSize(value) == bytes.count)
                let (d, n) = try LEB128.decodeSigned(bytes)
                #expect(d == value && n == bytes.count, "\(text)")
            }
        }
    }

    @Test func streamVectors() throws {
        let vectors = try Vectors.vectors("stream.json")
        for v in vectors {
            let id = v["id"]?.stringValue ?? "?"
            if let objects = v["objects_hex"]?.arrayValue {
                let whole = try Vectors.bytes(v["hex"])
                let expected = try objects.map { try Caps(decoding: try Vectors.bytes($0)) }
                var r = CapsStreamReader()
                #expect(try r.feed(whole) == expected, "\(id)")
                var drip = CapsStreamReader()
                var got = [Caps]()
                for b in whole { got += try drip.feed([b]) }
                #expect(got == expected, "\(id) byte by byte")
                #expect(drip.bufferedByteCount == 0)
                #expect(v["object_sizes"]?.arrayValue?.compactMap(\.intValue) == objects.map { ($0.stringValue?.count ?? 0) / 2 })
            }
            if let fragments = v["fragments_hex"]?.arrayValue {
                let whole = try Vectors.bytes(v["reassembled_hex"])
                var r = CapsStreamReader()
                var got = [Caps]()
                for (k, f) in fragments.enumerated() {
                    let out = try r.feed(try Vectors.bytes(f))
                    #expect(out.isEmpty == (k < fragments.count - 1), "\(id) fragment \(k)")
                    got += out
                }
                #expect(got == [try Caps(decoding: whole)], "\(id)")
                #expect(whole.count == v["size"]?.intValue)
            }
        }
    }
}
