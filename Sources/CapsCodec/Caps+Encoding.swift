extension Caps {
    /// The exact number of bytes ``encoded()`` produces (§3.1: the inclusive total size).
    /// Throws ``CapsError/unencodable(reason:)`` when an object would exceed a uint32 size or
    /// nesting is deeper than ``maxNestingDepth``.
    public func encodedSize() throws(CapsError) -> Int {
        try Caps.size(of: self, depth: 0)
    }

    /// The Caps v5 bytes of this object (§3.1–§3.3): inclusive big-endian size, version 5,
    /// ULEB128 member count, type codes, then the values; LEB128 in minimal form, floats little
    /// endian, strings as standard UTF-8 (U+0000 is written as a 0 byte).
    public func encoded() throws(CapsError) -> [UInt8] {
        let size = try encodedSize()
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var w = CapsWriter(base: buffer.baseAddress!)
            w.write(self)
            count = w.position
        }
    }

    /// Appends the encoded bytes to `bytes`.
    public func encode(into bytes: inout [UInt8]) throws(CapsError) {
        bytes.append(contentsOf: try encoded())
    }

    static func size(of caps: Caps, depth: Int) throws(CapsError) -> Int {
        guard depth <= maxNestingDepth else {
            throw .unencodable(reason: "objects nested deeper than \(maxNestingDepth) levels")
        }
        var total = 5 + LEB128.unsignedSize(UInt64(caps.members.count)) + caps.members.count
        for m in caps.members {
            switch m {
            case .void: break
            case let .int32(v): total += LEB128.signedSize(Int64(v))
            case let .uint32(v): total += LEB128.unsignedSize(UInt64(v))
            case let .int64(v): total += LEB128.signedSize(v)
            case let .uint64(v): total += LEB128.unsignedSize(v)
            case .float: total += 4
            case .double: total += 8
            case let .string(s):
                let n = s.utf8.count
                guard n <= UInt32.max else { throw .unencodable(reason: "string of \(n) bytes exceeds a uint32 length") }
                total += LEB128.unsignedSize(UInt64(n)) + n
            case let .binary(b):
                guard b.count <= UInt32.max else { throw .unencodable(reason: "binary of \(b.count) bytes exceeds a uint32 length") }
                total += LEB128.unsignedSize(UInt64(b.count)) + b.count
            case let .object(o): total += try size(of: o, depth: depth + 1)
            }
        }
        guard total <= UInt32.max else { throw .unencodable(reason: "object of \(total) bytes exceeds the uint32 size field") }
        return total
    }
}

/// Writes into a buffer already sized by ``Caps/encodedSize()``; nested sizes are back-patched.
struct CapsWriter {
    let base: UnsafeMutablePointer<UInt8>
    var position = 0

    init(base: UnsafeMutablePointer<UInt8>) { self.base = base }

    @inline(__always)
    mutating func byte(_ b: UInt8) {
        base[position] = b
        position += 1
    }

    @inline(__always)
    mutating func uleb(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            byte(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        byte(UInt8(v))
    }

    @inline(__always)
    mutating func sleb(_ value: Int64) {
        var v = value
        while true {
            let b = UInt8(truncatingIfNeeded: v) & 0x7F
            v >>= 7
            if (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0) {
                byte(b)
                return
            }
            byte(b | 0x80)
        }
    }

    @inline(__always)
    mutating func raw(_ p: UnsafeRawBufferPointer) {
        guard let src = p.baseAddress, p.count > 0 else { return }
        (base + position).initialize(from: src.assumingMemoryBound(to: UInt8.self), count: p.count)
        position += p.count
    }

    mutating func write(_ caps: Caps) {
        let start = position
        position += 4
        byte(Caps.version)
        uleb(UInt64(caps.members.count))
        for m in caps.members { byte(m.type.rawValue) }
        for m in caps.members {
            switch m {
            case .void: break
            case let .int32(v): sleb(Int64(v))
            case let .uint32(v): uleb(UInt64(v))
            case let .int64(v): sleb(v)
            case let .uint64(v): uleb(v)
            case let .float(v):
                var le = v.bitPattern.littleEndian
                withUnsafeBytes(of: &le) { raw($0) }
            case let .double(v):
                var le = v.bitPattern.littleEndian
                withUnsafeBytes(of: &le) { raw($0) }
            case let .string(s):
                var s = s
                s.withUTF8 { u in
                    uleb(UInt64(u.count))
                    raw(UnsafeRawBufferPointer(u))
                }
            case let .binary(b):
                uleb(UInt64(b.count))
                b.withUnsafeBytes { raw($0) }
            case let .object(o): write(o)
            }
        }
        let size = UInt32(position - start)
        base[start] = UInt8(size >> 24)
        base[start + 1] = UInt8(truncatingIfNeeded: size >> 16)
        base[start + 2] = UInt8(truncatingIfNeeded: size >> 8)
        base[start + 3] = UInt8(truncatingIfNeeded: size)
    }
}
