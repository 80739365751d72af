/// A Swift type with a fixed D-Bus type, convertible to and from ``DBusValue``
/// (D-Bus Specification, "Type System"). `DBusValue` itself stands for `v`, so
/// `[String: DBusValue]` is `a{sv}` and `[DBusObjectPath: [String: [String: DBusValue]]]` is
/// BlueZ's `a{oa{sa{sv}}}` (spec/bluez.md, "Objects a client sees").
public protocol DBusRepresentable: Sendable {
    /// The D-Bus type of every value of this Swift type.
    static var dbusType: DBusType { get }
    /// Decodes from a value of type ``dbusType``; throws ``DBusError/typeMismatch(expected:actual:)``.
    init(dbusValue: DBusValue) throws(DBusError)
    /// The value as D-Bus sees it.
    var dbusValue: DBusValue { get }
}

@inline(__always)
private func mismatch<T: DBusRepresentable>(_: T.Type, _ v: DBusValue) -> DBusError {
    .typeMismatch(expected: T.dbusType.signature, actual: v.signature)
}

extension UInt8: DBusRepresentable {
    public static var dbusType: DBusType { .byte }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .byte(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .byte(self) }
}

extension Bool: DBusRepresentable {
    public static var dbusType: DBusType { .boolean }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .boolean(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .boolean(self) }
}

extension Int16: DBusRepresentable {
    public static var dbusType: DBusType { .int16 }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .int16(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .int16(self) }
}

extension UInt16: DBusRepresentable {
    public static var dbusType: DBusType { .uint16 }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .uint16(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .uint16(self) }
}

extension Int32: DBusRepresentable {
    public static var dbusType: DBusType { .int32 }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .int32(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .int32(self) }
}

extension UInt32: DBusRepresentable {
    public static var dbusType: DBusType { .uint32 }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .uint32(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .uint32(self) }
}

extension Int64: DBusRepresentable {
    public static var dbusType: DBusType { .int64 }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .int64(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .int64(self) }
}

extension UInt64: DBusRepresentable {
    public static var dbusType: DBusType { .uint64 }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .uint64(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .uint64(self) }
}

extension Double: DBusRepresentable {
    public static var dbusType: DBusType { .double }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .double(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .double(self) }
}

extension String: DBusRepresentable {
    public static var dbusType: DBusType { .string }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .string(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .string(self) }
}

extension DBusObjectPath: DBusRepresentable {
    public static var dbusType: DBusType { .objectPath }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .objectPath(x) = v else { throw mismatch(Self.self, v) }
        self = x
    }
    public var dbusValue: DBusValue { .objectPath(self) }
}

extension DBusUnixFD: DBusRepresentable {
    public static var dbusType: DBusType { .unixFD }
    public convenience init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .unixFD(x) = v else { throw mismatch(DBusUnixFD.self, v) }
        try self.init(duplicating: x.fileDescriptor)
    }
    public var dbusValue: DBusValue { .unixFD(self) }
}

/// `DBusValue` as a Swift type stands for a variant: decoding unwraps `.variant(x)` to `x`,
/// encoding wraps the value in `.variant`.
extension DBusValue: DBusRepresentable {
    public static var dbusType: DBusType { .variant }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .variant(x) = v else { throw .typeMismatch(expected: "v", actual: v.signature) }
        self = x
    }
    public var dbusValue: DBusValue { .variant(self) }
}

extension Array: DBusRepresentable where Element: DBusRepresentable {
    public static var dbusType: DBusType { .array(Element.dbusType) }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .array(e, items) = v, e == Element.dbusType else {
            throw .typeMismatch(expected: Self.dbusType.signature, actual: v.signature)
        }
        var out: [Element] = []
        out.reserveCapacity(items.count)
        for item in items { out.append(try Element(dbusValue: item)) }
        self = out
    }
    public var dbusValue: DBusValue { .array(element: Element.dbusType, map(\.dbusValue)) }
}

