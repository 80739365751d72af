#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One D-Bus value with its type (D-Bus Specification, "Type System"). Containers carry their
/// element types so that an empty array or dictionary still has a signature.
///
/// Only the variant and the dictionary are boxed (`indirect`): a scalar, a string or an array
/// is stored inline, so an array of bytes (every GATT write and read) is one allocation, not one
/// per byte (docs/benchmarks.md, "Instructions per command").
public enum DBusValue: Hashable, Sendable, CustomStringConvertible {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(DBusObjectPath)
    /// A `g` value: a signature string (validated when marshalled).
    case signature(String)
    /// An `h` value: a file descriptor passed over the socket (`AcquireWrite`/`AcquireNotify`).
    case unixFD(DBusUnixFD)
    /// A `v` value: any single complete value.
    indirect case variant(DBusValue)
    /// An array of `element`-typed values.
    case array(element: DBusType, [DBusValue])
    /// A dictionary `a{KV}`; entries keep their wire order.
    indirect case dictionary(key: DBusType, value: DBusType, [DBusDictEntry])
    /// A struct; at least one field.
    case `struct`([DBusValue])

    /// The value's complete type.
    public var type: DBusType {
        switch self {
        case .byte: return .byte
        case .boolean: return .boolean
        case .int16: return .int16
        case .uint16: return .uint16
        case .int32: return .int32
        case .uint32: return .uint32
        case .int64: return .int64
        case .uint64: return .uint64
        case .double: return .double
        case .string: return .string
        case .objectPath: return .objectPath
        case .signature: return .signature
        case .unixFD: return .unixFD
        case .variant: return .variant
        case let .array(e, _): return .array(e)
        case let .dictionary(k, v, _): return .dictionary(key: k, value: v)
        case let .struct(fields): return .struct(fields.map(\.type))
        }
    }

    /// The value's signature, e.g. `a{sv}`.
    public var signature: String { type.signature }

    /// Checks what libdbus would otherwise reject (or abort on): element types, struct arity,
    /// NUL in strings, path and signature syntax, nesting depth (D-Bus Specification,
    /// "Valid Signatures" and "Marshaling").
    public func validate() throws(DBusError) {
        try validate(depth: 0)
    }

    private func validate(depth: Int) throws(DBusError) {
        guard depth <= 64 else { throw .invalidArgument("value nested deeper than 64 containers") }
        switch self {
        case let .string(s):
            guard !s.containsNUL else { throw .invalidArgument("string contains NUL") }
        case let .objectPath(p):
            guard p.isKnownValid else { throw .invalidArgument("object path \"\(p.rawValue)\" is not valid") }
        case let .signature(s):
            guard !s.containsNUL else { throw .invalidArgument("signature contains NUL") }
            _ = try DBusType.parse(signature: s)
        case let .variant(inner):
            try inner.validate(depth: depth + 1)
        case let .array(element, items):
            // A basic element type is valid as it is (no signature to parse); a byte array, the
            // body of every GATT write, is checked without a type per element.
            if element == .byte {
                guard items.allSatisfy({ if case .byte = $0 { true } else { false } }) else {
                    throw .invalidArgument("array element of another type in an array of y")
                }
                return
            }
            if !element.isBasic { _ = try DBusType(signature: element.signature) }
            for item in items {
                guard item.type == element else {
                    throw .invalidArgument("array element of type \(item.signature) in an array of \(element.signature)")
                }
                try item.validate(depth: depth + 1)
            }
        case let .dictionary(k, v, entries):
            guard k.isBasic else { throw .invalidArgument("dictionary key of type \(k.signature): keys are basic types") }
            if !v.isBasic, v != .variant { _ = try DBusType(signature: "a{" + k.signature + v.signature + "}") }
            for e in entries {
                guard e.key.type == k, e.value.type == v else {
                    throw .invalidArgument("dict entry {\(e.key.signature)\(e.value.signature)} in a{\(k.signature)\(v.signature)}")
                }
                try e.key.validate(depth: depth + 1)
                try e.value.validate(depth: depth + 1)
            }
        case let .struct(fields):
            guard !fields.isEmpty else { throw .invalidArgument("empty struct") }
            for f in fields { try f.validate(depth: depth + 1) }
        default:
            break
        }
    }

    public var description: String {
        switch self {
        case let .byte(v): return "byte \(v)"
        case let .boolean(v): return "\(v)"
        case let .int16(v): return "int16 \(v)"
        case let .uint16(v): return "uint16 \(v)"
        case let .int32(v): return "int32 \(v)"
        case let .uint32(v): return "uint32 \(v)"
        case let .int64(v): return "int64 \(v)"
        case let .uint64(v): return "uint64 \(v)"
        case let .double(v): return "double \(v)"
        case let .string(v): return "\"\(v)\""
        case let .objectPath(p): return "objpath \(p.rawValue)"
        case let .signature(s): return "signature \(s)"
        case let .unixFD(fd): return "fd \(fd.fileDescriptor)"
        case let .variant(v): return "<\(v)>"
        case let .array(_, items): return "[" + items.map(\.description).joined(separator: ", ") + "]"
        case let .dictionary(_, _, entries):
            return "{" + entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case let .struct(fields): return "(" + fields.map(\.description).joined(separator: ", ") + ")"
        }
    }
}

/// One entry of a ``DBusValue/dictionary(key:value:_:)``.
public struct DBusDictEntry: Hashable, Sendable {
    public var key: DBusValue
    public var value: DBusValue
    public init(_ key: DBusValue, _ value: DBusValue) {
        self.key = key
        self.value = value
    }
}

