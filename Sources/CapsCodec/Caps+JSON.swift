import BinaryCoding

// JSON mapping of Caps objects (docs/caps.md). Canonical typed form: an array of members
// `{"type": "<code>", "value": …}`; a loose form for hand-written payloads infers the types.

extension Caps {
    /// The canonical typed JSON form: an array with one `{"type": code, "value": …}` object
    /// per member (docs/caps.md; codes from spec rokid-caps.md §3.2). `l`/`k` are decimal
    /// strings, `f`/`d` numbers or `"NaN"`/`"Infinity"`/`"-Infinity"`/`"-0.0"` (a NaN with a
    /// non-default payload also gets `"bits"`), `B` base64, `O` a nested member array, `V`
    /// has no value.
    public var typedJSON: JSONValue {
        .array(members.map(\.typedJSON))
    }

    /// Reads the typed form or the loose form (they mix: each element is read on its own).
    /// A JSON object with a one-letter `"type"` is a typed member; every other element has its
    /// type inferred: `null` → `V`, `true`/`false` → `u` 1/0, an integer → `u` if it fits
    /// uint32, `i` if negative and fits int32, else `k`/`l`; a number with a fraction or
    /// exponent → `d`; a string → `S`; an array → `O`; any other object → `S` holding its
    /// compact JSON text. Errors name the path, e.g. `$[2].value`.
    public init(json: JSONValue) throws(CapsError) {
        self = try CapsJSONReader.object(json, path: "$", depth: 0)
    }

    /// Parses JSON text and reads it as in ``init(json:)``.
    public init(jsonText: String) throws(CapsError) {
        let value: JSONValue
        do { value = try JSONValue(parsing: jsonText) } catch {
            throw .invalidJSON(path: "$", reason: error.description)
        }
        try self.init(json: value)
    }
}

extension CapsValue {
    /// This member in the canonical typed JSON form (see ``Caps/typedJSON``).
    public var typedJSON: JSONValue {
        var o: JSONObject = ["type": .string(type.code)]
        switch self {
        case .void: break
        case let .int32(v): o["value"] = .int(Int64(v))
        case let .uint32(v): o["value"] = .int(Int64(v))
        case let .int64(v): o["value"] = .string(String(v))
        case let .uint64(v): o["value"] = .string(String(v))
        case let .float(v):
            o["value"] = CapsJSONReader.floatJSON(Double(v))
            if v.isNaN && v.bitPattern != Float.nan.bitPattern { o["bits"] = .string(CapsJSONReader.hex(UInt64(v.bitPattern), digits: 8)) }
        case let .double(v):
            o["value"] = CapsJSONReader.floatJSON(v)
            if v.isNaN && v.bitPattern != Double.nan.bitPattern { o["bits"] = .string(CapsJSONReader.hex(v.bitPattern, digits: 16)) }
        case let .string(s): o["value"] = .string(s)
        case let .binary(b): o["value"] = .string(Base64.encode(b))
        case let .object(c): o["value"] = c.typedJSON
        }
        return .object(o)
    }

    /// The value as plain JSON, without its type (lossy: `u 1` and `i 1` look alike). Used for
    /// CXR payloads: `S` holding a JSON object or array becomes that JSON; `B` is base64;
    /// `O` is an array of its members' plain values; non-finite floats are strings.
    public var plainJSON: JSONValue {
        switch self {
        case .void: return .null
        case let .int32(v): return .int(Int64(v))
        case let .uint32(v): return .int(Int64(v))
        case let .int64(v): return .int(v)
        case let .uint64(v): return v <= UInt64(Int64.max) ? .int(Int64(v)) : .uint(v)
        case let .float(v): return CapsJSONReader.floatJSON(Double(v))
        case let .double(v): return CapsJSONReader.floatJSON(v)
        case let .string(s):
            if let first = s.utf8.first, first == UInt8(ascii: "{") || first == UInt8(ascii: "["),
               let j = try? JSONValue(parsing: s) {
                return j
            }
            return .string(s)
        case let .binary(b): return .string(Base64.encode(b))
        case let .object(c): return .array(c.members.map(\.plainJSON))
        }
    }
}

