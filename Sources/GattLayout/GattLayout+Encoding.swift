import BinaryCoding

/// JSON → bytes (docs/layouts.md, "Encoding").
extension GattLayout {
    /// Encodes a JSON object to one characteristic value.
    ///
    /// Presence flag bits are computed from which fields the object has; two alternatives of one
    /// name (e.g. an 8-bit and a 16-bit heart rate) take the first, in layout order, that can hold
    /// the value. Named flag bits absent from the object are 0. Unknown keys, missing fields, wrong
    /// JSON types and values out of range throw ``GattLayoutError/invalidValue(path:reason:)``.
    public func encode(_ value: JSONValue) throws(GattLayoutError) -> [UInt8] {
        guard case let .object(object) = value else {
            throw .invalidValue(path: "", reason: "expected a JSON object, found \(value.typeName)")
        }
        try Self.checkKnownKeys(object, fields: fields, prefix: "")
        let presence = try resolvePresence(object)
        var encoder = LayoutEncoder(presence: presence)
        try encoder.encodeFields(fields, object, prefix: "")
        return encoder.writer.take()
    }

    /// Decides every presence bit from the keys present in `object`.
    func resolvePresence(_ object: JSONObject) throws(GattLayoutError) -> [Bool] {
        var presence = [Bool?](repeating: nil, count: presenceBitCount)
        // Pass 0: single fields fix their bits; pass 1: alternatives choose within what is left.
        for pass in 0..<2 {
            for (index, field) in fields.enumerated() {
                guard let condition = field.condition, (alternatives[index] != nil) == (pass == 1),
                    let value = object[field.name]
                else { continue }
                // Alternatives (same name, same bit, other sense: checked by the parser) are handled
                // once, at the first of the pair.
                let isSecondAlternative = alternatives[index].map { !$0.isFirst } ?? false
                let alternative = alternatives[index].flatMap { $0.isFirst ? fields[$0.other] : nil }
                if let alt = alternative, let altCondition = alt.condition {
                    // Does the candidate hold the value? (nil: yes; otherwise why not)
                    func refusal(_ candidate: Field) -> GattLayoutError? {
                        var trial = LayoutEncoder(presence: [], writer: ByteWriter())
                        let path = FieldPath(prefix: "", name: candidate.name)
                        do throws(GattLayoutError) {
                            if case let .integer(format, numeric) = candidate.type, candidate.repetition == .once {
                                _ = try trial.integerBits(format, numeric, value, path: path)  // a range check, no bytes
                            } else {
                                try trial.encodeRepeated(candidate, value, path: path)
                            }
                            return nil
                        } catch {
                            return error
                        }
                    }
                    let fixed = presence[condition.presenceIndex]
                    var chosen: Bool? = nil
                    var lastError: GattLayoutError? = nil
                    if fixed == nil || fixed == condition.whenSet {
                        lastError = refusal(field)
                        if lastError == nil { chosen = condition.whenSet }
                    }
                    if chosen == nil, fixed == nil || fixed == altCondition.whenSet {
                        lastError = refusal(alt)
                        if lastError == nil { chosen = altCondition.whenSet }
                    }
                    guard let chosen else {
                        throw lastError ?? .invalidValue(path: field.name, reason: "no alternative of '\(field.name)' fits")
                    }
                    presence[altCondition.presenceIndex] = chosen
                    continue
                }
                if isSecondAlternative { continue }
                if let fixed = presence[condition.presenceIndex], fixed != condition.whenSet {
                    let other = fields.first { $0.condition?.presenceIndex == condition.presenceIndex && $0.condition?.whenSet == fixed && object[$0.name] != nil }
                    throw .invalidValue(
                        path: field.name,
                        reason: "'\(field.name)' needs flag bit '\(condition.bitName)' \(condition.whenSet ? "set" : "clear"), but '\(other?.name ?? "?")' needs it \(fixed ? "set" : "clear"); give only one of them")
                }
                presence[condition.presenceIndex] = condition.whenSet
            }
        }
        // Bits no given field decides: make the absent fields absent when they agree on how.
        // 0: no absent field cares, 1: leave clear, 2: leave set, 3: they disagree.
        var wanted = [UInt8](repeating: 0, count: presenceBitCount)
        for field in fields {
            guard let c = field.condition, presence[c.presenceIndex] == nil, object[field.name] == nil else { continue }
            wanted[c.presenceIndex] |= c.whenSet ? 1 : 2
        }
        return (0..<presenceBitCount).map { i in presence[i] ?? (wanted[i] == 2) }
    }
}

struct LayoutEncoder {
    let presence: [Bool]
    var writer = ByteWriter(capacity: 16)

