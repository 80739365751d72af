/// A single complete D-Bus type (D-Bus Specification, "Type System" / "Signatures").
///
/// Dictionaries are arrays of dict entries in D-Bus; here they are one case,
/// ``dictionary(key:value:)``, whose signature is `a{KV}`.
public enum DBusType: Hashable, Sendable, CustomStringConvertible {
    case byte, boolean, int16, uint16, int32, uint32, int64, uint64, double
    case string, objectPath, signature, unixFD
    case variant
    indirect case array(DBusType)
    indirect case dictionary(key: DBusType, value: DBusType)
    case `struct`([DBusType])

    /// The type's signature, e.g. `a{sv}`.
    public var signature: String {
        switch self {
        case .byte: return "y"
        case .boolean: return "b"
        case .int16: return "n"
        case .uint16: return "q"
        case .int32: return "i"
        case .uint32: return "u"
        case .int64: return "x"
        case .uint64: return "t"
        case .double: return "d"
        case .string: return "s"
        case .objectPath: return "o"
        case .signature: return "g"
        case .unixFD: return "h"
        case .variant: return "v"
        case let .array(e): return "a" + e.signature
        case let .dictionary(k, v): return "a{" + k.signature + v.signature + "}"
        case let .struct(fields): return "(" + fields.map(\.signature).joined() + ")"
        }
    }

    public var description: String { signature }

    /// Basic types (usable as dictionary keys): everything but containers and variants.
    public var isBasic: Bool {
        switch self {
        case .variant, .array, .dictionary, .struct: return false
        default: return true
        }
    }

    /// Parses a signature holding exactly one complete type (D-Bus Specification, "Signatures").
    public init(signature: String) throws(DBusError) {
        let types = try DBusType.parse(signature: signature)
        guard types.count == 1 else {
            throw .invalidSignature(signature, offset: types.isEmpty ? 0 : types[0].signature.utf8.count,
                                    reason: "expected exactly one complete type")
        }
        self = types[0]
    }

    /// Parses a signature: zero or more complete types (D-Bus Specification, "Signatures";
    /// at most 255 bytes, 32 nested arrays and 32 nested structs, dict entries only inside arrays
    /// with a basic key).
    public static func parse(signature: String) throws(DBusError) -> [DBusType] {
        let bytes = Array(signature.utf8)
        guard bytes.count <= 255 else {
            throw .invalidSignature(signature, offset: 255, reason: "longer than 255 bytes")
        }
        var parser = SignatureParser(bytes: bytes, text: signature)
        var types: [DBusType] = []
        while parser.index < bytes.count {
            types.append(try parser.parseComplete(arrayDepth: 0, structDepth: 0))
        }
        return types
    }
}

private struct SignatureParser {
    let bytes: [UInt8]
    let text: String
    var index = 0

    func fail(_ reason: String, at offset: Int? = nil) -> DBusError {
        .invalidSignature(text, offset: offset ?? index, reason: reason)
    }

    mutating func parseComplete(arrayDepth: Int, structDepth: Int) throws(DBusError) -> DBusType {
        guard index < bytes.count else { throw fail("a complete type is missing") }
        let c = bytes[index]
        let start = index
        index += 1
        switch c {
        case UInt8(ascii: "y"): return .byte
        case UInt8(ascii: "b"): return .boolean
        case UInt8(ascii: "n"): return .int16
        case UInt8(ascii: "q"): return .uint16
        case UInt8(ascii: "i"): return .int32
        case UInt8(ascii: "u"): return .uint32
        case UInt8(ascii: "x"): return .int64
        case UInt8(ascii: "t"): return .uint64
        case UInt8(ascii: "d"): return .double
        case UInt8(ascii: "s"): return .string
        case UInt8(ascii: "o"): return .objectPath
        case UInt8(ascii: "g"): return .signature
        case UInt8(ascii: "h"): return .unixFD
        case UInt8(ascii: "v"): return .variant
        case UInt8(ascii: "a"):
            guard arrayDepth < 32 else { throw fail("more than 32 nested arrays", at: start) }
            if index < bytes.count && bytes[index] == UInt8(ascii: "{") {
                let open = index
                index += 1
                let key = try parseComplete(arrayDepth: arrayDepth + 1, structDepth: structDepth + 1)
                guard key.isBasic else { throw fail("dict entry key must be a basic type", at: open + 1) }
                guard index < bytes.count, bytes[index] != UInt8(ascii: "}") else {
                    throw fail("dict entry needs a value type")
                }
                let value = try parseComplete(arrayDepth: arrayDepth + 1, structDepth: structDepth + 1)
                guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else {
                    throw fail("dict entry must have exactly two types and end with }")
                }
                guard structDepth < 32 else { throw fail("more than 32 nested structs", at: open) }
                index += 1
                return .dictionary(key: key, value: value)
            }
            return .array(try parseComplete(arrayDepth: arrayDepth + 1, structDepth: structDepth))
        case UInt8(ascii: "("):
            guard structDepth < 32 else { throw fail("more than 32 nested structs", at: start) }
            var fields: [DBusType] = []
            while true {
                guard index < bytes.count else { throw fail("struct not closed", at: start) }
                if bytes[index] == UInt8(ascii: ")") {
                    guard !fields.isEmpty else { throw fail("empty struct") }
                    index += 1
                    return .struct(fields)
                }
                fields.append(try parseComplete(arrayDepth: arrayDepth, structDepth: structDepth + 1))
            }
        case UInt8(ascii: "{"):
            throw fail("dict entry outside an array", at: start)
        case UInt8(ascii: ")"), UInt8(ascii: "}"):
            throw fail("unbalanced closing bracket", at: start)
        default:
            throw fail("unknown type code", at: start)
        }
    }
}
