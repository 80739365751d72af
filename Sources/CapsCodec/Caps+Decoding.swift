import BinaryCoding

extension Caps {
    /// Decodes one complete object that fills `bytes` exactly (the strict whole-buffer parse,
    /// spec rokid-caps.md §3.4 `Caps::parse`). A buffer shorter than the declared size throws
    /// ``CapsError/needMoreData(offset:needed:)``; extra bytes after it, a wrong version, a
    /// size mismatch, overflowing or over-long LEB128 and unknown type codes throw
    /// ``CapsError/malformed(_:offset:)``. Any LEB128 encoding within the byte limits is
    /// accepted (§3.2); strings may be CESU-8 (§3.7).
    public init(decoding bytes: [UInt8], sizeLimit: Int = Int(UInt32.max)) throws(CapsError) {
        self = try bytes.withUnsafeBufferPointer { (buf) throws(CapsError) -> Caps in
            try CapsParser.decodeWhole(buf, sizeLimit: sizeLimit)
        }
    }

    /// Decodes one complete object that fills `bytes` exactly; offsets in errors are relative
    /// to `bytes.startIndex`. See ``init(decoding:sizeLimit:)-([UInt8],_)``.
    public init(decoding bytes: ArraySlice<UInt8>, sizeLimit: Int = Int(UInt32.max)) throws(CapsError) {
        self = try bytes.withUnsafeBufferPointer { (buf) throws(CapsError) -> Caps in
            try CapsParser.decodeWhole(buf, sizeLimit: sizeLimit)
        }
    }

    /// The stream form of the parse (§3.4 `parse2`, §4.5): decodes the object at the start of
    /// `bytes` and returns it with the number of bytes it used, or `nil` while the object is
    /// still incomplete. Bytes after the object are left alone. A declared size of 5 or less,
    /// above `sizeLimit`, or any malformation throws. `baseOffset` is added to error offsets.
    public static func decodePrefix(
        of bytes: ArraySlice<UInt8>, sizeLimit: Int = Caps.defaultSizeLimit, baseOffset: Int = 0
    ) throws(CapsError) -> (caps: Caps, consumed: Int)? {
        do {
            return try bytes.withUnsafeBufferPointer { (buf) throws(CapsError) -> (caps: Caps, consumed: Int) in
                try CapsParser.decodePrefix(buf, sizeLimit: sizeLimit, base: baseOffset)
            }
        } catch {
            if error.isNeedMoreData { return nil }
            throw error
        }
    }

    /// Reads one object from `reader` (the `init(parsing:)` convention of swift-binary-parsing).
    /// On ``CapsError/needMoreData(offset:needed:)`` or any error the reader is left untouched.
    public init(parsing reader: inout ByteReader, sizeLimit: Int = Caps.defaultSizeLimit) throws(CapsError) {
        var copy = reader
        let rest = copy.readRemaining()
        let (caps, used) = try rest.withUnsafeBufferPointer { (buf) throws(CapsError) -> (caps: Caps, consumed: Int) in
            try CapsParser.decodePrefix(buf, sizeLimit: sizeLimit, base: reader.offset)
        }
        try? reader.skip(used)
        self = caps
    }
}

/// The Caps v5 decoder over contiguous bytes (§3.1–§3.3). Internal; the public entry points
/// are on ``Caps`` and ``CapsStreamReader``.
struct CapsParser {
    let buf: UnsafeBufferPointer<UInt8>
    /// Added to indices to form the offsets reported in errors.
    let base: Int
    /// True when decoding a bare LEB128 value (not inside an object): running off the end of
    /// the input then means *need more data*, not *malformed*.
    let bare: Bool
    var i = 0

    init(_ buf: UnsafeBufferPointer<UInt8>, base: Int, bare: Bool = false) {
        self.buf = buf
        self.base = base
        self.bare = bare
    }

    @inline(__always)
    func fail(_ m: CapsError.Malformation, at index: Int) -> CapsError {
        .malformed(m, offset: base + index)
    }

    @inline(__always)
    func pastEnd(_ what: String, at index: Int, end: Int) -> CapsError {
        // Only a bare value can be completed by more data: an object's bytes are all present
        // before its members are read.
        if bare { return .needMoreData(offset: base + end, needed: 1) }
        return .malformed(.pastEnd(what), offset: base + index)
    }

