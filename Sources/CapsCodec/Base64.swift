/// Standard base64 (RFC 4648 §4, `+/`, `=` padding) for `B` members in the JSON mapping
/// (docs/caps.md). Small and Foundation-free so the codec module stays pure.
public enum Base64 {
    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Padded base64 text of `bytes`.
    public static func encode<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var it = bytes.makeIterator()
        while let a = it.next() {
            let b = it.next(), c = it.next()
            let n = UInt32(a) << 16 | UInt32(b ?? 0) << 8 | UInt32(c ?? 0)
            out.append(alphabet[Int(n >> 18)])
            out.append(alphabet[Int((n >> 12) & 63)])
            out.append(b == nil ? UInt8(ascii: "=") : alphabet[Int((n >> 6) & 63)])
            out.append(c == nil ? UInt8(ascii: "=") : alphabet[Int(n & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A base64 syntax error: `offset` is the character index in the text.
    public struct DecodeError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Character index of the problem.
        public let offset: Int
        /// What is wrong.
        public let reason: String
        /// One line: what and where.
        public var description: String { "invalid base64 at character \(offset): \(reason)" }
    }

    /// Decodes standard base64. Padding may be omitted; white space is not allowed; bits left
    /// over in the last character must be zero (so every byte string has one text form).
    public static func decode(_ text: String) throws(DecodeError) -> [UInt8] {
        let t = Array(text.utf8)
        var end = t.count
        var pad = 0
        while end > 0, t[end - 1] == UInt8(ascii: "=") { end -= 1; pad += 1 }
        if pad > 2 { throw DecodeError(offset: end, reason: "too much padding") }
        if pad > 0, t.count % 4 != 0 { throw DecodeError(offset: end, reason: "padding does not complete a 4-character group") }
        if end % 4 == 1 { throw DecodeError(offset: end - 1, reason: "a single character cannot end the text") }
        var out = [UInt8]()
        out.reserveCapacity(end / 4 * 3 + 2)
        var acc: UInt32 = 0
        var bits = 0
        for k in 0..<end {
            let c = t[k]
            let v: UInt32
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - UInt8(ascii: "a") + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - UInt8(ascii: "0") + 52)
            case UInt8(ascii: "+"): v = 62
            case UInt8(ascii: "/"): v = 63
            case UInt8(ascii: "="): throw DecodeError(offset: k, reason: "padding in the middle")
            default: throw DecodeError(offset: k, reason: "unexpected character")
            }
            acc = acc << 6 | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
                acc &= (1 << UInt32(bits)) - 1
            }
        }
        if acc != 0 { throw DecodeError(offset: end - 1, reason: "non-zero bits after the last byte") }
        return out
    }
}
