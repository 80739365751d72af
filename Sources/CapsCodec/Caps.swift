/// A Rokid Caps version 5 object: an ordered list of typed members (spec rokid-caps.md §3).
///
/// Encode with ``encoded()``; decode a whole buffer with ``init(decoding:)-([UInt8])`` or
/// pull objects from a byte stream with ``CapsStreamReader``. Equality compares floating-point
/// members by bit pattern, so a decoded NaN equals itself and `-0.0` differs from `0.0`.
public struct Caps: Sendable, Hashable, ExpressibleByArrayLiteral, RandomAccessCollection, MutableCollection {
    /// The members, in wire order.
    public var members: [CapsValue]

    /// The version byte every object carries (§1.3, §3.1).
    public static let version: UInt8 = 5
    /// Default bound on a decoded object's total size: 4 MiB, the glasses' receive buffer (§3.4).
    public static let defaultSizeLimit = 4 << 20
    /// Deepest nesting of `O` members the codec accepts (each level costs stack on decode).
    public static let maxNestingDepth = 64

    /// An object with these members.
    public init(_ members: [CapsValue] = []) { self.members = members }
    /// An object written as an array literal of members.
    public init(arrayLiteral elements: CapsValue...) { members = elements }

    /// Index of the first member (collection access to `members`).
    public var startIndex: Int { members.startIndex }
    /// One past the last member.
    public var endIndex: Int { members.endIndex }
    /// The member at `position`.
    public subscript(position: Int) -> CapsValue {
        get { members[position] }
        set { members[position] = newValue }
    }

    /// Appends a member.
    public mutating func append(_ value: CapsValue) { members.append(value) }
}

/// One member of a ``Caps`` object; the case is the type code on the wire (§3.2).
/// Booleans travel as `.uint32(0/1)`; narrower integers widen to `i`/`u` (§3.2).
public enum CapsValue: Sendable, Hashable {
    /// `V`: void, carries no bytes.
    case void
    /// `i`: int32, SLEB128.
    case int32(Int32)
    /// `u`: uint32, ULEB128.
    case uint32(UInt32)
    /// `l`: int64, SLEB128.
    case int64(Int64)
    /// `k`: uint64, ULEB128.
    case uint64(UInt64)
    /// `f`: float32, 4 bytes little endian.
    case float(Float)
    /// `d`: float64, 8 bytes little endian.
    case double(Double)
    /// `S`: string, ULEB128 byte length then UTF-8.
    case string(String)
    /// `B`: binary, ULEB128 byte length then the bytes.
    case binary([UInt8])
    /// `O`: a complete nested object (§3.3).
    case object(Caps)

    /// A boolean as Caps writes it: `u` 1 or 0 (§3.2).
    public static func bool(_ value: Bool) -> CapsValue { .uint32(value ? 1 : 0) }

    /// The member's type code.
    public var type: CapsType {
        switch self {
        case .void: return .void
        case .int32: return .int32
        case .uint32: return .uint32
        case .int64: return .int64
        case .uint64: return .uint64
        case .float: return .float
        case .double: return .double
        case .string: return .string
        case .binary: return .binary
        case .object: return .object
        }
    }

    /// The value of an `S` member, else nil (likewise the accessors below for their type).
    public var stringValue: String? { if case let .string(s) = self { return s }; return nil }
    public var uint32Value: UInt32? { if case let .uint32(v) = self { return v }; return nil }
    public var int32Value: Int32? { if case let .int32(v) = self { return v }; return nil }
    public var uint64Value: UInt64? { if case let .uint64(v) = self { return v }; return nil }
    public var int64Value: Int64? { if case let .int64(v) = self { return v }; return nil }
    public var binaryValue: [UInt8]? { if case let .binary(v) = self { return v }; return nil }
    public var objectValue: Caps? { if case let .object(v) = self { return v }; return nil }

    /// Equality by type and value; floats compare by bit pattern.
    public static func == (a: CapsValue, b: CapsValue) -> Bool {
        switch (a, b) {
        case (.void, .void): return true
        case let (.int32(x), .int32(y)): return x == y
        case let (.uint32(x), .uint32(y)): return x == y
        case let (.int64(x), .int64(y)): return x == y
        case let (.uint64(x), .uint64(y)): return x == y
        case let (.float(x), .float(y)): return x.bitPattern == y.bitPattern
        case let (.double(x), .double(y)): return x.bitPattern == y.bitPattern
        case let (.string(x), .string(y)): return x == y
        case let (.binary(x), .binary(y)): return x == y
        case let (.object(x), .object(y)): return x == y
        default: return false
        }
    }

    /// Hashes consistently with `==` (floats by bit pattern).
    public func hash(into h: inout Hasher) {
        h.combine(type.rawValue)
        switch self {
        case .void: break
        case let .int32(v): h.combine(v)
        case let .uint32(v): h.combine(v)
        case let .int64(v): h.combine(v)
        case let .uint64(v): h.combine(v)
        case let .float(v): h.combine(v.bitPattern)
        case let .double(v): h.combine(v.bitPattern)
        case let .string(v): h.combine(v)
        case let .binary(v): h.combine(v)
        case let .object(v): h.combine(v)
        }
    }
}

/// The ten type codes of Caps v5 (§3.2), as their ASCII bytes.
public enum CapsType: UInt8, Sendable, CaseIterable {
    case void = 0x56  // V
    case int32 = 0x69  // i
    case uint32 = 0x75  // u
    case int64 = 0x6C  // l
    case uint64 = 0x6B  // k
    case float = 0x66  // f
    case double = 0x64  // d
    case string = 0x53  // S
    case binary = 0x42  // B
    case object = 0x4F  // O

    /// The one-letter code, e.g. `"u"`.
    public var code: String { String(Character(Unicode.Scalar(rawValue))) }

    /// The type for a one-letter code, or nil.
    public init?(code: String) {
        let u = Array(code.utf8)
        guard u.count == 1, let t = CapsType(rawValue: u[0]) else { return nil }
        self = t
    }
}
