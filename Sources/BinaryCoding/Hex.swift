/// Hex text for the CLI, logs and tests (codecs work on bytes, never on hex).
public enum Hex {
    public struct DecodeError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Character offset in the input where the problem is.
        public let offset: Int
        public let reason: String
        public var description: String { "invalid hex at character \(offset): \(reason)" }
    }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Lowercase hex, no separators.
    public static func encode<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes hex text. Accepts upper/lower case, an optional `0x` prefix, and
    /// ignores spaces, tabs, newlines, `:` and `-` between byte pairs.
    public static func decode(_ text: String) throws(DecodeError) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count / 2)
        var utf8 = Array(text.utf8)
        var offset = 0
        if utf8.count >= 2, utf8[0] == UInt8(ascii: "0"), utf8[1] | 0x20 == UInt8(ascii: "x") {
            utf8.removeFirst(2)
            offset = 2
        }
        var high: UInt8? = nil
        var highOffset = 0
        for (i, c) in utf8.enumerated() {
            let at = i + offset
            let v: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v = c - UInt8(ascii: "A") + 10
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"),
                UInt8(ascii: ":"), UInt8(ascii: "-"):
                if high != nil { throw DecodeError(offset: at, reason: "separator inside a byte") }
                continue
            default:
                throw DecodeError(offset: at, reason: "unexpected character '\(Character(Unicode.Scalar(c)))'")
            }
            if let h = high {
                out.append(h << 4 | v)
                high = nil
            } else {
                high = v
                highOffset = at
            }
        }
        if high != nil { throw DecodeError(offset: highOffset, reason: "odd number of hex digits") }
        return out
    }
}
