import BinaryCoding

/// Bytes → JSON (docs/layouts.md, "Decoding").
extension GattLayout {
    /// Decodes one characteristic value to a JSON object whose keys follow the layout's field order.
    ///
    /// Throws ``GattLayoutError/needMoreData(field:offset:needed:available:)`` when the bytes end
    /// inside a field and ``GattLayoutError/malformed(field:offset:reason:)`` when they are wrong
    /// (invalid UTF-8, a value outside `min`/`max`, bytes left after the last field).
    public func decode(_ bytes: [UInt8]) throws(GattLayoutError) -> JSONValue {
        try decode(bytes[...])
    }

    /// Decodes one characteristic value held in a slice (offsets are relative to its start).
    public func decode(_ bytes: ArraySlice<UInt8>) throws(GattLayoutError) -> JSONValue {
        var decoder = LayoutDecoder(reader: ByteReader(bytes), presence: Array(repeating: false, count: presenceBitCount))
        var out = JSONObject()
        try decoder.decodeFields(fields, into: &out, prefix: "")
        if !decoder.reader.isAtEnd {
            throw .malformed(
                field: fields.last?.name ?? "", offset: decoder.reader.offset,
                reason: "\(decoder.reader.remaining) unexpected byte(s) after the last field")
        }
        return .object(out)
    }
}

struct LayoutDecoder {
    var reader: ByteReader
    var presence: [Bool]

    mutating func decodeFields(_ fields: [GattLayout.Field], into out: inout JSONObject, prefix: String) throws(GattLayoutError) {
        for field in fields {
            if let c = field.condition, presence[c.presenceIndex] != c.whenSet { continue }
            let path = FieldPath(prefix: prefix, name: field.name)
            switch field.type {
            case let .flags(flags):
                let start = reader.offset
                let raw = try readUnsigned(byteCount: flags.byteCount, endianness: flags.endianness, path: path)
                for bit in flags.bits {
                    let mask: UInt64 = bit.width >= 64 ? .max : (UInt64(1) << UInt64(bit.width)) - 1
                    let v = (raw >> UInt64(bit.bit)) & mask
                    if let p = bit.presenceIndex {
                        presence[p] = v != 0
                    } else if bit.numeric.invalid.contains(v) {
                        continue  // "not available": no key
                    } else if let name = bit.enumeration.first(where: { Int64(exactly: v) == $0.value })?.name {
                        out[bit.name] = .string(name)
                    } else if bit.width == 1 && bit.enumeration.isEmpty && !bit.numeric.isScaled {
                        out[bit.name] = .bool(v != 0)
                    } else {
                        let exact = Int64(exactly: v).map(JSONValue.int) ?? .uint(v)
                        out[bit.name] = try bit.numeric.decoded(
                            exact: exact, Double(v), path: FieldPath(prefix: path.prefix, name: bit.name), offset: start)
                    }
                }
            case let .pad(length):
                let start = reader.offset
                let bytes = try read(length, path: path)
                if let constant = field.constant, !bytes.elementsEqual(constant) {
                    throw .malformed(
                        field: path.text, offset: start,
                        reason: "expected the bytes \(Hex.encode(constant)), found \(Hex.encode(bytes))")
                }
            default:
                switch field.repetition {
                case .once where !field.parts.isEmpty:
                    guard case let .integer(format, numeric) = field.type else { break }
                    let start = reader.offset
                    let raw = try readUnsigned(byteCount: format.byteCount, endianness: format.endianness, path: path)
                    if numeric.invalid.contains(raw) { continue }
                    let value = format.value(of: raw)
                    let negative: Bool
                    let magnitude: UInt64
                    switch value {
                    case let .int(i): negative = i < 0; magnitude = i.magnitude
                    case let .uint(u): negative = false; magnitude = u
                    default: negative = false; magnitude = 0
                    }
                    for part in field.parts {
                        var digits = magnitude / part.divide
                        if let m = part.modulo { digits %= m }
                        let partPath = FieldPath(prefix: prefix, name: part.name)
                        if part.signed && negative {
                            // digits ≤ UInt64.max / divide; a negative value's magnitude is at most 2^63.
                            let d = -Double(digits)
                            out[part.name] = try part.numeric.decoded(
                                exact: Int64(exactly: d).map(JSONValue.int), d, path: partPath, offset: start)
                        } else {
                            let exact = Int64(exactly: digits).map(JSONValue.int) ?? .uint(digits)
                            out[part.name] = try part.numeric.decoded(exact: exact, Double(digits), path: partPath, offset: start)
                        }
                    }
                case .once:
                    let value = try decodeValue(field.type, path: path)
                    if value != .null { out[field.name] = value }  // null: an `invalid` sentinel, no key
                case let .count(n):
                    var items: [JSONValue] = []
                    items.reserveCapacity(n)
                    for i in 0..<n { items.append(try decodeValue(field.type, path: path.element(i))) }
                    out[field.name] = .array(items)
                case .rest:
                    var items: [JSONValue] = []
                    if let size = field.type.fixedSize { items.reserveCapacity(reader.remaining / size) }
                    while !reader.isAtEnd { items.append(try decodeValue(field.type, path: path.element(items.count))) }
                    out[field.name] = .array(items)
                }
            }
        }
    }

