import BinaryCoding

/// Building a layout from its JSON form (docs/layouts.md, "Schema").
extension GattLayout {
    /// The largest attribute value ATT can carry (Core Specification Vol 3, Part F, §3.2.9):
    /// the bound for `length` and `repeat`.
    public static let maxAttributeLength = 512

    /// Parses and validates a layout. Every problem is reported as
    /// ``GattLayoutError/invalidLayout(path:reason:)`` naming the key path, e.g. `fields[1].type`;
    /// unknown keys are rejected.
    public init(json: JSONValue) throws(GattLayoutError) {
        var parser = LayoutParser()
        let top = try parser.object(json, path: "")
        try parser.checkKeys(top, allowed: ["name", "uuid", "description", "fields"], path: "")
        let name = try top["name"].map { v throws(GattLayoutError) in try parser.string(v, path: "name") }
        if top["description"] != nil { _ = try parser.string(top["description"]!, path: "description") }
        let uuid = try top["uuid"].map { v throws(GattLayoutError) in try parser.uuid(v, path: "uuid") }
        guard let fieldsJSON = top["fields"] else {
            throw .invalidLayout(path: "", reason: "missing key 'fields'")
        }
        // Pass 1: which flag bits do conditions refer to?
        if case let .array(list) = fieldsJSON {
            for f in list {
                for key in ["present_if", "present_unless"] {
                    if case let .string(s)? = f[key] { parser.referencedBits.insert(s) }
                }
            }
        }
        let fields = try parser.fieldList(fieldsJSON, path: "fields", topLevel: true)
        try parser.checkNames(fields)
        self.init(name: name, uuid: uuid, fields: fields, presenceBitCount: parser.presenceBits.count)
    }
}

extension GattLayout {
    /// A UUID written as the layouts write `uuid:` (`"181A"`, `"0x181A"`, 8 hex digits or the
    /// 128-bit form; a number is refused), in lowercase 128-bit form; errors name `path`.
    public static func uuid(_ value: JSONValue, path: String) throws(GattLayoutError) -> String {
        try LayoutParser().uuid(value, path: path)
    }
}

/// The state of one layout parse: flag bits declared so far and the ones conditions refer to.
struct LayoutParser {
    var referencedBits: Set<String> = []
    /// Presence bits in declaration order (name → index).
    var presenceBits: [String: Int] = [:]
    /// All flag-bit names declared so far.
    var flagBitNames: Set<String> = []

    typealias Field = GattLayout.Field

    static let fieldKeys: Set<String> = [
        "name", "type", "endian", "scale", "offset", "min", "max", "enum", "length", "repeat",
        "present_if", "present_unless", "unit", "description", "bits", "size", "fields",
        "invalid", "sign", "parts", "value",
    ]

    func error(_ path: String, _ reason: String) -> GattLayoutError { .invalidLayout(path: path, reason: reason) }

    func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func object(_ v: JSONValue, path: String) throws(GattLayoutError) -> JSONObject {
        guard case let .object(o) = v else { throw error(path, "expected an object, found \(v.typeName)") }
        return o
    }

    func string(_ v: JSONValue, path: String) throws(GattLayoutError) -> String {
        guard case let .string(s) = v else { throw error(path, "expected a string, found \(v.typeName)") }
        return s
    }

    func integer(_ v: JSONValue, path: String, range: ClosedRange<Int>) throws(GattLayoutError) -> Int {
        guard let i = v.intValue else { throw error(path, "expected an integer, found \(v.jsonText)") }
        guard range.contains(i) else {
            throw error(path, "\(i) is outside \(range.lowerBound)…\(range.upperBound)")
        }
        return i
    }

    func number(_ v: JSONValue, path: String) throws(GattLayoutError) -> Double {
        if let d = v.doubleValue, d.isFinite { return d }
        // "a/b" fractions such as "1/1024" are accepted for scales.
        if case let .string(s) = v {
            let parts = s.split(separator: "/", omittingEmptySubsequences: false)
            if parts.count == 2,
                let a = Double(parts[0].trimmingWhitespace), let b = Double(parts[1].trimmingWhitespace),
                a.isFinite, b.isFinite, b != 0
            {
                return a / b
            }
        }
        throw error(path, "expected a finite number (or a fraction such as \"1/1024\"), found \(v.jsonText)")
    }