/// The JSON → Caps reader behind ``Caps/init(json:)``.
enum CapsJSONReader {
    static func hex(_ v: UInt64, digits: Int) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }

    static func floatJSON(_ d: Double) -> JSONValue {
        if d.isNaN { return "NaN" }
        if d == .infinity { return "Infinity" }
        if d == -.infinity { return "-Infinity" }
        if d == 0 && d.sign == .minus { return "-0.0" }
        return .double(d)
    }

    static func object(_ json: JSONValue, path: String, depth: Int) throws(CapsError) -> Caps {
        guard depth <= Caps.maxNestingDepth else {
            throw .invalidJSON(path: path, reason: "objects nested deeper than \(Caps.maxNestingDepth) levels")
        }
        guard case let .array(elements) = json else {
            throw .invalidJSON(path: path, reason: "expected an array of members, found \(json.typeName)")
        }
        var members = [CapsValue]()
        members.reserveCapacity(elements.count)
        for (k, e) in elements.enumerated() {
            members.append(try member(e, path: "\(path)[\(k)]", depth: depth))
        }
        return Caps(members)
    }

    static func member(_ json: JSONValue, path: String, depth: Int) throws(CapsError) -> CapsValue {
        switch json {
        case .null: return .void
        case let .bool(b): return .bool(b)
        case let .int(v):
            if v >= 0 { return v <= Int64(UInt32.max) ? .uint32(UInt32(v)) : .uint64(UInt64(v)) }
            return v >= Int64(Int32.min) ? .int32(Int32(v)) : .int64(v)
        case let .uint(v): return .uint64(v)
        case let .double(d): return .double(d)
        case let .string(s): return .string(s)
        case .array: return .object(try object(json, path: path, depth: depth + 1))
        case let .object(o):
            if case let .string(code)? = o["type"], code.utf8.count == 1 {
                return try typed(o, code: code, path: path, depth: depth)
            }
            return .string(json.payloadText)
        }
    }

    static func typed(_ o: JSONObject, code: String, path: String, depth: Int) throws(CapsError) -> CapsValue {
        guard let type = CapsType(code: code) else {
            throw .invalidJSON(path: path + ".type", reason: "unknown type code '\(code)' (expected one of V i u l k f d S B O)")
        }
        let vpath = path + ".value"
        let value = o["value"]
        if type == .void {
            if let value, !value.isNull { throw .invalidJSON(path: vpath, reason: "type V carries no value") }
            return .void
        }
        if (type == .float || type == .double), case let .string(bits)? = o["bits"] {
            let digits = type == .float ? 8 : 16
            guard bits.utf8.count == digits, let pattern = UInt64(bits, radix: 16) else {
                throw .invalidJSON(path: path + ".bits", reason: "expected \(digits) hex digits")
            }
            return type == .float ? .float(Float(bitPattern: UInt32(pattern))) : .double(Double(bitPattern: pattern))
        }
        if type == .binary, value == nil, case let .string(h)? = o["value_hex"] {
            do { return .binary(try Hex.decode(h)) } catch {
                throw .invalidJSON(path: path + ".value_hex", reason: error.description)
            }
        }
        guard let value else { throw .invalidJSON(path: vpath, reason: "missing value for type \(code)") }
        func wrong(_ expected: String) -> CapsError {
            .invalidJSON(path: vpath, reason: "expected \(expected) for type \(code), found \(value.jsonText)")
        }
        switch type {
        case .void: return .void
        case .int32:
            guard let v = integer(value), let x = Int32(exactly: v) else { throw wrong("an integer in -2147483648...2147483647") }
            return .int32(x)
        case .uint32:
            if case let .bool(b) = value { return .bool(b) }
            guard let v = integer(value), let x = UInt32(exactly: v) else { throw wrong("an integer in 0...4294967295") }
            return .uint32(x)
        case .int64:
            guard let v = integer(value), let x = Int64(exactly: v) else { throw wrong("an integer in the int64 range (a decimal string or number)") }
            return .int64(x)
        case .uint64:
            guard let x = unsigned(value) else { throw wrong("an integer in the uint64 range (a decimal string or number)") }
            return .uint64(x)
        case .float:
            guard let d = floating(value) else { throw wrong("a number or \"NaN\"/\"Infinity\"/\"-Infinity\"") }
            let f = Float(d)
            if f.isInfinite && d.isFinite { throw wrong("a number within the float32 range") }
            return .float(f)
        case .double:
            guard let d = floating(value) else { throw wrong("a number or \"NaN\"/\"Infinity\"/\"-Infinity\"") }
            return .double(d)
        case .string:
            guard case let .string(s) = value else { throw wrong("a string") }
            return .string(s)
        case .binary:
            guard case let .string(s) = value else { throw wrong("a base64 string") }
            do { return .binary(try Base64.decode(s)) } catch {
                throw .invalidJSON(path: vpath, reason: error.description)
            }
        case .object:
            return .object(try object(value, path: vpath, depth: depth + 1))
        }
    }

    /// A signed integer from a JSON number without fraction or a decimal string.
    static func integer(_ v: JSONValue) -> Int64? {
        switch v {
        case let .int(i): return i
        case let .double(d):
            return d.rounded() == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0 ? Int64(d) : nil  // checked: whole, in range
        case let .string(s): return Int64(s)
        default: return nil
        }
    }

    static func unsigned(_ v: JSONValue) -> UInt64? {
        switch v {
        case let .int(i): return i >= 0 ? UInt64(i) : nil
        case let .uint(u): return u
        case let .double(d): return d >= 0 && d < 18446744073709551616.0 && d.rounded() == d ? UInt64(d) : nil  // checked: whole, in range
        case let .string(s): return UInt64(s)
        default: return nil
        }
    }

    static func floating(_ v: JSONValue) -> Double? {
        switch v {
        case .int, .uint, .double: return v.doubleValue
        case let .string(s):
            switch s {
            case "NaN": return .nan
            case "Infinity": return .infinity
            case "-Infinity": return -.infinity
            default:
                // Decimal text such as "-0.0" or "1.5"; not the C spellings ("nan", "inf", hex).
                guard let first = s.utf8.first, first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first),
                      let d = Double(s), d.isFinite else { return nil }
                return d
            }
        default: return nil
        }
    }
}