    mutating func encodeFields(_ fields: [GattLayout.Field], _ object: JSONObject, prefix: String) throws(GattLayoutError) {
        for field in fields {
            if let c = field.condition, presence[c.presenceIndex] != c.whenSet { continue }
            let path = FieldPath(prefix: prefix, name: field.name)
            switch field.type {
            case let .flags(flags):
                var raw: UInt64 = 0
                for bit in flags.bits {
                    let v: UInt64
                    if let p = bit.presenceIndex {
                        v = presence[p] ? 1 : 0
                    } else {
                        v = try flagValue(bit, object[bit.name], path: FieldPath(prefix: prefix, name: bit.name))
                    }
                    raw |= v << UInt64(bit.bit)
                }
                writeUnsigned(raw, byteCount: flags.byteCount, endianness: flags.endianness)
            case let .pad(length):
                if let constant = field.constant {
                    writer.writeBytes(constant)
                } else {
                    writer.writeBytes(repeatElement(0 as UInt8, count: length))
                }
            case let .integer(format, numeric) where !field.parts.isEmpty:
                try encodeParts(field.parts, format, numeric, object, prefix: prefix)
            case let .integer(format, numeric) where field.repetition == .once && object[field.name] == nil && !numeric.invalid.isEmpty:
                writeUnsigned(numeric.invalid[0], byteCount: format.byteCount, endianness: format.endianness)
            default:
                guard let value = object[field.name] else {
                    var reason = "missing field '\(field.name)'"
                    if let c = field.condition {
                        reason += " (required while flag bit '\(c.bitName)' is \(c.whenSet ? "set" : "clear"))"
                    }
                    throw .invalidValue(path: path.text, reason: reason)
                }
                try encodeRepeated(field, value, path: path)
            }
        }
    }

    /// A field with `parts`: the parts' digits summed back into one integer (sign and magnitude,
    /// or two's complement, as the field's type says). A missing part is 0, or, when every part
    /// is missing and the field has `invalid`, the field is written as its first invalid value.
    mutating func encodeParts(
        _ parts: [GattLayout.Part], _ format: GattLayout.IntegerFormat, _ numeric: GattLayout.Numeric,
        _ object: JSONObject, prefix: String
    ) throws(GattLayoutError) {
        if !numeric.invalid.isEmpty, parts.allSatisfy({ object[$0.name] == nil }) {
            writeUnsigned(numeric.invalid[0], byteCount: format.byteCount, endianness: format.endianness)
            return
        }
        var magnitude: UInt64 = 0
        var negative = false
        for part in parts {
            let path = FieldPath(prefix: prefix, name: part.name)
            guard let value = object[part.name] else { throw .invalidValue(path: path.text, reason: "missing field '\(part.name)'") }
            guard let d = value.doubleValue else { throw .invalidValue(path: path.text, reason: "expected a number, found \(value.typeName)") }
            try part.numeric.checkLimits(d, path: path)
            // The raw digits: exact from an integer when the part is not scaled (above 2^53 too).
            let rawMagnitude: UInt64
            let rawNegative: Bool
            let rawText: String
            if !part.numeric.isScaled, let i = value.int64Value {
                (rawMagnitude, rawNegative, rawText) = (i.magnitude, i < 0, "\(i)")
            } else if !part.numeric.isScaled, let u = value.uint64Value {
                (rawMagnitude, rawNegative, rawText) = (u, false, "\(u)")
            } else {
                let raw = part.numeric.unscaled(d).rounded(.toNearestOrAwayFromZero)
                rawText = GattLayout.Numeric.text(raw)
                guard raw.magnitude < 9.0e18 else {
                    throw .invalidValue(path: path.text, reason: "\(GattLayout.Numeric.text(d)) gives raw \(rawText), which does not fit the part")
                }
                (rawMagnitude, rawNegative) = (UInt64(raw.magnitude), raw < 0)  // checked: below 9e18
            }
            if rawNegative {
                guard part.signed else { throw .invalidValue(path: path.text, reason: "\(GattLayout.Numeric.text(d)) gives a negative raw value, and the part is not signed") }
                negative = true
            }
            guard part.modulo.map({ rawMagnitude < $0 }) ?? (rawMagnitude <= UInt64.max / part.divide) else {
                throw .invalidValue(path: path.text, reason: "\(GattLayout.Numeric.text(d)) gives raw \(rawText), which does not fit the part")
            }
            let (digits, overflow) = rawMagnitude.multipliedReportingOverflow(by: part.divide)
            let (sum, overflow2) = magnitude.addingReportingOverflow(digits)
            guard !overflow, !overflow2 else { throw .invalidValue(path: path.text, reason: "the parts do not fit the field") }
            magnitude = sum
        }
        let path = FieldPath(prefix: prefix, name: parts[0].name)
        let half = UInt64(1) << UInt64(format.byteCount * 8 - 1)
        // A two's complement field's minimum has the magnitude 2^(bits-1), which only it can have:
        // it keeps its sign even when no signed part carries it.
        if format.isSigned, !format.signMagnitude, magnitude == half { negative = true }
        let value: JSONValue
        if negative && magnitude != 0 {
            guard magnitude <= UInt64(1) << 63 else { throw .invalidValue(path: path.text, reason: "the parts do not fit the field") }
            value = .int(magnitude == UInt64(1) << 63 ? .min : -Int64(magnitude))  // checked: below 2^63 here
        } else {
            value = magnitude <= UInt64(Int64.max) ? .int(Int64(magnitude)) : .uint(magnitude)
        }
        writeUnsigned(try integerBits(format, .plain, value, path: path), byteCount: format.byteCount, endianness: format.endianness)
    }

