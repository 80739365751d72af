import OrderedCollections

/// A JSON document as a value. Object members keep their order (so output is
/// stable and readable); equality of objects ignores order. Integers keep full
/// 64-bit precision.
///
/// Equality compares numbers by value: `.int(5) == .double(5.0)`, since JSON text does not
/// distinguish them (`5.0` is written back as `5`).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// An integer that fits `Int64`.
    case int(Int64)
    /// An integer above `Int64.max`.
    case uint(UInt64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

/// An ordered JSON object: swift-collections' `OrderedDictionary` (members in insertion order,
/// lookups through its hash table), so building and reading large objects (a GoPro status
/// dictionary has ~80 members) stays linear.
public struct JSONObject: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    private var storage: OrderedDictionary<String, JSONValue>

    /// The members in order (a view, not a copy).
    public var members: OrderedDictionary<String, JSONValue>.Elements { storage.elements }

    public init() {
        storage = [:]
    }
    public init<S: Sequence>(_ members: S) where S.Element == (key: String, value: JSONValue) {
        self.init()
        reserveCapacity(members.underestimatedCount)
        for m in members { self[m.key] = m.value }
    }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init()
        reserveCapacity(elements.count)
        for (k, v) in elements { self[k] = v }
    }

    public mutating func reserveCapacity(_ n: Int) {
        storage.reserveCapacity(n)
    }

    public var count: Int { storage.count }
    public var isEmpty: Bool { storage.isEmpty }
    public var keys: [String] { Array(storage.keys) }

    /// Calls `body` with each member in order, borrowed from the storage (iterating `members`
    /// copies each key and value out, a retain and a release each).
    func forEachMember(_ body: (borrowing String, borrowing JSONValue) -> Void) {
        let keys = storage.keys.elements, values = storage.values.elements
        for i in keys.indices { body(keys[i], values[i]) }
    }

    /// Reads a member; setting `nil` removes it; setting an existing key replaces it in place.
    public subscript(key: String) -> JSONValue? {
        get { storage[key] }
        set { storage[key] = newValue }
    }

    /// Removes `key`'s member and returns it (nil when absent).
    public mutating func removeValue(forKey key: String) -> JSONValue? { storage.removeValue(forKey: key) }

    /// Adds or replaces every member of `other` (later wins).
    public mutating func merge(_ other: JSONObject) {
        for m in other.storage { storage[m.key] = m.value }
    }

    public func makeIterator() -> OrderedDictionary<String, JSONValue>.Iterator {
        storage.makeIterator()
    }

    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        guard a.count == b.count else { return false }
        for m in a.storage where b.storage[m.key] != m.value { return false }
        return true
    }
}

extension JSONValue {
    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)): return x == y
        case let (.int(x), .int(y)): return x == y
        case let (.uint(x), .uint(y)): return x == y
        case let (.double(x), .double(y)): return x == y
        case (.int, .uint), (.uint, .int): return false  // .uint is only used above Int64.max
        case let (.int(x), .double(y)), let (.double(y), .int(x)):
            return Double(x) == y && Int64(exactly: y) == x
        case let (.uint(x), .double(y)), let (.double(y), .uint(x)):
            return Double(x) == y && UInt64(exactly: y) == x
        default: return false
        }
    }
}

// MARK: - Convenience accessors

extension JSONValue {
    public subscript(key: String) -> JSONValue? {
        if case let .object(o) = self { return o[key] }
        return nil
    }
    public var objectValue: JSONObject? { if case let .object(o) = self { return o }; return nil }

    /// Removes `key`'s member from this object in place and returns it (nil when absent, or when
    /// this is not an object). The object's storage is not copied when this value holds it alone.
    public mutating func removeMember(_ key: String) -> JSONValue? {
        guard case var .object(o) = self else { return nil }
        self = .null  // `o` now holds the storage alone
        let removed = o.removeValue(forKey: key)
        self = .object(o)
        return removed
    }
    public var arrayValue: [JSONValue]? { if case let .array(a) = self { return a }; return nil }
    public var stringValue: String? { if case let .string(s) = self { return s }; return nil }
    public var boolValue: Bool? { if case let .bool(b) = self { return b }; return nil }
    public var isNull: Bool { if case .null = self { return true }; return false }