    func needMore(_ e: ByteReaderError, _ path: FieldPath) -> GattLayoutError {
        switch e {
        case let .insufficientData(offset, needed, available):
            return .needMoreData(field: path.text, offset: offset, needed: needed, available: available)
        }
    }

    mutating func read(_ count: Int, path: FieldPath) throws(GattLayoutError) -> ArraySlice<UInt8> {
        do { return try reader.readBytes(count: count) } catch { throw needMore(error, path) }
    }

    mutating func readUnsigned(byteCount: Int, endianness: Endianness, path: FieldPath) throws(GattLayoutError) -> UInt64 {
        let bytes = try read(byteCount, path: path)
        var v: UInt64 = 0
        if endianness == .big {
            for b in bytes { v = v << 8 | UInt64(b) }
        } else {
            for b in bytes.reversed() { v = v << 8 | UInt64(b) }
        }
        return v
    }

    mutating func decodeValue(_ type: GattLayout.FieldType, path: FieldPath) throws(GattLayoutError) -> JSONValue {
        let start = reader.offset
        switch type {
        case let .integer(format, numeric):
            let raw = try readUnsigned(byteCount: format.byteCount, endianness: format.endianness, path: path)
            if numeric.invalid.contains(raw) { return .null }
            if format.isSigned, case let .int(value) = format.value(of: raw) {
                if let name = numeric.enumeration.first(where: { $0.value == value })?.name { return .string(name) }
                return try numeric.decoded(exact: .int(value), Double(value), path: path, offset: start)
            }
            if raw <= UInt64(Int64.max), let name = numeric.enumeration.first(where: { $0.value == Int64(raw) })?.name {
                return .string(name)
            }
            let exact: JSONValue = raw <= UInt64(Int64.max) ? .int(Int64(raw)) : .uint(raw)
            return try numeric.decoded(exact: exact, Double(raw), path: path, offset: start)
        case let .ieee754(byteCount, endianness, numeric):
            let raw = try readUnsigned(byteCount: byteCount, endianness: endianness, path: path)
            let d: Double
            if byteCount == 4 {
                let f = Float(bitPattern: UInt32(truncatingIfNeeded: raw))
                // The shortest decimal that reads back as this binary32 (36.4, not 36.400001525878906).
                d = f.isFinite ? Double(String(describing: f)) ?? Double(f) : Double(f)
            } else {
                d = Double(bitPattern: raw)
            }
            if d.isNaN { return .string(IEEE11073Float.Value.Special.nan.rawValue) }
            if d.isInfinite {
                return .string((d > 0 ? IEEE11073Float.Value.Special.positiveInfinity : .negativeInfinity).rawValue)
            }
            return try numeric.decoded(exact: nil, d, path: path, offset: start)
        case let .medfloat(format, endianness, numeric):
            let raw = try readUnsigned(byteCount: format.byteCount, endianness: endianness, path: path)
            switch IEEE11073Float.decode(UInt32(truncatingIfNeeded: raw), format: format) {
            case let .special(s): return .string(s.rawValue)
            case let .number(d): return try numeric.decoded(exact: nil, d, path: path, offset: start)
            }
        case let .utf8(length):
            var bytes: ArraySlice<UInt8>
            if let length {
                bytes = try read(length, path: path)
                while bytes.last == 0 { bytes.removeLast() }  // NUL padding of a fixed-length string
            } else {
                bytes = reader.readRemaining()
            }
            guard let s = String(validating: bytes, as: UTF8.self) else {
                throw .malformed(field: path.text, offset: start, reason: "not valid UTF-8")
            }
            return .string(s)
        case let .bytes(length):
            let bytes = try length.map { n throws(GattLayoutError) in try read(n, path: path) } ?? reader.readRemaining()
            return .string(Hex.encode(bytes))
        case let .structure(members):
            var out = JSONObject()
            try decodeFields(members, into: &out, prefix: path.text + ".")
            return .object(out)
        case .flags, .pad:
            throw .malformed(field: path.text, offset: start, reason: "flags and pad fields have no value")
        }
    }
}