    func flagValue(_ bit: GattLayout.FlagBit, _ value: JSONValue?, path: FieldPath) throws(GattLayoutError) -> UInt64 {
        let maxValue: UInt64 = bit.width >= 64 ? .max : (UInt64(1) << UInt64(bit.width)) - 1
        switch value {
        case nil where !bit.numeric.invalid.isEmpty: return bit.numeric.invalid[0]
        case let v? where bit.numeric.isScaled || bit.numeric.minimum != nil || bit.numeric.maximum != nil:
            guard let d = v.doubleValue else { throw .invalidValue(path: path.text, reason: "expected a number, found \(v.typeName)") }
            try bit.numeric.checkLimits(d, path: path)
            let raw = bit.numeric.unscaled(d).rounded(.toNearestOrAwayFromZero)
            guard raw >= 0, raw < 18446744073709551616.0, UInt64(raw) <= maxValue else {  // checked: raw in [0, 2^64) first
                throw .invalidValue(path: path.text, reason: "\(GattLayout.Numeric.text(d)) gives raw \(GattLayout.Numeric.text(raw)), outside 0…\(maxValue)")
            }
            return UInt64(raw)  // checked: the guard above
        case nil, .null?: return 0
        case let .bool(b)?:
            guard bit.width == 1 else { throw .invalidValue(path: path.text, reason: "expected a number from 0 to \(maxValue)") }
            return b ? 1 : 0
        case let .string(s)?:
            guard let raw = bit.enumeration.first(where: { $0.name == s })?.value else {
                throw .invalidValue(path: path.text, reason: "unknown name '\(s)'\(Self.names(bit.enumeration))")
            }
            return UInt64(raw)
        case let v?:
            guard let u = v.uint64Value, u <= maxValue else {
                throw .invalidValue(path: path.text, reason: "expected \(bit.width == 1 ? "true, false, " : "")a number from 0 to \(maxValue), found \(v.jsonText)")
            }
            return u
        }
    }

    static func names(_ e: [(value: Int64, name: String)]) -> String {
        e.isEmpty ? "" : " (known: \(e.map(\.name).joined(separator: ", ")))"
    }

    mutating func writeUnsigned(_ raw: UInt64, byteCount: Int, endianness: Endianness) {
        if endianness == .big {
            var shift = (byteCount - 1) * 8
            while shift >= 0 { writer.writeUInt8(UInt8(truncatingIfNeeded: raw >> UInt64(shift))); shift -= 8 }
        } else {
            for i in 0..<byteCount { writer.writeUInt8(UInt8(truncatingIfNeeded: raw >> UInt64(i * 8))) }
        }
    }

    mutating func encodeRepeated(_ field: GattLayout.Field, _ value: JSONValue, path: FieldPath) throws(GattLayoutError) {
        switch field.repetition {
        case .once:
            try encodeValue(field.type, value, path: path)
        case let .count(n):
            guard case let .array(items) = value else {
                throw .invalidValue(path: path.text, reason: "expected an array of \(n), found \(value.typeName)")
            }
            guard items.count == n else {
                throw .invalidValue(path: path.text, reason: "expected exactly \(n) element(s), found \(items.count)")
            }
            for (i, item) in items.enumerated() { try encodeValue(field.type, item, path: path.element(i)) }
        case .rest:
            guard case let .array(items) = value else {
                throw .invalidValue(path: path.text, reason: "expected an array, found \(value.typeName)")
            }
            for (i, item) in items.enumerated() { try encodeValue(field.type, item, path: path.element(i)) }
        }
    }

