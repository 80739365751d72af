import BinaryCoding
import TestSupport
import Testing

@testable import CapsCodec

@Suite struct CapsRoundTripTests {
    @Test(arguments: [1 as UInt64, 2, 3, 42, 0xC0FFEE])
    func randomValuesSurviveBytesAndJSON(seed: UInt64) throws {
        var g = SeededRandom(seed: seed)
        for _ in 0..<200 {
            let caps = Generate.caps(&g)
            let bytes = try caps.encoded()
            #expect(bytes.count == (try caps.encodedSize()))
            let decoded = try Caps(decoding: bytes)
            #expect(decoded == caps)
            #expect(try decoded.encoded() == bytes, "encoding is canonical")
            // Canonical JSON text → parse → Caps is lossless (NaN payloads travel in "bits").
            let text = caps.typedJSON.jsonText
            #expect(try Caps(jsonText: text) == caps, "\(text)")
        }
    }

    @Test func integerEdgesUseMinimalLEB128() throws {
        for v in [Int32.min, -65, -64, -1, 0, 63, 64, 127, 128, Int32.max] {
            let bytes = try Caps([.int32(v)]).encoded()
            #expect(Array(bytes[7...]) == LEB128.encodeSigned(Int64(v)))
            #expect(try Caps(decoding: bytes) == [.int32(v)])
        }
        for v in [UInt64.min, 127, 128, 16383, 16384, UInt64(UInt32.max), UInt64.max] {
            let bytes = try Caps([.uint64(v)]).encoded()
            #expect(bytes.count == 7 + LEB128.unsignedSize(v))
            #expect(try Caps(decoding: bytes) == [.uint64(v)])
        }
    }

    @Test func nonMinimalLEB128IsAccepted() throws {
        // u 0 as 80 00, u 1 as 81 80 80 80 00 (5 bytes), i -1 as ff 7f, l 0 as 10 bytes.
        #expect(try Caps(decoding: Hex.decode("00000009050175 8000")) == [.uint32(0)])
        #expect(try Caps(decoding: Hex.decode("0000000c050175 8180808000")) == [.uint32(1)])
        #expect(try Caps(decoding: Hex.decode("00000009050169 ff7f")) == [.int32(-1)])
        #expect(try Caps(decoding: Hex.decode("000000110501 6c 80808080808080808000")) == [.int64(0)])
        #expect(try Caps(decoding: Hex.decode("000000110501 6c ffffffffffffffffff7f")) == [.int64(-1)])
        #expect(try Caps(decoding: Hex.decode("000000110501 6b ffffffffffffffffff01")) == [.uint64(.max)])
        // Member count 1 written as 81 00.
        #expect(try Caps(decoding: Hex.decode("00000009 05 8100 75 07")) == [.uint32(7)])
    }

    @Test func overflowingLEB128IsRejected() throws {
        // uint32 0x1_0000_0000 in 5 bytes (the reference would truncate it; we reject).
        #expect(malformation { _ = try Caps(decoding: Hex.decode("0000000c050175 8080808010")) } == .integerOverflow(bits: 32))
        #expect(malformation { _ = try Caps(decoding: Hex.decode("0000000c050175 ffffffff1f")) } == .integerOverflow(bits: 32))
        // int32 2^31 and -(2^31)-1.
        #expect(malformation { _ = try Caps(decoding: Hex.decode("0000000c050169 8080808008")) } == .integerOverflow(bits: 32))
        #expect(malformation { _ = try Caps(decoding: Hex.decode("0000000c050169 ffffffff77")) } == .integerOverflow(bits: 32))
        #expect(try Caps(decoding: Hex.decode("0000000c050169 8080808078")) == [.int32(.min)])
        // uint64 2^64, int64 2^63, 11-byte uint64.
        #expect(malformation { _ = try Caps(decoding: Hex.decode("000000110501 6b 80808080808080808002")) } == .integerOverflow(bits: 64))
        #expect(malformation { _ = try Caps(decoding: Hex.decode("000000110501 6c 80808080808080808001")) } == .integerOverflow(bits: 64))
        #expect(malformation { _ = try Caps(decoding: Hex.decode("000000120501 6b 8080808080808080808000")) } == .integerTooLong(bits: 64))
        #expect(malformation { _ = try Caps(decoding: Hex.decode("0000000d050169 808080808000")) } == .integerTooLong(bits: 32))
    }

    @Test func floatsAreLittleEndianBitExact() throws {
        let caps: Caps = [.float(-0.0), .double(-0.0), .float(.nan), .double(.infinity), .float(Float(bitPattern: 0x7FC0_0001))]
        let bytes = try caps.encoded()
        #expect(Hex.encode(bytes[11..<15]) == "00000080")
        let back = try Caps(decoding: bytes)
        #expect(back == caps)
        #expect(back[0] != .float(0))
        let json = caps.typedJSON.jsonText
        #expect(json.contains("\"-0.0\"") && json.contains("\"NaN\"") && json.contains("\"Infinity\"") && json.contains("\"bits\":\"7fc00001\""))
        #expect(try Caps(jsonText: json) == caps)
    }

    @Test func deepNestingWithinTheLimitRoundTrips() throws {
        var c: Caps = [.uint32(1)]
        for _ in 0..<Caps.maxNestingDepth { c = [.object(c)] }
        let bytes = try c.encoded()
        #expect(try Caps(decoding: bytes) == c)
        #expect(try Caps(jsonText: c.typedJSON.jsonText) == c)
        let tooDeep: Caps = [.object(c)]
        #expect(throws: CapsError.self) { try tooDeep.encoded() }
    }
}
