/// LEB128 integers as Caps uses them (spec rokid-caps.md §3.2): the standard DWARF /
/// WebAssembly rules, minimal on encode; on decode any encoding of at most 5 bytes (32-bit)
/// or 10 bytes (64-bit) is accepted and values that do not fit are rejected.
public enum LEB128 {
    /// Bytes the minimal ULEB128 form of `value` takes.
    @inlinable
    public static func unsignedSize(_ value: UInt64) -> Int {
        let bits = 64 - value.leadingZeroBitCount
        return bits == 0 ? 1 : (bits + 6) / 7
    }

    /// Bytes the minimal SLEB128 form of `value` takes.
    @inlinable
    public static func signedSize(_ value: Int64) -> Int {
        // Magnitude bits plus one sign bit.
        let bits = 65 - (value < 0 ? (~value).leadingZeroBitCount : value.leadingZeroBitCount)
        return (bits + 6) / 7
    }

    /// The minimal ULEB128 encoding of `value`.
    public static func encodeUnsigned(_ value: UInt64) -> [UInt8] {
        var out = [UInt8]()
        var v = value
        repeat {
            let byte = UInt8(v & 0x7F)
            v >>= 7
            out.append(v == 0 ? byte : byte | 0x80)
        } while v != 0
        return out
    }

    /// The minimal SLEB128 encoding of `value`.
    public static func encodeSigned(_ value: Int64) -> [UInt8] {
        var out = [UInt8]()
        var v = value
        while true {
            let byte = UInt8(truncatingIfNeeded: v) & 0x7F
            v >>= 7
            let done = (v == 0 && byte & 0x40 == 0) || (v == -1 && byte & 0x40 != 0)
            out.append(done ? byte : byte | 0x80)
            if done { return out }
        }
    }

    /// Decodes a ULEB128 value of `bits` (32 or 64) at the start of `bytes`; returns it and
    /// the number of bytes used. Offsets in errors are relative to `bytes`.
    public static func decodeUnsigned(_ bytes: [UInt8], bits: Int = 64) throws(CapsError) -> (value: UInt64, length: Int) {
        try bytes.withUnsafeBufferPointer { (buf) throws(CapsError) -> (value: UInt64, length: Int) in
            var p = CapsParser(buf, base: 0, bare: true)
            let v = bits == 32 ? UInt64(try p.readULEB32(what: "LEB128", end: buf.count)) : try p.readULEB64(what: "LEB128", end: buf.count)
            return (v, p.i)
        }
    }

    /// Decodes an SLEB128 value of `bits` (32 or 64) at the start of `bytes`; returns it and
    /// the number of bytes used.
    public static func decodeSigned(_ bytes: [UInt8], bits: Int = 64) throws(CapsError) -> (value: Int64, length: Int) {
        try bytes.withUnsafeBufferPointer { (buf) throws(CapsError) -> (value: Int64, length: Int) in
            var p = CapsParser(buf, base: 0, bare: true)
            let v = bits == 32 ? Int64(try p.readSLEB32(what: "LEB128", end: buf.count)) : try p.readSLEB64(what: "LEB128", end: buf.count)
            return (v, p.i)
        }
    }
}