    mutating func encodeValue(_ type: GattLayout.FieldType, _ value: JSONValue, path: FieldPath) throws(GattLayoutError) {
        switch type {
        case let .integer(format, numeric):
            let bits = try integerBits(format, numeric, value, path: path)
            writeUnsigned(bits, byteCount: format.byteCount, endianness: format.endianness)
        case let .ieee754(byteCount, endianness, numeric):
            let d = try floatValue(numeric, value, path: path)
            if byteCount == 4 {
                // Rounds to the nearest binary32; the shortest decimal of Float.greatestFiniteMagnitude
                // (3.4028235e38) lies just above it as a double and must still fit (found by fuzzing).
                let f = Float(d)
                guard f.isFinite || !d.isFinite else {
                    throw .invalidValue(path: path.text, reason: "\(numeric.unscaledText(d)) is too large for a float32")
                }
                writeUnsigned(UInt64(f.bitPattern), byteCount: 4, endianness: endianness)
            } else {
                writeUnsigned(d.bitPattern, byteCount: 8, endianness: endianness)
            }
        case let .medfloat(format, endianness, numeric):
            let v: IEEE11073Float.Value
            if case let .string(s) = value, let special = IEEE11073Float.Value.Special(rawValue: s) {
                v = .special(special)
            } else {
                v = .number(try floatValue(numeric, value, path: path, specials: false))
            }
            do {
                let raw = try IEEE11073Float.encode(v, format: format)
                writeUnsigned(UInt64(raw), byteCount: format.byteCount, endianness: endianness)
            } catch {
                throw .invalidValue(path: path.text, reason: error.reason)
            }
        case let .utf8(length):
            guard case let .string(s) = value else {
                throw .invalidValue(path: path.text, reason: "expected a string, found \(value.typeName)")
            }
            let bytes = Array(s.utf8)
            if let length {
                guard bytes.count <= length else {
                    throw .invalidValue(path: path.text, reason: "\(bytes.count) UTF-8 bytes do not fit in \(length)")
                }
                writer.writeBytes(bytes)
                writer.writeBytes(repeatElement(0 as UInt8, count: length - bytes.count))
            } else {
                writer.writeBytes(bytes)
            }
        case let .bytes(length):
            guard case let .string(s) = value else {
                throw .invalidValue(path: path.text, reason: "expected a hex string, found \(value.typeName)")
            }
            let bytes: [UInt8]
            do { bytes = try Hex.decode(s) } catch { throw .invalidValue(path: path.text, reason: error.description) }
            if let length, bytes.count != length {
                throw .invalidValue(path: path.text, reason: "expected \(length) byte(s), found \(bytes.count)")
            }
            writer.writeBytes(bytes)
        case let .structure(members):
            guard case let .object(o) = value else {
                throw .invalidValue(path: path.text, reason: "expected an object, found \(value.typeName)")
            }
            try GattLayout.checkKnownKeys(o, fields: members, prefix: path.text + ".")
            try encodeFields(members, o, prefix: path.text + ".")
        case .flags, .pad:
            throw .invalidValue(path: path.text, reason: "flags and pad fields take no value")
        }
    }