    /// The value as an `Int64` when it is an integer, or a double with no fraction in range.
    public var int64Value: Int64? {
        switch self {
        case let .int(i): return i
        case let .uint(u): return u <= UInt64(Int64.max) ? Int64(u) : nil
        case let .double(d): return d.rounded() == d && abs(d) < 9.2e18 ? Int64(d) : nil  // checked: whole, in range (NaN fails ==)
        default: return nil
        }
    }
    /// The value as a `UInt64` when it is a non-negative integer.
    public var uint64Value: UInt64? {
        switch self {
        case let .int(i): return i >= 0 ? UInt64(i) : nil
        case let .uint(u): return u
        case let .double(d): return d.rounded() == d && d >= 0 && d < 1.8e19 ? UInt64(d) : nil  // checked: whole, in range (NaN fails ==)
        default: return nil
        }
    }
    public var intValue: Int? { int64Value.flatMap { Int(exactly: $0) } }
    /// Any number as a `Double`.
    public var doubleValue: Double? {
        switch self {
        case let .int(i): return Double(i)
        case let .uint(u): return Double(u)
        case let .double(d): return d
        default: return nil
        }
    }
    /// A short name of the JSON type, for error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int, .uint, .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var o = JSONObject()
        for (k, v) in elements { o[k] = v }
        self = .object(o)
    }
}

// MARK: - Parsing

/// A JSON syntax error with the byte offset where it was found.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let offset: Int
    public let reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// Maximum nesting depth accepted by the parser.
    public static let maxDepth = 256

    /// Parses RFC 8259 JSON (one value, surrounding white space allowed).
    public init(parsing text: String) throws(JSONParseError) {
        try self.init(parsing: Array(text.utf8))
    }

    public init<C: Collection>(parsing bytes: C) throws(JSONParseError) where C.Element == UInt8 {
        var p = JSONParser(bytes: Array(bytes))
        p.skipWhitespace()
        let v = try p.parseValue(depth: 0)
        p.skipWhitespace()
        if p.i < p.b.count { throw p.error("unexpected data after the JSON value") }
        self = v
    }
}

struct JSONParser {
    let b: [UInt8]
    var i = 0
    init(bytes: [UInt8]) { b = bytes }

    func error(_ reason: String) -> JSONParseError { JSONParseError(offset: i, reason: reason) }