extension GattLayout.Numeric {
    /// Applies scale and offset to a raw number and checks `min`/`max`. `exact` is the JSON for an
    /// unscaled integer (kept exact to 64 bits).
    func decoded(exact: JSONValue?, _ raw: Double, path: FieldPath, offset at: Int) throws(GattLayoutError) -> JSONValue {
        var value = raw
        if isScaled { value = scaled(raw) }
        if let minimum, value < minimum {
            throw .malformed(field: path.text, offset: at, reason: "value \(Self.text(value)) is below the minimum \(Self.text(minimum))")
        }
        if let maximum, value > maximum {
            throw .malformed(field: path.text, offset: at, reason: "value \(Self.text(value)) is above the maximum \(Self.text(maximum))")
        }
        if !isScaled, let exact { return exact }
        return .double(value)
    }

    /// raw × scale + offset; a scale that is 1/k for a whole k divides by k, so 7 × 0.1 gives 0.7.
    /// When the raw value is whole and scale and offset are decimals of at most 12 places, the
    /// sum is done in whole numbers and divided once by the power of ten, so the result is the
    /// double nearest the exact decimal (1377 × 0.001 + 1.6 gives 2.977, not 2.9770000000000003).
    func scaled(_ raw: Double) -> Double {
        if let exact = decimalScaled(raw) { return exact }
        var v = raw
        if let scale {
            let inverse = 1 / scale
            v = inverse.rounded() == inverse && abs(inverse) > 1 ? raw / inverse : raw * scale
        }
        return v + (offset ?? 0)
    }

    func decimalScaled(_ raw: Double) -> Double? {
        let limit = 9007199254740992.0  // 2^53: every whole double below it is exact
        guard raw.rounded() == raw, raw.magnitude < limit else { return nil }
        let scale = self.scale ?? 1, offset = self.offset ?? 0
        var power = 1.0
        for _ in 0...12 {
            let s = (scale * power).rounded(), o = (offset * power).rounded()
            if s / power == scale, o / power == offset {
                let product = raw * s
                guard product.magnitude < limit, o.magnitude < limit, (product + o).magnitude < limit else { return nil }
                return (product + o) / power
            }
            power *= 10
        }
        return nil
    }

    /// (value − offset) / scale, the inverse of ``scaled(_:)`` before rounding.
    func unscaled(_ value: Double) -> Double {
        var v = value - (offset ?? 0)
        if let scale {
            let inverse = 1 / scale
            v = inverse.rounded() == inverse && abs(inverse) > 1 ? v * inverse : v / scale
        }
        return v
    }

    static func text(_ d: Double) -> String { JSONValue.double(d).jsonText }
}

extension GattLayout.IntegerFormat {
    /// The number that raw wire bits stand for: `.uint` for unsigned fields, `.int` for signed
    /// ones (two's complement, or sign and magnitude).
    func value(of raw: UInt64) -> JSONValue {
        guard isSigned else { return raw <= UInt64(Int64.max) ? .int(Int64(raw)) : .uint(raw) }
        let bits = UInt64(byteCount * 8)
        if signMagnitude {
            let sign: UInt64 = 1 << (bits - 1)
            let magnitude = Int64(raw & (sign - 1))  // checked: below 2^63
            return .int(raw & sign != 0 ? -magnitude : magnitude)
        }
        let shift = 64 - bits
        return .int(Int64(bitPattern: raw << shift) >> Int64(shift))
    }
}

/// Where a value sits (`name`, `name[3]`, `time_stamp.year`), spelled out only when an error is thrown.
struct FieldPath {
    var prefix: String
    var name: String
    var index: Int? = nil

    var text: String { index.map { "\(prefix)\(name)[\($0)]" } ?? prefix + name }
    func element(_ i: Int) -> FieldPath { FieldPath(prefix: prefix, name: name, index: i) }
}

extension GattLayout.FieldType {
    /// The byte size of one value when it does not depend on the data.
    var fixedSize: Int? {
        switch self {
        case let .integer(format, _): return format.byteCount
        case let .ieee754(byteCount, _, _): return byteCount
        case let .medfloat(format, _, _): return format.byteCount
        case let .utf8(length), let .bytes(length): return length
        case let .pad(length): return length
        case let .flags(flags): return flags.byteCount
        case let .structure(members):
            var total = 0
            for m in members {
                guard let size = m.type.fixedSize else { return nil }
                switch m.repetition {
                case .once: total += size
                case let .count(n): total += size * n
                case .rest: return nil
                }
            }
            return total
        }
    }
}
