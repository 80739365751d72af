/// IEEE 11073-20601 medical floats as used by GATT: SFLOAT (GSS `medfloat16`: 4-bit signed
/// exponent, 12-bit signed mantissa) and FLOAT (GSS `medfloat32`: 8-bit signed exponent, 24-bit
/// signed mantissa), both base 10: value = mantissa × 10^exponent.
///
/// Special values exist only with exponent 0 (IEEE 11073-20601, "FLOAT-Type"/"SFLOAT-Type";
/// Bluetooth Personal Health Devices Transcoding white paper): mantissa +(2^(n−1) − 1) is NaN,
/// −2^(n−1) is NRes (not at this resolution), +(2^(n−1) − 2) is +INFINITY, −(2^(n−1) − 2) is
/// −INFINITY and −(2^(n−1) − 1) is reserved for future use. In JSON they are the strings
/// ``Value/Special``'s raw values: `"NaN"`, `"NRes"`, `"+INFINITY"`, `"-INFINITY"`, `"reserved"`.
public enum IEEE11073Float {
    /// Which of the two formats.
    public enum Format: Sendable, Equatable {
        /// 16-bit SFLOAT (`medfloat16`).
        case sfloat
        /// 32-bit FLOAT (`medfloat32`).
        case float

        /// Bytes on the wire.
        public var byteCount: Int { self == .sfloat ? 2 : 4 }
        var mantissaBits: Int { self == .sfloat ? 12 : 24 }
        var exponentRange: ClosedRange<Int> { self == .sfloat ? -8...7 : -128...127 }
        /// 2^(n−1): the magnitude of the most negative mantissa.
        var half: Int64 { Int64(1) << (mantissaBits - 1) }
    }

    /// A decoded medical float: a finite number or one of the special values.
    public enum Value: Sendable, Equatable {
        case number(Double)
        case special(Special)

        /// The special values, named as in IEEE 11073-20601 (raw values are the JSON strings).
        public enum Special: String, Sendable, CaseIterable {
            case nan = "NaN"
            case nres = "NRes"
            case positiveInfinity = "+INFINITY"
            case negativeInfinity = "-INFINITY"
            case reserved = "reserved"
        }
    }

    /// Decodes the raw bits (the low 16 or 32 bits of `raw`).
    public static func decode(_ raw: UInt32, format: Format) -> Value {
        let m = Int64(raw) & ((Int64(1) << format.mantissaBits) - 1)
        let expBits = format == .sfloat ? 4 : 8
        let e = Int64(raw >> UInt32(format.mantissaBits)) & ((Int64(1) << expBits) - 1)
        let exponent = Int(e >= (Int64(1) << (expBits - 1)) ? e - (Int64(1) << expBits) : e)
        let mantissa = m >= format.half ? m - 2 * format.half : m
        if exponent == 0, let special = special(mantissa: mantissa, format: format) { return .special(special) }
        return .number(value(mantissa: mantissa, exponent: exponent))
    }

    /// Encodes a value to raw bits (in the low 16 or 32 bits). Numbers are rounded to the most
    /// precise representation (the smallest exponent whose mantissa fits), then trailing decimal
    /// zeros are moved into the exponent when that loses nothing. Throws a reason for a number
    /// too large for the format.
    public static func encode(_ value: Value, format: Format) throws(EncodeFailure) -> UInt32 {
        switch value {
        case let .special(s):
            return pack(mantissa: specialMantissa(s, format: format), exponent: 0, format: format)
        case let .number(v):
            if v.isNaN { return pack(mantissa: specialMantissa(.nan, format: format), exponent: 0, format: format) }
            if v.isInfinite {
                let s: Value.Special = v > 0 ? .positiveInfinity : .negativeInfinity
                return pack(mantissa: specialMantissa(s, format: format), exponent: 0, format: format)
            }
            for e in format.exponentRange {
                let scaled = e < 0 ? v * powerOfTen(-e) : v / powerOfTen(e)
                let r = scaled.rounded(.toNearestOrAwayFromZero)
                guard abs(r) <= Double(format.half) else { continue }
                var m = Int64(r)  // checked: |r| <= half (guard above), r finite
                guard fits(mantissa: m, exponent: e, format: format) else { continue }
                var exponent = e
                if m == 0 { return 0 }
                // Among the equal forms m×10^e = (m/10)×10^(e+1) = …, take the one with the largest
                // exponent whose double is exactly `v` (or the first when none is).
                var best = (m, e)
                var bestExact = Self.value(mantissa: m, exponent: e) == v
                while m % 10 == 0, exponent < format.exponentRange.upperBound,
                    fits(mantissa: m / 10, exponent: exponent + 1, format: format)
                {
                    m /= 10
                    exponent += 1
                    let exact = Self.value(mantissa: m, exponent: exponent) == v
                    if exact || !bestExact { best = (m, exponent); bestExact = exact }
                }
                return pack(mantissa: best.0, exponent: best.1, format: format)
            }
            throw EncodeFailure(reason: "\(v) is outside the range of an IEEE-11073 \(format == .sfloat ? "SFLOAT" : "FLOAT")")
        }
    }

    /// Why a value cannot be encoded.
    public struct EncodeFailure: Error, Sendable, Equatable {
        /// What does not fit, for people.
        public let reason: String
    }

    // MARK: - Helpers

    static func special(mantissa: Int64, format: Format) -> Value.Special? {
        let h = format.half
        switch mantissa {
        case h - 1: return .nan
        case -h: return .nres
        case h - 2: return .positiveInfinity
        case -(h - 2): return .negativeInfinity
        case -(h - 1): return .reserved
        default: return nil
        }
    }

    static func specialMantissa(_ s: Value.Special, format: Format) -> Int64 {
        let h = format.half
        switch s {
        case .nan: return h - 1
        case .nres: return -h
        case .positiveInfinity: return h - 2
        case .negativeInfinity: return -(h - 2)
        case .reserved: return -(h - 1)
        }
    }

    /// Whether (mantissa, exponent) is a representable number (not a special value).
    static func fits(mantissa m: Int64, exponent e: Int, format: Format) -> Bool {
        let h = format.half
        guard m >= -h, m <= h - 1 else { return false }
        if e == 0 { return m > -(h - 2) && m < h - 2 }
        return true
    }

    static func pack(mantissa: Int64, exponent: Int, format: Format) -> UInt32 {
        let mBits = format.mantissaBits
        let mask = (UInt32(1) << UInt32(mBits)) - 1
        let expMask: UInt32 = format == .sfloat ? 0xF : 0xFF
        return (UInt32(truncatingIfNeeded: exponent) & expMask) << UInt32(mBits)
            | UInt32(truncatingIfNeeded: mantissa) & mask
    }

    static func value(mantissa: Int64, exponent: Int) -> Double {
        exponent < 0 ? Double(mantissa) / powerOfTen(-exponent) : Double(mantissa) * powerOfTen(exponent)
    }

    /// 10^0 … 10^128, each the correctly rounded double.
    static let powersOfTen: [Double] = (0...128).map { Double("1e\($0)")! }

    static func powerOfTen(_ k: Int) -> Double { powersOfTen[k] }
}