    /// The raw bits of an integer field's value (enum name, or number through scale/offset).
    func integerBits(
        _ format: GattLayout.IntegerFormat, _ numeric: GattLayout.Numeric, _ value: JSONValue, path: FieldPath
    ) throws(GattLayoutError) -> UInt64 {
        let bits = format.byteCount * 8
        let minSignedTwos: Int64 = bits == 64 ? .min : -(Int64(1) << Int64(bits - 1))
        let maxSigned: Int64 = bits == 64 ? .max : (Int64(1) << Int64(bits - 1)) - 1
        let maxUnsigned: UInt64 = bits == 64 ? .max : (UInt64(1) << UInt64(bits)) - 1
        // Sign and magnitude has no -2^(bits-1): its range is symmetric.
        let minSigned = format.signMagnitude ? -maxSigned : minSignedTwos
        var rangeText: String { format.isSigned ? "\(minSigned)…\(maxSigned)" : "0…\(maxUnsigned)" }
        // A missing element of a repeated field with `invalid` (decoded as null).
        if value == .null, let first = numeric.invalid.first { return first }
        if case let .string(s) = value {
            guard let raw = numeric.enumeration.first(where: { $0.name == s })?.value else {
                throw .invalidValue(
                    path: path.text,
                    reason: numeric.enumeration.isEmpty
                        ? "expected a number, found a string" : "unknown name '\(s)'\(Self.names(numeric.enumeration))")
            }
            return UInt64(bitPattern: raw)
        }
        guard let d = value.doubleValue else {
            throw .invalidValue(path: path.text, reason: "expected a number, found \(value.typeName)")
        }
        try numeric.checkLimits(d, path: path)
        if numeric.isScaled {
            let raw = numeric.unscaled(d).rounded(.toNearestOrAwayFromZero)
            if format.isSigned {
                guard raw >= Double(minSigned), raw < 9223372036854775808.0, Int64(raw) <= maxSigned else {  // checked: raw in [-2^63, 2^63) first
                    throw .invalidValue(path: path.text, reason: "\(numeric.unscaledText(d)) gives raw \(GattLayout.Numeric.text(raw)), outside \(rangeText)")
                }
                return format.bits(of: Int64(raw))  // checked: the guard above
            }
            guard raw >= 0, raw < 18446744073709551616.0, UInt64(raw) <= maxUnsigned else {  // checked: raw in [0, 2^64) first
                throw .invalidValue(path: path.text, reason: "\(numeric.unscaledText(d)) gives raw \(GattLayout.Numeric.text(raw)), outside \(rangeText)")
            }
            return UInt64(raw)  // checked: the guard above
        }
        if format.isSigned {
            guard let i = value.int64Value else {
                throw .invalidValue(path: path.text, reason: "expected an integer in \(rangeText), found \(value.jsonText)")
            }
            guard i >= minSigned, i <= maxSigned else {
                throw .invalidValue(path: path.text, reason: "\(i) is outside \(rangeText)")
            }
            return format.bits(of: i)
        }
        guard let u = value.uint64Value, u <= maxUnsigned else {
            throw .invalidValue(path: path.text, reason: "expected an integer in \(rangeText), found \(value.jsonText)")
        }
        return u
    }

    /// A float field's number before rounding to the wire format: JSON number through
    /// scale/offset, or (IEEE-754 only) "NaN"/"+INFINITY"/"-INFINITY".
    func floatValue(
        _ numeric: GattLayout.Numeric, _ value: JSONValue, path: FieldPath, specials: Bool = true
    ) throws(GattLayoutError) -> Double {
        if case let .string(s) = value {
            if specials {
                switch IEEE11073Float.Value.Special(rawValue: s) {
                case .nan?: return .nan
                case .positiveInfinity?: return .infinity
                case .negativeInfinity?: return -.infinity
                default: break
                }
            }
            let allowed = specials
                ? "NaN, +INFINITY, -INFINITY" : IEEE11073Float.Value.Special.allCases.map(\.rawValue).joined(separator: ", ")
            throw .invalidValue(path: path.text, reason: "expected a number or one of \(allowed), found \"\(s)\"")
        }
        guard let d = value.doubleValue else {
            throw .invalidValue(path: path.text, reason: "expected a number, found \(value.typeName)")
        }
        if d.isFinite { try numeric.checkLimits(d, path: path) }
        return numeric.isScaled && d.isFinite ? numeric.unscaled(d) : d
    }
}

extension GattLayout {
    /// Every key of `object` must be a field's name or a value flag bit's name (presence bits are
    /// computed, so they are not keys).
    static func checkKnownKeys(_ object: JSONObject, fields: [Field], prefix: String) throws(GattLayoutError) {
        for (key, _) in object {
            let known = fields.contains { f in
                switch f.type {
                case let .flags(flags): return flags.bits.contains { $0.presenceIndex == nil && $0.name == key }
                case .pad: return false
                default: return f.parts.isEmpty ? f.name == key : f.parts.contains { $0.name == key }
                }
            }
            if !known { throw .invalidValue(path: prefix + key, reason: "unknown field '\(key)'") }
        }
    }
}

extension GattLayout.IntegerFormat {
    /// The wire bits of a signed value already checked to be in range.
    func bits(of i: Int64) -> UInt64 {
        let mask: UInt64 = byteCount == 8 ? .max : (UInt64(1) << UInt64(byteCount * 8)) - 1
        guard signMagnitude, i < 0 else { return UInt64(bitPattern: i) & (signMagnitude ? mask : .max) }
        return (UInt64(1) << UInt64(byteCount * 8 - 1)) | i.magnitude
    }
}

extension GattLayout.Numeric {
    func checkLimits(_ d: Double, path: FieldPath) throws(GattLayoutError) {
        if let minimum, d < minimum { throw .invalidValue(path: path.text, reason: "\(Self.text(d)) is below the minimum \(Self.text(minimum))") }
        if let maximum, d > maximum { throw .invalidValue(path: path.text, reason: "\(Self.text(d)) is above the maximum \(Self.text(maximum))") }
    }

    func unscaledText(_ d: Double) -> String { Self.text(d) }
}