    mutating func skipWhitespace() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
    }

    mutating func expectLiteral(_ lit: StaticString, _ value: JSONValue) throws(JSONParseError) -> JSONValue {
        let n = lit.utf8CodeUnitCount
        guard i + n <= b.count else { throw error("unexpected end of input") }
        for k in 0..<n where b[i + k] != lit.utf8Start[k] { throw error("invalid literal") }
        i += n
        return value
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard i < b.count else { throw error("unexpected end of input") }
        switch b[i] {
        case UInt8(ascii: "{"):
            guard depth < JSONValue.maxDepth else { throw error("nesting deeper than \(JSONValue.maxDepth)") }
            i += 1
            var obj = JSONObject()
            skipWhitespace()
            if i < b.count, b[i] == UInt8(ascii: "}") { i += 1; return .object(obj) }
            obj.reserveCapacity(4)  // not grown from 1 for the usual few members
            while true {
                skipWhitespace()
                guard i < b.count, b[i] == UInt8(ascii: "\"") else { throw error("expected a member name") }
                let key = try parseString()
                skipWhitespace()
                guard i < b.count, b[i] == UInt8(ascii: ":") else { throw error("expected ':'") }
                i += 1
                skipWhitespace()
                obj[key] = try parseValue(depth: depth + 1)
                skipWhitespace()
                guard i < b.count else { throw error("unexpected end of input in object") }
                if b[i] == UInt8(ascii: ",") { i += 1; continue }
                if b[i] == UInt8(ascii: "}") { i += 1; return .object(obj) }
                throw error("expected ',' or '}'")
            }
        case UInt8(ascii: "["):
            guard depth < JSONValue.maxDepth else { throw error("nesting deeper than \(JSONValue.maxDepth)") }
            i += 1
            var arr = [JSONValue]()
            skipWhitespace()
            if i < b.count, b[i] == UInt8(ascii: "]") { i += 1; return .array(arr) }
            while true {
                skipWhitespace()
                arr.append(try parseValue(depth: depth + 1))
                skipWhitespace()
                guard i < b.count else { throw error("unexpected end of input in array") }
                if b[i] == UInt8(ascii: ",") { i += 1; continue }
                if b[i] == UInt8(ascii: "]") { i += 1; return .array(arr) }
                throw error("expected ',' or ']'")
            }
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"): return try expectLiteral("true", .bool(true))
        case UInt8(ascii: "f"): return try expectLiteral("false", .bool(false))
        case UInt8(ascii: "n"): return try expectLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        default:
            throw error("unexpected character")
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = i
        var isInteger = true
        if b[i] == UInt8(ascii: "-") { i += 1 }
        guard i < b.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b[i]) else {
            throw error("invalid number")
        }
        if b[i] == UInt8(ascii: "0") {
            i += 1
            if i < b.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b[i]) {
                throw error("leading zero in number")
            }
        } else {
            while i < b.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b[i]) { i += 1 }
        }
        if i < b.count, b[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            let d = i
            while i < b.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b[i]) { i += 1 }
            if i == d { throw error("digit expected after '.'") }
        }
        if i < b.count, b[i] | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            let d = i
            while i < b.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b[i]) { i += 1 }
            if i == d { throw error("digit expected in exponent") }
        }
        let text = String(decoding: b[start..<i], as: UTF8.self)
        if isInteger {
            if let v = Int64(text) { return .int(v) }
            if let v = UInt64(text) { return .uint(v) }
        }
        guard let d = Double(text) else { throw JSONParseError(offset: start, reason: "invalid number") }
        return .double(d)
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard i + 4 <= b.count else { throw error("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = b[i]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw error("invalid \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    mutating func parseString() throws(JSONParseError) -> String {
        i += 1  // opening quote
        let start = i
        // Most strings have no escape: made from their bytes in the input at once (a short one
        // without an allocation), not byte by byte into a growing array.
        var bits: UInt8 = 0  // every byte OR-ed: ASCII text needs no UTF-8 validation
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                let s = b.withUnsafeBufferPointer { all -> String? in
                    let run = UnsafeBufferPointer(rebasing: all[start..<i])
                    // The standard library's validating initialiser is generic over the encoding
                    // and costs ~1k instructions a string in metadata look-ups alone.
                    return bits < 0x80 ? String(decoding: run, as: UTF8.self) : String(validating: run, as: UTF8.self)
                }
                // Not UTF-8: the loop below throws, at the offset it always has.
                guard let s else { break }
                i += 1
                return s
            }
            if c == UInt8(ascii: "\\") || c < 0x20 { break }
            bits |= c
            i += 1
        }
        var out = Array(b[start..<i])
        while true {
            guard i < b.count else { throw error("unterminated string") }
            let c = b[i]
            if c == UInt8(ascii: "\"") { i += 1; break }
            if c < 0x20 { throw error("control character in string") }
            if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
            i += 1
            guard i < b.count else { throw error("unterminated escape") }
            let e = b[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard i + 2 <= b.count, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u") else {
                        throw error("unpaired surrogate in \\u escape")
                    }
                    i += 2
                    let low = try parseHex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate in \\u escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw error("unpaired surrogate in \\u escape")
                }
                guard let u = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default:
                throw error("invalid escape")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw error("string is not valid UTF-8") }
        return s
    }
}

// MARK: - Serialising

extension JSONValue {
    /// Compact JSON text. Non-finite doubles (which JSON cannot carry) are written as `null`;
    /// codecs that must keep them map them to strings first.
    public var jsonText: String { String(decoding: jsonBytes, as: UTF8.self) }