/// An object path (D-Bus Specification, "Valid Object Paths"): `/` or `/a/b_2`, elements of
/// `[A-Za-z0-9_]`, no empty elements, no trailing slash. Validity is checked when marshalled
/// (``isValid``), or up front with ``init(validating:)``. A path checked once (that way, or read
/// from a message, which libdbus validated) is not checked again each time it is marshalled.
public struct DBusObjectPath: Hashable, Comparable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public let rawValue: String
    /// Known to be valid (``init(validating:)``, ``init(received:)``): not checked again.
    let isChecked: Bool

    /// Wraps `rawValue` without checking it (see ``isValid``).
    public init(_ rawValue: String) { self.init(rawValue, checked: false) }
    public init(stringLiteral value: String) { self.init(value, checked: false) }

    private init(_ rawValue: String, checked: Bool) {
        self.rawValue = rawValue
        isChecked = checked
    }

    /// Wraps `rawValue`, throwing ``DBusError/invalidArgument(_:)`` when it is not a valid path.
    public init(validating rawValue: String) throws(DBusError) {
        guard DBusObjectPath(rawValue, checked: false).isValid else {
            throw .invalidArgument("object path \"\(rawValue)\" is not valid")
        }
        self.init(rawValue, checked: true)
    }

    /// A path read from a message (an `o` value, a message's path): libdbus validated it.
    init(received rawValue: String) { self.init(rawValue, checked: true) }

    /// Two paths are equal when their text is (whether either was checked does not matter).
    public static func == (a: DBusObjectPath, b: DBusObjectPath) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// Valid: checked before, or now.
    var isKnownValid: Bool { isChecked || isValid }

    public static let root = DBusObjectPath("/")

    public var description: String { rawValue }

    public static func < (a: DBusObjectPath, b: DBusObjectPath) -> Bool { a.rawValue < b.rawValue }

    /// Whether the path follows "Valid Object Paths".
    public var isValid: Bool {
        var text = rawValue
        return text.withUTF8(Self.isValid)  // the bytes in place: no array per check (every call's path)
    }

    private static func isValid(_ u: UnsafeBufferPointer<UInt8>) -> Bool {
        guard u.first == UInt8(ascii: "/") else { return false }
        if u.count == 1 { return true }
        guard u.last != UInt8(ascii: "/") else { return false }
        var previousSlash = true
        for c in u.dropFirst() {
            if c == UInt8(ascii: "/") {
                if previousSlash { return false }
                previousSlash = true
            } else {
                guard (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                    || c == UInt8(ascii: "_")
                else { return false }
                previousSlash = false
            }
        }
        return true
    }

    /// The path of a child element, e.g. `/org/bluez` + `hci0`.
    public func appending(_ element: String) -> DBusObjectPath {
        DBusObjectPath(rawValue == "/" ? "/" + element : rawValue + "/" + element)
    }

    /// Whether `self` lies strictly below `ancestor`.
    public func isDescendant(of ancestor: DBusObjectPath) -> Bool {
        if ancestor.rawValue == "/" { return rawValue != "/" }
        return rawValue.hasPrefix(ancestor.rawValue + "/")
    }

    /// The path with its last element removed; `nil` for `/`.
    public var parent: DBusObjectPath? {
        guard rawValue != "/", let slash = rawValue.lastIndex(of: "/") else { return nil }
        let p = String(rawValue[..<slash])
        return DBusObjectPath(p.isEmpty ? "/" : p)
    }
}

/// An owned Unix file descriptor carried by an `h` value (D-Bus Specification, "UNIX_FD";
/// BlueZ `AcquireWrite`/`AcquireNotify` return one).
///
/// The descriptor is closed when the last reference goes away; take a ``duplicate()`` to keep
/// one beyond that. Sending a value duplicates the descriptor (libdbus dups it), so the sender
/// keeps its own.
public final class DBusUnixFD: Hashable, Sendable, CustomStringConvertible {
    /// The descriptor number, valid while this object lives.
    public let fileDescriptor: Int32

    /// Takes ownership of `fd` (it will be closed on deinit).
    public init(taking fd: Int32) { self.fileDescriptor = fd }

    /// Duplicates `fd` (close-on-exec); the caller keeps ownership of `fd`.
    public init(duplicating fd: Int32) throws(DBusError) {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw .invalidArgument("cannot duplicate fd \(fd) (errno \(errno))") }
        self.fileDescriptor = copy
    }

    /// A new descriptor for the same open file that the caller owns and must close.
    public func duplicate() throws(DBusError) -> Int32 {
        let copy = fcntl(fileDescriptor, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw .invalidArgument("cannot duplicate fd \(fileDescriptor) (errno \(errno))") }
        return copy
    }

    deinit { close(fileDescriptor) }

    public static func == (a: DBusUnixFD, b: DBusUnixFD) -> Bool { a === b }
    public func hash(into h: inout Hasher) { h.combine(ObjectIdentifier(self)) }
    public var description: String { "fd \(fileDescriptor)" }
}

extension String {
    /// Whether the text has a NUL byte, which a C string (what libdbus takes) cannot carry:
    /// `memchr` over the UTF-8 in place, not the generic `utf8.contains(0)` (a few thousand
    /// instructions per D-Bus call, for the names and strings of each message).
    var containsNUL: Bool {
        utf8.withContiguousStorageIfAvailable { $0.count > 0 && memchr($0.baseAddress!, 0, $0.count) != nil }
            ?? utf8.contains(0)
    }
}
