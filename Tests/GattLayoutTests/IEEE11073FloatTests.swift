import GattLayout
import TestSupport
import Testing

/// IEEE 11073-20601 SFLOAT / FLOAT: values, special values, edge cases, exhaustive round trip.
@Suite struct IEEE11073FloatTests {
    typealias F = IEEE11073Float

    @Test func sfloatSpecialValues() throws {
        #expect(F.decode(0x07FF, format: .sfloat) == .special(.nan))
        #expect(F.decode(0x0800, format: .sfloat) == .special(.nres))
        #expect(F.decode(0x07FE, format: .sfloat) == .special(.positiveInfinity))
        #expect(F.decode(0x0802, format: .sfloat) == .special(.negativeInfinity))
        #expect(F.decode(0x0801, format: .sfloat) == .special(.reserved))
        for s in F.Value.Special.allCases {
            #expect(F.decode(try F.encode(.special(s), format: .sfloat), format: .sfloat) == .special(s))
        }
        // Special only with exponent 0: the same mantissas with another exponent are numbers.
        #expect(F.decode(0x17FF, format: .sfloat) == .number(20470))
        #expect(F.decode(0xF800, format: .sfloat) == .number(-204.8))
        #expect(F.decode(0xF7FE, format: .sfloat) == .number(204.6))
    }

    @Test func floatSpecialValues() throws {
        #expect(F.decode(0x007F_FFFF, format: .float) == .special(.nan))
        #expect(F.decode(0x0080_0000, format: .float) == .special(.nres))
        #expect(F.decode(0x007F_FFFE, format: .float) == .special(.positiveInfinity))
        #expect(F.decode(0x0080_0002, format: .float) == .special(.negativeInfinity))
        #expect(F.decode(0x0080_0001, format: .float) == .special(.reserved))
        #expect(F.decode(0x017F_FFFF, format: .float) == .number(83_886_070))
        #expect(try F.encode(.number(.nan), format: .float) == 0x007F_FFFF)
        #expect(try F.encode(.number(.infinity), format: .float) == 0x007F_FFFE)
        #expect(try F.encode(.number(-.infinity), format: .sfloat) == 0x0802)
    }

    @Test func sfloatNumbers() throws {
        // Examples from the Personal Health Devices transcoding white paper: 114 mmHg = 0x0072,
        // 0.00118 kg/L = 0xB076 (118 × 10^-5).
        #expect(F.decode(0x0072, format: .sfloat) == .number(114))
        #expect(F.decode(0xB076, format: .sfloat) == .number(0.00118))
        #expect(try F.encode(.number(114), format: .sfloat) == 0x0072)
        #expect(try F.encode(.number(0.00118), format: .sfloat) == 0xB076)
        #expect(try F.encode(.number(36.4), format: .sfloat) == 0xF16C)
        #expect(try F.encode(.number(-1.5), format: .sfloat) == 0xFFF1)
        #expect(try F.encode(.number(0), format: .sfloat) == 0)
        #expect(try F.encode(.number(-0.0), format: .sfloat) == 0)
        // Trailing zeros move into the exponent: 2000 = 2 × 10^3.
        #expect(try F.encode(.number(2000), format: .sfloat) == 0x3002)
        // 2046 at exponent 0 would be +INFINITY: it rounds to 205 × 10^1.
        #expect(try F.encode(.number(2046), format: .sfloat) == 0x10CD)
        // Most precise representation: 37.25 needs 3725 > 2047, so 372.5 → 373 × 10^-1 (rounded half away).
        #expect(try F.encode(.number(37.25), format: .sfloat) == 0xF175)
        // Largest and smallest magnitudes.
        #expect(F.decode(0x77FD, format: .sfloat) == .number(20_450_000_000))
        #expect(throws: F.EncodeFailure.self) { try F.encode(.number(3e10), format: .sfloat) }
        #expect(throws: F.EncodeFailure.self) { try F.encode(.number(-1e300), format: .float) }
        #expect(try F.encode(.number(1e-9), format: .sfloat) == 0)  // below resolution: rounds to zero
        #expect(F.decode(0x8001, format: .sfloat) == .number(1e-8))
    }

    @Test func floatNumbers() throws {
        #expect(F.decode(0xFF00_016C, format: .float) == .number(36.4))
        #expect(try F.encode(.number(36.4), format: .float) == 0xFF00_016C)
        #expect(try F.encode(.number(-273.15), format: .float) == 0xFEFF_954D)
        #expect(F.decode(0xFEFF_954D, format: .float) == .number(-273.15))
        #expect(try F.encode(.number(8_388_605), format: .float) == 0x007F_FFFD)
        #expect(F.decode(0x7F00_0001, format: .float) == .number(1e127))
        guard case let .number(tiny) = F.decode(0x8000_0001, format: .float) else {
            Issue.record("0x80000001 is a number")
            return
        }
        #expect(abs(tiny - 1e-128) < 1e-140)
    }

    /// Every one of the 65536 SFLOAT bit patterns: specials come back as themselves, numbers
    /// re-encode to a pattern that decodes to the very same number.
    @Test func sfloatExhaustiveRoundTrip() throws {
        for raw in UInt32(0)...0xFFFF {
            let v = F.decode(raw, format: .sfloat)
            let again = try F.encode(v, format: .sfloat)
            #expect(F.decode(again, format: .sfloat) == v, "raw \(String(raw, radix: 16))")
            if case .special = v { #expect(again == raw) }
        }
    }

    @Test func floatRandomRoundTrip() throws {
        var rng = SeededRandom(seed: 0x2A1C)
        for _ in 0..<20_000 {
            let raw = UInt32(truncatingIfNeeded: rng.next())
            let v = F.decode(raw, format: .float)
            let again = try F.encode(v, format: .float)
            #expect(F.decode(again, format: .float) == v, "raw \(String(raw, radix: 16))")
        }
    }
}
