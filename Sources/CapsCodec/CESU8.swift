/// Lenient string decoding for Caps `S` values (spec rokid-caps.md §3.7): standard UTF-8,
/// plus what Java's "modified UTF-8" produces: CESU-8 surrogate pairs (6 bytes for a
/// supplementary-plane character) and `C0 80` for U+0000. Anything else (a lone surrogate,
/// other overlong forms, stray continuation bytes, truncated sequences) is rejected.
enum CESU8 {
    /// Returns the string, or nil and the index of the first offending byte.
    static func decode(_ b: UnsafeBufferPointer<UInt8>) -> (String?, Int) {
        var out = [UInt8]()
        out.reserveCapacity(b.count)
        var i = 0
        let n = b.count
        @inline(__always) func cont(_ k: Int) -> Bool { k < n && b[k] & 0xC0 == 0x80 }
        while i < n {
            let c = b[i]
            switch c {
            case 0x00...0x7F:
                out.append(c)
                i += 1
            case 0xC0:
                guard i + 1 < n, b[i + 1] == 0x80 else { return (nil, i) }
                out.append(0)
                i += 2
            case 0xC2...0xDF:
                guard cont(i + 1) else { return (nil, i) }
                out.append(c); out.append(b[i + 1])
                i += 2
            case 0xE0...0xEF:
                guard cont(i + 1), cont(i + 2) else { return (nil, i) }
                let c1 = b[i + 1]
                if c == 0xE0 && c1 < 0xA0 { return (nil, i) }  // overlong
                if c == 0xED && c1 >= 0xA0 {
                    // A surrogate: only a high one followed by a low one is accepted.
                    guard c1 <= 0xAF, i + 5 < n, b[i + 3] == 0xED, b[i + 4] >= 0xB0, b[i + 4] <= 0xBF, cont(i + 5) else {
                        return (nil, i)
                    }
                    let high = 0xD000 | UInt32(c1 & 0x3F) << 6 | UInt32(b[i + 2] & 0x3F)
                    let low = 0xD000 | UInt32(b[i + 4] & 0x3F) << 6 | UInt32(b[i + 5] & 0x3F)
                    let scalar = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                    out.append(0xF0 | UInt8(scalar >> 18))
                    out.append(0x80 | UInt8((scalar >> 12) & 0x3F))
                    out.append(0x80 | UInt8((scalar >> 6) & 0x3F))
                    out.append(0x80 | UInt8(scalar & 0x3F))
                    i += 6
                } else {
                    out.append(c); out.append(c1); out.append(b[i + 2])
                    i += 3
                }
            case 0xF0...0xF4:
                guard cont(i + 1), cont(i + 2), cont(i + 3) else { return (nil, i) }
                let c1 = b[i + 1]
                if c == 0xF0 && c1 < 0x90 { return (nil, i) }  // overlong
                if c == 0xF4 && c1 > 0x8F { return (nil, i) }  // above U+10FFFF
                out.append(c); out.append(c1); out.append(b[i + 2]); out.append(b[i + 3])
                i += 4
            default:
                return (nil, i)
            }
        }
        return (String(validating: out, as: UTF8.self), 0)
    }
}