    @inline(__always)
    func bigEndian32(at index: Int) -> UInt32 {
        UInt32(buf[index]) << 24 | UInt32(buf[index + 1]) << 16 | UInt32(buf[index + 2]) << 8 | UInt32(buf[index + 3])
    }

    // MARK: Top level

    /// Checks the header of the object at index 0 and returns its declared size.
    /// Throws need-more-data when fewer than 4 bytes are present.
    static func checkHeader(_ buf: UnsafeBufferPointer<UInt8>, sizeLimit: Int, base: Int) throws(CapsError) -> Int {
        guard buf.count >= 4 else { throw .needMoreData(offset: base + buf.count, needed: 4 - buf.count) }
        let p = CapsParser(buf, base: base)
        let size = p.bigEndian32(at: 0)
        guard size > 5 else { throw p.fail(.sizeTooSmall(size), at: 0) }
        guard UInt64(size) <= UInt64(max(sizeLimit, 0)) else { throw p.fail(.sizeAboveLimit(size, limit: sizeLimit), at: 0) }
        if buf.count >= 5, buf[4] != Caps.version { throw p.fail(.unsupportedVersion(buf[4]), at: 4) }
        let s = Int(size)
        guard buf.count >= s else { throw .needMoreData(offset: base + buf.count, needed: s - buf.count) }
        return s
    }

    static func decodeWhole(_ buf: UnsafeBufferPointer<UInt8>, sizeLimit: Int) throws(CapsError) -> Caps {
        let size = try checkHeader(buf, sizeLimit: sizeLimit, base: 0)
        var p = CapsParser(buf, base: 0)
        guard buf.count == size else { throw p.fail(.trailingBytes(count: buf.count - size), at: size) }
        return try p.parseBody(start: 0, size: size, depth: 0)
    }

    static func decodePrefix(_ buf: UnsafeBufferPointer<UInt8>, sizeLimit: Int, base: Int) throws(CapsError) -> (caps: Caps, consumed: Int) {
        let size = try checkHeader(buf, sizeLimit: sizeLimit, base: base)
        var p = CapsParser(buf, base: base)
        return (try p.parseBody(start: 0, size: size, depth: 0), size)
    }

    // MARK: Objects

    /// A nested object (§3.3) that must lie within `[i, end)`.
    mutating func parseNested(end: Int, depth: Int) throws(CapsError) -> Caps {
        let start = i
        guard depth <= Caps.maxNestingDepth else { throw fail(.nestingTooDeep(limit: Caps.maxNestingDepth), at: start) }
        guard end - start >= 4 else { throw fail(.pastEnd("nested object header"), at: start) }
        let size = bigEndian32(at: start)
        guard size > 5 else { throw fail(.sizeTooSmall(size), at: start) }
        guard UInt64(size) <= UInt64(end - start) else { throw fail(.pastEnd("nested object of \(size) bytes"), at: start) }
        return try parseBody(start: start, size: Int(size), depth: depth)
    }

    /// Version, count, type codes and values of the object at `start` whose `size` bytes are
    /// known to be present (§3.1).
    mutating func parseBody(start: Int, size: Int, depth: Int) throws(CapsError) -> Caps {
        let end = start + size
        i = start + 4
        let version = buf[i]
        guard version == Caps.version else { throw fail(.unsupportedVersion(version), at: i) }
        i += 1
        let count = Int(try readULEB32(what: "member count", end: end))
        guard count <= end - i else { throw fail(.pastEnd("type code list of \(count) members"), at: i) }
        let codes = i
        for k in codes..<(codes + count) where CapsType(rawValue: buf[k]) == nil {
            throw fail(.unknownTypeCode(buf[k]), at: k)
        }
        i += count
        var members = [CapsValue]()
        members.reserveCapacity(count)
        for k in codes..<(codes + count) {
            switch buf[k] {
            case 0x56: members.append(.void)
            case 0x69: members.append(.int32(try readSLEB32(what: "int32", end: end)))
            case 0x75: members.append(.uint32(try readULEB32(what: "uint32", end: end)))
            case 0x6C: members.append(.int64(try readSLEB64(what: "int64", end: end)))
            case 0x6B: members.append(.uint64(try readULEB64(what: "uint64", end: end)))
            case 0x66:
                guard end - i >= 4 else { throw fail(.pastEnd("float32"), at: i) }
                let bits = UInt32(littleEndian: UnsafeRawPointer(buf.baseAddress! + i).loadUnaligned(as: UInt32.self))
                i += 4
                members.append(.float(Float(bitPattern: bits)))
            case 0x64:
                guard end - i >= 8 else { throw fail(.pastEnd("float64"), at: i) }
                let bits = UInt64(littleEndian: UnsafeRawPointer(buf.baseAddress! + i).loadUnaligned(as: UInt64.self))
                i += 8
                members.append(.double(Double(bitPattern: bits)))
            case 0x53: members.append(.string(try readString(end: end)))
            case 0x42:
                let at = i
                let n = Int(try readULEB32(what: "binary length", end: end))
                guard n <= end - i else { throw fail(.pastEnd("binary of \(n) bytes"), at: at) }
                members.append(.binary(Array(UnsafeBufferPointer(rebasing: buf[i..<(i + n)]))))
                i += n
            default:  // 0x4F, the only code left after the check above
                members.append(.object(try parseNested(end: end, depth: depth + 1)))
            }
        }
        guard i == end else { throw fail(.sizeMismatch(declared: UInt32(size), used: i - start), at: i) }
        return Caps(members)
    }