    /// The same text as its UTF-8 bytes (an MQTT payload), without going through a `String`.
    public var jsonBytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(256)
        write(to: &out, pretty: false, indent: 0)
        return out
    }

    /// Indented JSON text (two spaces), for people.
    public var prettyJSONText: String {
        var out = [UInt8]()
        write(to: &out, pretty: true, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    func write(to out: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case let .bool(v): out.append(contentsOf: (v ? "true" : "false").utf8)
        case let .int(v):
            if v < 0 { out.append(UInt8(ascii: "-")) }
            JSONValue.writeDigits(v.magnitude, to: &out)
        case let .uint(v): JSONValue.writeDigits(v, to: &out)
        case let .double(v):
            if !v.isFinite {
                out.append(contentsOf: "null".utf8)
            } else if v.rounded() == v, abs(v) < 1e15 {
                out.append(contentsOf: String(Int64(v)).utf8)  // checked: finite, whole, |v| < 1e15
                if v == 0, v.sign == .minus { out.insert(UInt8(ascii: "-"), at: out.count - 1) }
            } else {
                out.append(contentsOf: "\(v)".utf8)
            }
        case let .string(s): JSONValue.writeString(s, to: &out)
        case let .array(a):
            out.append(UInt8(ascii: "["))
            for (n, v) in a.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { JSONValue.newline(&out, indent + 1) }
                v.write(to: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty, !a.isEmpty { JSONValue.newline(&out, indent) }
            out.append(UInt8(ascii: "]"))
        case let .object(o):
            out.append(UInt8(ascii: "{"))
            var first = true
            o.forEachMember { key, value in
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                if pretty { JSONValue.newline(&out, indent + 1) }
                JSONValue.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                if pretty { out.append(UInt8(ascii: " ")) }
                value.write(to: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty, !o.isEmpty { JSONValue.newline(&out, indent) }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func newline(_ out: inout [UInt8], _ indent: Int) {
        out.append(0x0A)
        for _ in 0..<(indent * 2) { out.append(0x20) }
    }

    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// `v` in decimal, without the `String` a conversion would allocate.
    static func writeDigits(_ v: UInt64, to out: inout [UInt8]) {
        guard v >= 10 else { return out.append(UInt8(ascii: "0") + UInt8(v)) }
        let first = out.count
        var v = v
        while v > 0 {
            out.append(UInt8(ascii: "0") + UInt8(v % 10))
            v /= 10
        }
        out[first...].reverse()
    }

    /// `s` as a JSON string: the runs that need no escape copied whole, the rest escaped.
    static func writeString(_ s: borrowing String, to out: inout [UInt8]) {
        out.append(0x22)
        // Native strings are contiguous UTF-8 (small ones too): no copy of `s` to make it so.
        if s.utf8.withContiguousStorageIfAvailable({ writeEscaped($0, to: &out) }) == nil {
            var s = copy s
            s.withUTF8 { writeEscaped($0, to: &out) }
        }
        out.append(0x22)
    }

    /// `bytes` (UTF-8) with the characters JSON must escape escaped.
    static func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        var run = 0  // the start of the run not copied yet
        for i in bytes.indices {
            let c = bytes[i]
            guard c < 0x20 || c == 0x22 || c == 0x5C else { continue }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<i]))
            run = i + 1
            switch c {
            case 0x22: out.append(contentsOf: [0x5C, 0x22])
            case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            default:
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30])
                out.append(hexDigits[Int(c >> 4)])
                out.append(hexDigits[Int(c & 0xF)])
            }
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run...]))
    }
}

extension JSONValue: CustomStringConvertible {
    public var description: String { jsonText }
}

/// One JSON object written member by member straight to bytes: the text
/// `JSONValue.object(o).jsonBytes` gives for the object `o` with the same members in the same order,
/// without building `o` first (for the messages every command sends, whose members are known).
/// Keys are not checked for repeats: the caller writes each once. They are literals that need no
/// escaping (written as they are).
public struct JSONObjectWriter {
    private var out: [UInt8]
    private var empty = true

    public init(capacity: Int = 256) {
        out = []
        out.reserveCapacity(capacity)
        out.append(UInt8(ascii: "{"))
    }

    private mutating func key(_ key: StaticString) {
        if !empty { out.append(UInt8(ascii: ",")) }
        empty = false
        out.append(0x22)
        key.withUTF8Buffer { bytes in
            assert(!bytes.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }, "a key that needs escaping")
            out.append(contentsOf: bytes)
        }
        out.append(0x22)
        out.append(UInt8(ascii: ":"))
    }

    /// A member whose value is any JSON value.
    public mutating func member(_ key: StaticString, _ value: JSONValue) {
        self.key(key)
        value.write(to: &out, pretty: false, indent: 0)
    }

    /// A member whose value is a string.
    public mutating func member(_ key: StaticString, string: String) {
        self.key(key)
        JSONValue.writeString(string, to: &out)
    }

    /// A member whose value is `json`, the text of a JSON value written before (``JSONValue/jsonText``
    /// of the same value), copied as it is.
    public mutating func member(_ key: StaticString, json: String) {
        self.key(key)
        var json = json
        json.withUTF8 { out.append(contentsOf: $0) }
    }

    /// A member whose value is an object written by `body`.
    public mutating func member(_ key: StaticString, object body: (inout JSONObjectWriter) -> Void) {
        self.key(key)
        var inner = JSONObjectWriter(continuing: &out)
        body(&inner)
        inner.out.append(UInt8(ascii: "}"))
        swap(&inner.out, &out)  // the bytes back, not copied
    }

    /// A nested object written on into `out`'s bytes, which it takes (not copied).
    private init(continuing out: inout [UInt8]) {
        self.out = []
        swap(&self.out, &out)
        self.out.append(UInt8(ascii: "{"))
    }

    /// The object's text.
    public consuming func finish() -> [UInt8] {
        out.append(UInt8(ascii: "}"))
        return out
    }
}
