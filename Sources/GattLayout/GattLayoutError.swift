/// Every error the GattLayout module throws (docs/layouts.md, "Errors").
///
/// Decoding distinguishes bytes that end too early (``needMoreData(field:offset:needed:available:)``)
/// from bytes that are complete but wrong (``malformed(field:offset:reason:)``); both name the field
/// and the byte offset. A wrong layout names the key path that is wrong; a wrong value given to the
/// encoder names the path of the value.
public enum GattLayoutError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes end inside `field`: it starts (or its next element starts) at byte `offset`, needs
    /// `needed` bytes and only `available` remain. More data could make the value decodable.
    case needMoreData(field: String, offset: Int, needed: Int, available: Int)
    /// The bytes are wrong for the layout at byte `offset` of `field` (invalid UTF-8, a value outside
    /// the field's `min`/`max`, bytes left over after the last field, …).
    case malformed(field: String, offset: Int, reason: String)
    /// The layout definition is wrong at key path `path` (for example `fields[2].type`).
    case invalidLayout(path: String, reason: String)
    /// A JSON value given to the encoder does not fit the layout at `path` (for example
    /// `rr_intervals[1]` or `time_stamp.month`); `path` is empty for the top-level value.
    case invalidValue(path: String, reason: String)
    /// `builtin:NAME` names no built-in layout; `known` lists the names that exist.
    case unknownBuiltin(name: String, known: [String])

    public var description: String {
        switch self {
        case let .needMoreData(field, offset, needed, available):
            return "need more data: field '\(field)' at byte \(offset) needs \(needed) byte(s), only \(available) left"
        case let .malformed(field, offset, reason):
            return "malformed: field '\(field)' at byte \(offset): \(reason)"
        case let .invalidLayout(path, reason):
            return "invalid layout at \(path.isEmpty ? "the top level" : path): \(reason)"
        case let .invalidValue(path, reason):
            return "invalid value\(path.isEmpty ? "" : " at \(path)"): \(reason)"
        case let .unknownBuiltin(name, known):
            return "unknown built-in layout '\(name)' (known: \(known.joined(separator: ", ")))"
        }
    }
}