    mutating func readString(end: Int) throws(CapsError) -> String {
        let at = i
        let n = Int(try readULEB32(what: "string length", end: end))
        guard n <= end - i else { throw fail(.pastEnd("string of \(n) bytes"), at: at) }
        let bytes = UnsafeBufferPointer(rebasing: buf[i..<(i + n)])
        if let s = String(validating: bytes, as: UTF8.self) {
            i += n
            return s
        }
        let (decoded, bad) = CESU8.decode(bytes)
        guard let decoded else { throw fail(.invalidUTF8, at: i + bad) }
        i += n
        return decoded
    }

    // MARK: LEB128 (§3.2)

    mutating func readULEB32(what: String, end: Int) throws(CapsError) -> UInt32 {
        let start = i
        guard i < end else { throw pastEnd(what, at: start, end: end) }
        var b = buf[i]
        i += 1
        if b < 0x80 { return UInt32(b) }
        var result = UInt32(b & 0x7F)
        var shift: UInt32 = 7
        while true {
            guard i < end else { throw pastEnd(what, at: start, end: end) }
            b = buf[i]
            i += 1
            if shift == 28 {
                if b & 0x80 != 0 { throw fail(.integerTooLong(bits: 32), at: start) }
                if b > 0x0F { throw fail(.integerOverflow(bits: 32), at: start) }
            }
            result |= UInt32(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
        }
    }

    mutating func readULEB64(what: String, end: Int) throws(CapsError) -> UInt64 {
        let start = i
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard i < end else { throw pastEnd(what, at: start, end: end) }
            let b = buf[i]
            i += 1
            if shift == 63 {
                if b & 0x80 != 0 { throw fail(.integerTooLong(bits: 64), at: start) }
                if b > 0x01 { throw fail(.integerOverflow(bits: 64), at: start) }
            }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
        }
    }

    mutating func readSLEB32(what: String, end: Int) throws(CapsError) -> Int32 {
        let start = i
        var result: Int64 = 0
        var shift: Int64 = 0
        while true {
            guard i < end else { throw pastEnd(what, at: start, end: end) }
            let b = buf[i]
            i += 1
            if shift == 28 {
                if b & 0x80 != 0 { throw fail(.integerTooLong(bits: 32), at: start) }
                // Bits 31...34 must all equal the sign.
                let top = b & 0x78
                if top != 0 && top != 0x78 { throw fail(.integerOverflow(bits: 32), at: start) }
            }
            result |= Int64(b & 0x7F) << shift
            shift += 7
            if b & 0x80 == 0 {
                if b & 0x40 != 0 { result |= -1 << shift }
                return Int32(truncatingIfNeeded: result)
            }
        }
    }

    mutating func readSLEB64(what: String, end: Int) throws(CapsError) -> Int64 {
        let start = i
        var result: Int64 = 0
        var shift: Int64 = 0
        while true {
            guard i < end else { throw pastEnd(what, at: start, end: end) }
            let b = buf[i]
            i += 1
            if shift == 63 {
                if b & 0x80 != 0 { throw fail(.integerTooLong(bits: 64), at: start) }
                // Bit 63 and the sign bits above it must agree.
                if b != 0 && b != 0x7F { throw fail(.integerOverflow(bits: 64), at: start) }
            }
            result |= Int64(b & 0x7F) << shift
            shift += 7
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 { result |= -1 << shift }
                return result
            }
        }
    }
}
