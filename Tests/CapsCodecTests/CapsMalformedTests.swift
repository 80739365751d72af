import BinaryCoding
import Testing

@testable import CapsCodec

@Suite struct CapsMalformedTests {
    let brightness = try! Hex.decode("0000002e05047575534f812001034465760000001d05025375134465765f476c6173734272696768746e65737308")

    @Test func everyTruncationNeedsMoreData() throws {
        for n in 0..<brightness.count {
            do {
                _ = try Caps(decoding: Array(brightness[..<n]))
                Issue.record("prefix of \(n) bytes decoded")
            } catch {
                #expect(error.isNeedMoreData, "prefix \(n): \(error)")
                if case let .needMoreData(offset, needed) = error {
                    #expect(offset == n)
                    #expect(needed == (n < 4 ? 4 - n : brightness.count - n))
                }
            }
        }
    }

    @Test func trailingBytesAreMalformed() throws {
        #expect(malformation { _ = try Caps(decoding: brightness + [0]) } == .trailingBytes(count: 1))
        do { _ = try Caps(decoding: brightness + [0, 0]) } catch {
            #expect(error == .malformed(.trailingBytes(count: 2), offset: 46))
        }
    }

    @Test func sizeMismatchesAreMalformed() throws {
        // Outer size says 47 but the members end at 46 (one byte of slack inside).
        var b = brightness + [0]
        b[3] = 0x2F
        #expect(malformation { _ = try Caps(decoding: b) } == .sizeMismatch(declared: 47, used: 46))
        // Nested size larger than what the parent has left.
        b = brightness
        b[20] = 0x1E
        #expect(malformation { _ = try Caps(decoding: b) } == .pastEnd("nested object of 30 bytes"))
        // Nested size smaller: the nested members run past the nested object's end.
        b = brightness
        b[20] = 0x1C
        #expect(throws: CapsError.self) { try Caps(decoding: b) }
        // Sizes of 5 or less.
        for s: UInt8 in 0...5 {
            #expect(malformation { _ = try Caps(decoding: [0, 0, 0, s, 5, 0]) } == .sizeTooSmall(UInt32(s)))
        }
    }

    @Test func wrongVersionIsMalformedEvenWhenNested() throws {
        var b = brightness
        b[4] = 4
        #expect(throws: CapsError.malformed(.unsupportedVersion(4), offset: 4)) { try Caps(decoding: b) }
        b = brightness
        b[21] = 6
        #expect(malformation { _ = try Caps(decoding: b) } == .unsupportedVersion(6))
    }

    @Test func sizeLimitIsApplied() throws {
        #expect(malformation { _ = try Caps(decoding: brightness, sizeLimit: 45) } == .sizeAboveLimit(46, limit: 45))
        #expect(try Caps(decoding: brightness, sizeLimit: 46).count == 4)
    }

    @Test func nestingBombIsRejectedNotACrash() throws {
        // 100 000 nested empty-headed objects: a stack-eating input.
        let depth = 100_000
        var bytes = [UInt8]()
        for k in 0..<depth {
            let size = UInt32(7 * (depth - k) + 6)
            bytes += [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF), 5, 1, 0x4F]
        }
        bytes += [0, 0, 0, 6, 5, 0]
        #expect(malformation { _ = try Caps(decoding: bytes) } == .nestingTooDeep(limit: Caps.maxNestingDepth))
    }

    @Test func hugeCountsAndLengthsDoNotAllocate() throws {
        // Count 0xFFFFFFFF and a string of 4 GiB in a 12-byte object: errors, not allocations.
        #expect(malformation { _ = try Caps(decoding: Hex.decode("0000000b05ffffffff0f56")) } == .pastEnd("type code list of 4294967295 members"))
        #expect(malformation { _ = try Caps(decoding: Hex.decode("0000000c050153ffffffff0f")) } == .pastEnd("string of 4294967295 bytes"))
        #expect(malformation { _ = try Caps(decoding: Hex.decode("0000000c050142ffffffff0f")) } == .pastEnd("binary of 4294967295 bytes"))
    }

    @Test func cesu8SurrogatePairsAndC080AreAccepted() throws {
        // U+1F600 as CESU-8: ED A0 BD ED B8 80; U+0000 as C0 80.
        let cesu = try Hex.decode("0000001105015309 eda0bdedb880 c080 41")
        #expect(try Caps(decoding: cesu) == [.string("😀\u{0}A")])
        // Re-encoding writes standard UTF-8.
        #expect(Hex.encode(try Caps([.string("😀\u{0}A")]).encoded()) == "0000000e05015306f09f98800041")
    }

    @Test func invalidUTF8IsMalformedWithOffset() throws {
        let cases: [(String, Int)] = [
            ("eda0bd41", 0),  // high surrogate alone
            ("edb880", 0),  // low surrogate alone
            ("41ff", 1),  // invalid byte
            ("41c1bf", 1),  // overlong
            ("41e282", 1),  // truncated sequence
            ("4180", 1),  // stray continuation
            ("f4908080", 0),  // above U+10FFFF
        ]
        for (hex, at) in cases {
            let payload = try Hex.decode(hex)
            let bytes = [0, 0, 0, UInt8(8 + payload.count), 5, 1, 0x53, UInt8(payload.count)] + payload
            do {
                _ = try Caps(decoding: bytes)
                Issue.record("\(hex) decoded")
            } catch {
                #expect(error == .malformed(.invalidUTF8, offset: 8 + at), "\(hex)")
            }
        }
    }

    @Test func errorsDescribeWhatAndWhere() throws {
        let unknown = try Hex.decode("0000000805017801")
        do { _ = try Caps(decoding: unknown) } catch {
            #expect(error.description == "malformed Caps at byte 6: unknown type code 0x78 'x'")
        }
        let short = try Hex.decode("00000010")
        do { _ = try Caps(decoding: short) } catch {
            #expect(error.description.hasPrefix("need more data"))
        }
    }

    @Test func parsingFromAByteReaderLeavesItUntouchedOnError() throws {
        var reader = ByteReader(brightness + [0xAA])
        let caps = try Caps(parsing: &reader)
        #expect(caps.count == 4)
        #expect(reader.remaining == 1)
        var short = ByteReader(Array(brightness[..<10]))
        #expect(throws: CapsError.self) { try Caps(parsing: &short) }
        #expect(short.offset == 0)
    }
}