    func checkKeys(_ o: JSONObject, allowed: Set<String>, path: String) throws(GattLayoutError) {
        for key in o.keys where !allowed.contains(key) {
            throw error(join(path, key), "unknown key '\(key)' (allowed: \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    func uuid(_ v: JSONValue, path: String) throws(GattLayoutError) -> String {
        let base = "-0000-1000-8000-00805f9b34fb"
        // A number is refused: YAML reads `uuid: 1800` as decimal 1800, not 0x1800.
        if v.doubleValue != nil {
            throw error(path, "write the UUID as text, e.g. \"2A37\" (a number is ambiguous: \(v.jsonText))")
        }
        var s = try string(v, path: path).lowercased()
        if s.hasPrefix("0x") { s.removeFirst(2) }
        let isHex = { (t: Substring) in !t.isEmpty && t.allSatisfy(\.isHexDigit) }
        if s.count == 4, isHex(s[...]) { return "0000" + s + base }
        if s.count == 8, isHex(s[...]) { return s + base }
        let groups = s.split(separator: "-", omittingEmptySubsequences: false)
        if groups.map(\.count) == [8, 4, 4, 4, 12], groups.allSatisfy(isHex) { return s }
        throw error(path, "expected a 16-bit (\"2A37\"), 32-bit or 128-bit UUID, found \(v.jsonText)")
    }

    // MARK: Fields

    mutating func fieldList(_ v: JSONValue, path: String, topLevel: Bool) throws(GattLayoutError) -> [Field] {
        guard case let .array(list) = v else { throw error(path, "expected a list of fields, found \(v.typeName)") }
        guard !list.isEmpty else { throw error(path, "a layout needs at least one field") }
        var fields: [Field] = []
        for (i, f) in list.enumerated() {
            let fieldPath = "\(path)[\(i)]"
            let field = try self.field(f, path: fieldPath, topLevel: topLevel)
            if !topLevel, field.consumesRest {
                throw error(fieldPath, "only a top-level field can take the rest of the value (give a length or a count)")
            }
            if let last = fields.last, last.consumesRest {
                throw error(fieldPath, "no field may follow '\(last.name)', which takes the rest of the value")
            }
            fields.append(field)
        }
        return fields
    }

    mutating func field(_ v: JSONValue, path: String, topLevel: Bool) throws(GattLayoutError) -> Field {
        let o = try object(v, path: path)
        try checkKeys(o, allowed: Self.fieldKeys, path: path)
        guard let typeJSON = o["type"] else { throw error(path, "missing key 'type'") }
        let typeName = try string(typeJSON, path: join(path, "type"))
        let name: String
        if let n = o["name"] {
            name = try string(n, path: join(path, "name"))
            guard !name.isEmpty else { throw error(join(path, "name"), "a name must not be empty") }
        } else if typeName == "flags" || typeName == "pad" {
            name = typeName
        } else if o["parts"] != nil {
            name = "parts"
        } else {
            throw error(path, "missing key 'name'")
        }
        if let u = o["unit"] { _ = try string(u, path: join(path, "unit")) }
        if let d = o["description"] { _ = try string(d, path: join(path, "description")) }
        var parts: [GattLayout.Part] = []
        var constant: [UInt8]? = nil

        // Which keys each type accepts besides the common ones.
        let common: Set<String> = ["name", "type", "repeat", "present_if", "present_unless", "unit", "description"]
        let numeric: Set<String> = ["endian", "scale", "offset", "min", "max"]
        var allowed = common
        let type: GattLayout.FieldType
        switch typeName {
        case "float32", "float64":
            allowed.formUnion(numeric)
            try checkKeys(o, allowed: allowed, path: path, type: typeName)
            type = .ieee754(
                byteCount: typeName == "float32" ? 4 : 8, endianness: try endian(o, path: path),
                try numericOptions(o, path: path, integer: nil))
        case "sfloat", "medfloat16", "medfloat32":
            allowed.formUnion(numeric)
            try checkKeys(o, allowed: allowed, path: path, type: typeName)
            type = .medfloat(
                typeName == "medfloat32" ? .float : .sfloat, endianness: try endian(o, path: path),
                try numericOptions(o, path: path, integer: nil))
        case "utf8", "bytes":
            allowed.insert("length")
            try checkKeys(o, allowed: allowed, path: path, type: typeName)
            let length = try o["length"].map { v throws(GattLayoutError) in
                try integer(v, path: join(path, "length"), range: 1...GattLayout.maxAttributeLength)
            }
            type = typeName == "utf8" ? .utf8(length: length) : .bytes(length: length)
        case "pad":
            allowed = ["name", "type", "length", "value", "present_if", "present_unless", "description"]
            try checkKeys(o, allowed: allowed, path: path, type: typeName)
            if let v = o["value"] {
                let text = try string(v, path: join(path, "value"))
                guard let bytes = try? Hex.decode(text), !bytes.isEmpty, bytes.count <= GattLayout.maxAttributeLength else {
                    throw error(join(path, "value"), "expected 1…512 bytes as hex text, found \(v.jsonText)")
                }
                constant = bytes
            }
            let length: Int
            if let l = o["length"] {
                length = try integer(l, path: join(path, "length"), range: 1...GattLayout.maxAttributeLength)
                if let constant, constant.count != length {
                    throw error(join(path, "length"), "length \(length) differs from the \(constant.count) byte(s) of 'value'")
                }
            } else if let constant {
                length = constant.count
            } else {
                throw error(path, "a pad field needs 'length' (or 'value')")
            }
            type = .pad(length: length)
        case "flags":
            allowed = ["name", "type", "size", "endian", "bits", "description"]
            try checkKeys(o, allowed: allowed, path: path, type: typeName)
            guard topLevel else { throw error(join(path, "type"), "flags fields are allowed only at the top level") }
            type = .flags(try flags(o, path: path))
        case "struct":
            allowed.insert("fields")
            try checkKeys(o, allowed: allowed, path: path, type: typeName)
            guard let f = o["fields"] else { throw error(path, "a struct needs 'fields'") }
            let members = try fieldList(f, path: join(path, "fields"), topLevel: false)
            try checkNames(members, path: join(path, "fields"))
            type = .structure(members)
        case "date_time":
            try checkKeys(o, allowed: allowed, path: path, type: typeName)
            type = .structure(Self.dateTimeFields)
        default:
            guard let format = Self.integerFormat(typeName) else {
                throw error(
                    join(path, "type"),
                    "unknown type '\(typeName)' (u8…u64, i8…i64, float32, float64, sfloat, medfloat16, medfloat32, utf8, bytes, pad, flags, struct, date_time)"
                )
            }
            allowed.formUnion(numeric)
            allowed.formUnion(["enum", "invalid", "parts"])
            if format.signed { allowed.insert("sign") }
            try checkKeys(o, allowed: allowed, path: path, type: typeName)
            var fmt = GattLayout.IntegerFormat(
                byteCount: format.bytes, isSigned: format.signed, endianness: try endian(o, path: path))
            if let sign = o["sign"] {
                switch try string(sign, path: join(path, "sign")) {
                case "magnitude": fmt.signMagnitude = true
                case "twos_complement": break
                case let other:
                    throw error(join(path, "sign"), "expected 'magnitude' or 'twos_complement', found '\(other)'")
                }
            }
            var options = try numericOptions(o, path: path, integer: fmt)
            if let v = o["invalid"] {
                options.invalid = try invalidValues(v, path: join(path, "invalid"), bits: format.bytes * 8, signed: format.signed)
            }
            type = .integer(fmt, options)
            if let p = o["parts"] {
                for key in ["scale", "offset", "min", "max", "enum", "repeat"] where o[key] != nil {
                    throw error(join(path, key), "key '\(key)' does not apply to a field with 'parts' (give it to each part)")
                }
                parts = try self.parts(p, path: join(path, "parts"))
            }
        }

        let repetition = try self.repetition(o, path: path, type: type)
        let condition = try self.condition(o, path: path, topLevel: topLevel)
        let unit = o["unit"]?.stringValue
        return Field(name: name, type: type, repetition: repetition, condition: condition, unit: unit, parts: parts, constant: constant)
    }

    /// `invalid:` one raw value or a list: unsigned bits that fit the field (or, for a signed
    /// field, a negative value, taken as its two's complement bits).
    func invalidValues(_ v: JSONValue, path: String, bits: Int, signed: Bool) throws(GattLayoutError) -> [UInt64] {
        let list: [JSONValue]
        var isList = false
        if case let .array(a) = v { list = a; isList = true } else { list = [v] }
        guard !list.isEmpty else { throw error(path, "give at least one raw value") }
        let mask: UInt64 = bits >= 64 ? .max : (UInt64(1) << UInt64(bits)) - 1
        var out: [UInt64] = []
        for (i, e) in list.enumerated() {
            let p = isList ? "\(path)[\(i)]" : path
            if let u = e.uint64Value, u <= mask {
                out.append(u)
            } else if signed, let n = e.int64Value, n < 0, bits >= 64 || n >= -(Int64(1) << Int64(bits - 1)) {
                out.append(UInt64(bitPattern: n) & mask)
            } else {
                throw error(p, "expected a raw value from 0 to \(mask)\(signed ? " (or a negative value of the type)" : ""), found \(e.jsonText)")
            }
        }
        return out
    }

    /// `parts:` the measurements packed into an integer's digits.
    func parts(_ v: JSONValue, path: String) throws(GattLayoutError) -> [GattLayout.Part] {
        guard case let .array(list) = v, !list.isEmpty else { throw error(path, "expected a list of parts (at least one)") }
        var out: [GattLayout.Part] = []
        for (i, e) in list.enumerated() {
            let p = "\(path)[\(i)]"
            let o = try object(e, path: p)
            try checkKeys(o, allowed: ["name", "divide", "modulo", "signed", "scale", "offset", "min", "max", "unit", "description"], path: p)
            guard let n = o["name"] else { throw error(p, "missing key 'name'") }
            let name = try string(n, path: join(p, "name"))
            guard !name.isEmpty else { throw error(join(p, "name"), "a name must not be empty") }
            guard !out.contains(where: { $0.name == name }) else { throw error(join(p, "name"), "part '\(name)' is declared twice") }
            var divide: UInt64 = 1
            if let d = o["divide"] {
                guard let u = d.uint64Value, u >= 1 else { throw error(join(p, "divide"), "expected a whole number ≥ 1, found \(d.jsonText)") }
                divide = u
            }
            var modulo: UInt64? = nil
            if let m = o["modulo"] {
                guard let u = m.uint64Value, u >= 2 else { throw error(join(p, "modulo"), "expected a whole number ≥ 2, found \(m.jsonText)") }
                modulo = u
            }
            var signed = false
            if let sv = o["signed"] {
                guard case let .bool(b) = sv else { throw error(join(p, "signed"), "expected true or false, found \(sv.jsonText)") }
                signed = b
            }
            if let u = o["unit"] { _ = try string(u, path: join(p, "unit")) }
            if let d = o["description"] { _ = try string(d, path: join(p, "description")) }
            let numeric = try numericOptions(o, path: p, integer: nil)
            out.append(.init(name: name, divide: divide, modulo: modulo, signed: signed, numeric: numeric, unit: o["unit"]?.stringValue))
        }
        // The parts' digit ranges [divide, divide × modulo) must not overlap, or the encoder
        // could not add them back.
        let sorted = out.enumerated().sorted { $0.element.divide < $1.element.divide }
        for (lower, upper) in zip(sorted, sorted.dropFirst()) {
            let (end, overflow) = lower.element.modulo.map { lower.element.divide.multipliedReportingOverflow(by: $0) } ?? (0, true)
            if overflow || end > upper.element.divide {
                throw error(
                    "\(path)[\(upper.offset)]",
                    "the digits of '\(upper.element.name)' overlap those of '\(lower.element.name)' (a lower part needs a modulo with divide × modulo ≤ the next part's divide)")
            }
        }
        return out
    }

    func checkKeys(_ o: JSONObject, allowed: Set<String>, path: String, type: String) throws(GattLayoutError) {
        for key in o.keys where !allowed.contains(key) {
            throw error(join(path, key), "key '\(key)' does not apply to type '\(type)'")
        }
    }

    static let dateTimeFields: [Field] = [
        ("year", 2), ("month", 1), ("day", 1), ("hours", 1), ("minutes", 1), ("seconds", 1),
    ].map { name, bytes in
        Field(
            name: name,
            type: .integer(.init(byteCount: bytes, isSigned: false, endianness: .little), .plain),
            repetition: .once, condition: nil, unit: nil)
    }

    /// `u8`…`u64`, `i8`…`i64` and the GSS spellings `uint8`…, `sint8`…, `int8`….
    static func integerFormat(_ name: String) -> (bytes: Int, signed: Bool)? {
        let prefixes: [(String, Bool)] = [("uint", false), ("sint", true), ("int", true), ("u", false), ("i", true)]
        for (prefix, signed) in prefixes where name.hasPrefix(prefix) {
            guard let bits = Int(name.dropFirst(prefix.count)), bits % 8 == 0, (8...64).contains(bits) else {
                return nil
            }
            return (bits / 8, signed)
        }
        return nil
    }

    func endian(_ o: JSONObject, path: String) throws(GattLayoutError) -> Endianness {
        guard let e = o["endian"] else { return .little }
        switch try string(e, path: join(path, "endian")) {
        case "little": return .little
        case "big": return .big
        case let other: throw error(join(path, "endian"), "expected 'little' or 'big', found '\(other)'")
        }
    }

    func numericOptions(
        _ o: JSONObject, path: String, integer: GattLayout.IntegerFormat?
    ) throws(GattLayoutError) -> GattLayout.Numeric {
        var n = GattLayout.Numeric.plain
        if let s = o["scale"] {
            let scale = try number(s, path: join(path, "scale"))
            guard scale != 0 else { throw error(join(path, "scale"), "a scale must not be zero") }
            n.scale = scale
        }
        if let v = o["offset"] { n.offset = try number(v, path: join(path, "offset")) }
        if let v = o["min"] { n.minimum = try number(v, path: join(path, "min")) }
        if let v = o["max"] { n.maximum = try number(v, path: join(path, "max")) }
        if let lo = n.minimum, let hi = n.maximum, lo > hi {
            throw error(join(path, "max"), "max \(hi) is below min \(lo)")
        }
        if let e = o["enum"], let integer {
            guard !n.isScaled else { throw error(join(path, "enum"), "'enum' cannot be combined with scale/offset") }
            let bits = integer.byteCount * 8
            let range: ClosedRange<Int64> = integer.isSigned
                ? (bits == 64 ? Int64.min...Int64.max : -(Int64(1) << (bits - 1))...((Int64(1) << (bits - 1)) - 1))
                : 0...(bits == 64 ? Int64.max : (Int64(1) << bits) - 1)
            n.enumeration = try enumeration(e, path: join(path, "enum"), range: range)
        }
        return n
    }

    /// An enum map: object from raw value (decimal or `0x` hex text) to name.
    func enumeration(
        _ v: JSONValue, path: String, range: ClosedRange<Int64>
    ) throws(GattLayoutError) -> [(value: Int64, name: String)] {
        let o = try object(v, path: path)
        guard !o.isEmpty else { throw error(path, "an enum needs at least one entry") }
        var result: [(value: Int64, name: String)] = []
        for (key, value) in o {
            let keyPath = join(path, key)
            let raw: Int64?
            let lower = key.lowercased()
            if lower.hasPrefix("0x") {
                raw = Int64(lower.dropFirst(2), radix: 16)
            } else {
                raw = Int64(key)
            }
            guard let raw else { throw error(keyPath, "an enum key must be an integer (decimal or 0x hex)") }
            guard range.contains(raw) else { throw error(keyPath, "\(raw) does not fit the field's type") }
            let name = try string(value, path: keyPath)
            guard !name.isEmpty else { throw error(keyPath, "an enum name must not be empty") }
            if result.contains(where: { $0.value == raw }) { throw error(keyPath, "value \(raw) is listed twice") }
            if result.contains(where: { $0.name == name }) { throw error(keyPath, "name '\(name)' is used twice") }
            result.append((raw, name))
        }
        return result
    }

    mutating func flags(_ o: JSONObject, path: String) throws(GattLayoutError) -> GattLayout.Flags {
        let size = try o["size"].map { v throws(GattLayoutError) in try integer(v, path: join(path, "size"), range: 1...8) } ?? 1
        let endianness = try endian(o, path: path)
        guard let bitsJSON = o["bits"] else { throw error(path, "a flags field needs 'bits'") }
        guard case let .array(list) = bitsJSON else {
            throw error(join(path, "bits"), "expected a list of bits, found \(bitsJSON.typeName)")
        }
        var used: UInt64 = 0
        var bits: [GattLayout.FlagBit] = []
        for (i, b) in list.enumerated() {
            let p = "\(join(path, "bits"))[\(i)]"
            let bo = try object(b, path: p)
            try checkKeys(
                bo, allowed: ["name", "bit", "width", "enum", "description", "scale", "offset", "min", "max", "invalid", "unit"],
                path: p)
            guard let n = bo["name"] else { throw error(p, "missing key 'name'") }
            let name = try string(n, path: join(p, "name"))
            guard !name.isEmpty else { throw error(join(p, "name"), "a name must not be empty") }
            guard !flagBitNames.contains(name) else { throw error(join(p, "name"), "flag bit '\(name)' is declared twice") }
            guard let bj = bo["bit"] else { throw error(p, "missing key 'bit'") }
            let bit = try integer(bj, path: join(p, "bit"), range: 0...(size * 8 - 1))
            let width = try bo["width"].map { v throws(GattLayoutError) in
                try integer(v, path: join(p, "width"), range: 1...(size * 8 - bit))
            } ?? 1
            let mask: UInt64 = (width == 64 ? UInt64.max : (UInt64(1) << UInt64(width)) - 1) << UInt64(bit)
            guard used & mask == 0 else { throw error(join(p, "bit"), "bits of '\(name)' overlap an earlier flag bit") }
            used |= mask
            let enumeration = try bo["enum"].map { v throws(GattLayoutError) in
                try self.enumeration(
                    v, path: join(p, "enum"), range: 0...(width >= 63 ? Int64.max : (Int64(1) << width) - 1))
            } ?? []
            if let d = bo["description"] { _ = try string(d, path: join(p, "description")) }
            if let u = bo["unit"] { _ = try string(u, path: join(p, "unit")) }
            var numeric = try numericOptions(bo, path: p, integer: nil)
            if numeric.isScaled, !enumeration.isEmpty {
                throw error(join(p, "enum"), "'enum' cannot be combined with scale/offset")
            }
            if let v = bo["invalid"] { numeric.invalid = try invalidValues(v, path: join(p, "invalid"), bits: width, signed: false) }
            var presenceIndex: Int? = nil
            if referencedBits.contains(name) {
                guard width == 1, enumeration.isEmpty, numeric == .plain, bo["unit"] == nil else {
                    throw error(p, "flag bit '\(name)' controls presence, so it must be a single bit without enum")
                }
                presenceIndex = presenceBits.count
                presenceBits[name] = presenceBits.count
            }
            flagBitNames.insert(name)
            bits.append(
                .init(
                    name: name, bit: bit, width: width, enumeration: enumeration, presenceIndex: presenceIndex,
                    numeric: numeric, unit: bo["unit"]?.stringValue))
        }
        guard !bits.isEmpty else { throw error(join(path, "bits"), "a flags field needs at least one bit") }
        return .init(byteCount: size, endianness: endianness, bits: bits)
    }

    func repetition(_ o: JSONObject, path: String, type: GattLayout.FieldType) throws(GattLayoutError) -> GattLayout.Repetition {
        guard let r = o["repeat"] else { return .once }
        let p = join(path, "repeat")
        switch type {
        case .flags, .pad: throw error(p, "flags and pad fields cannot repeat")
        case .utf8(nil), .bytes(nil): throw error(p, "a field without 'length' already takes the rest; it cannot repeat")
        default: break
        }
        if r == .string("rest") { return .rest }
        guard r.intValue != nil else { throw error(p, "expected a count or \"rest\", found \(r.jsonText)") }
        return .count(try integer(r, path: p, range: 1...GattLayout.maxAttributeLength))
    }

    func condition(_ o: JSONObject, path: String, topLevel: Bool) throws(GattLayoutError) -> GattLayout.Condition? {
        let ifSet = o["present_if"], unlessSet = o["present_unless"]
        guard ifSet != nil || unlessSet != nil else { return nil }
        let key = ifSet != nil ? "present_if" : "present_unless"
        let p = join(path, key)
        guard ifSet == nil || unlessSet == nil else { throw error(p, "use either present_if or present_unless, not both") }
        guard topLevel else { throw error(p, "conditions are allowed only on top-level fields") }
        let name = try string((ifSet ?? unlessSet)!, path: p)
        guard let index = presenceBits[name] else {
            throw error(p, "'\(name)' is not a flag bit declared in an earlier flags field")
        }
        return .init(bitName: name, presenceIndex: index, whenSet: ifSet != nil)
    }

    /// JSON keys must be unique at each level; two fields may share a name only when they are
    /// alternatives: conditioned on the same flag bit with opposite senses.
    func checkNames(_ fields: [Field], path: String = "fields") throws(GattLayoutError) {
        var seen: [String: Int] = [:]
        var paired: Set<String> = []
        for (i, f) in fields.enumerated() {
            var keys: [String] = []
            switch f.type {
            case let .flags(flags): keys = flags.bits.filter { $0.presenceIndex == nil }.map(\.name)
            case .pad: keys = []
            default: keys = f.parts.isEmpty ? [f.name] : f.parts.map(\.name)
            }
            for key in keys {
                if presenceBits[key] != nil {
                    throw error("\(path)[\(i)]", "'\(key)' is also the name of a presence flag bit")
                }
                if let j = seen[key] {
                    let other = fields[j]
                    guard !paired.contains(key), let a = f.condition, let b = other.condition,
                        a.presenceIndex == b.presenceIndex, a.whenSet != b.whenSet, f.name == key, other.name == key
                    else {
                        throw error("\(path)[\(i)].name", "'\(key)' is already used (only alternatives on one flag bit may share a name)")
                    }
                    if f.hasSentinel || other.hasSentinel {
                        throw error("\(path)[\(i)]", "alternatives of '\(key)' cannot have an 'invalid' value")
                    }
                    paired.insert(key)
                } else {
                    seen[key] = i
                }
            }
        }
    }
}

extension GattLayout.Field {
    /// Whether the field has `invalid` values.
    var hasSentinel: Bool {
        if case let .integer(_, numeric) = type { return !numeric.invalid.isEmpty }
        return false
    }

    /// Whether the field takes every byte left.
    var consumesRest: Bool {
        if repetition == .rest { return true }
        switch type {
        case .utf8(nil), .bytes(nil): return true
        default: return false
        }
    }
}

extension Substring {
    var trimmingWhitespace: Substring {
        var s = self
        while s.first?.isWhitespace == true { s.removeFirst() }
        while s.last?.isWhitespace == true { s.removeLast() }
        return s
    }
}