/// Dictionaries decode from `a{KV}`; a key that occurs twice keeps its last value.
extension Dictionary: DBusRepresentable where Key: DBusRepresentable, Value: DBusRepresentable {
    public static var dbusType: DBusType { .dictionary(key: Key.dbusType, value: Value.dbusType) }
    public init(dbusValue v: DBusValue) throws(DBusError) {
        guard case let .dictionary(k, val, entries) = v, k == Key.dbusType, val == Value.dbusType else {
            throw .typeMismatch(expected: Self.dbusType.signature, actual: v.signature)
        }
        var out: [Key: Value] = [:]
        for e in entries { out[try Key(dbusValue: e.key)] = try Value(dbusValue: e.value) }
        self = out
    }
    /// Entries are sorted by key description for a stable wire order.
    public var dbusValue: DBusValue {
        let entries = map { DBusDictEntry($0.key.dbusValue, $0.value.dbusValue) }
            .sorted { $0.key.description < $1.key.description }
        return .dictionary(key: Key.dbusType, value: Value.dbusType, entries)
    }
}

extension DBusValue {
    /// `ay` from bytes.
    public static func bytes(_ bytes: [UInt8]) -> DBusValue { .array(element: .byte, bytes.map { .byte($0) }) }

    /// `as` from strings.
    public static func strings(_ strings: [String]) -> DBusValue { .array(element: .string, strings.map { .string($0) }) }

    /// `a{sv}` from a dictionary, entries in key order.
    public static func properties(_ dict: [String: DBusValue]) -> DBusValue { dict.dbusValue }

    /// Decodes this value as `T`, unwrapping one variant level first if `T` is not itself `v`
    /// (so a property's `.variant(.string("x"))` decodes as `String`).
    public func decode<T: DBusRepresentable>(as: T.Type = T.self) throws(DBusError) -> T {
        if case let .variant(inner) = self, T.dbusType != .variant { return try T(dbusValue: inner) }
        return try T(dbusValue: self)
    }

    /// The value inside a variant, or the value itself.
    public var unwrapped: DBusValue {
        if case let .variant(inner) = self { return inner.unwrapped }
        return self
    }

    /// A string, object path or signature's text.
    public var stringValue: String? {
        switch unwrapped {
        case let .string(s), let .signature(s): return s
        case let .objectPath(p): return p.rawValue
        default: return nil
        }
    }

    /// A boolean, or `nil`.
    public var boolValue: Bool? { try? decode(as: Bool.self) }

    /// Any integer type widened to `Int64` (`uint64` above `Int64.max` gives `nil`).
    public var integerValue: Int64? {
        switch unwrapped {
        case let .byte(v): return Int64(v)
        case let .int16(v): return Int64(v)
        case let .uint16(v): return Int64(v)
        case let .int32(v): return Int64(v)
        case let .uint32(v): return Int64(v)
        case let .int64(v): return v
        case let .uint64(v): return Int64(exactly: v)
        default: return nil
        }
    }

    /// `ay` as bytes, or `nil`.
    public var bytesValue: [UInt8]? { try? decode(as: [UInt8].self) }

    /// The items of an array (any element type), or `nil`.
    public var arrayItems: [DBusValue]? {
        if case let .array(_, items) = unwrapped { return items }
        return nil
    }

    /// An `a{sv}` as a Swift dictionary of (unwrapped) values, or `nil`.
    public var propertiesValue: [String: DBusValue]? { try? decode(as: [String: DBusValue].self) }
}

extension Array where Element == DBusValue {
    /// Decodes argument `index` as `T`; throws ``DBusError/invalidArgument(_:)`` if absent.
    public func decode<T: DBusRepresentable>(_ index: Int, as: T.Type = T.self) throws(DBusError) -> T {
        guard indices.contains(index) else {
            throw .invalidArgument("argument \(index) missing (have \(count))")
        }
        return try self[index].decode(as: T.self)
    }
}
