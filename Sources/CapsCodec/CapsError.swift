/// The one error type of the CapsCodec module (Caps v5 objects, the CXR envelope and the
/// JSON mappings). Decoders distinguish *need more data* (``needMoreData(offset:needed:)``)
/// from *malformed* (``malformed(_:offset:)``); every byte offset is relative to the start of
/// the input (for the stream reader: of everything fed to it since the last reset).
public enum CapsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The input ends before the object does (spec rokid-caps.md §3.4, §4.5): at least
    /// `needed` more bytes are required after the `offset` where the input ends. Not a
    /// protocol error on a stream; a whole-buffer parse reports truncation this way.
    case needMoreData(offset: Int, needed: Int)
    /// The bytes break the Caps v5 format (§3); `offset` is where the fault was found.
    case malformed(Malformation, offset: Int)
    /// An encode request the format cannot carry (an object larger than a uint32 size, or
    /// nested deeper than ``Caps/maxNestingDepth``).
    case unencodable(reason: String)
    /// A JSON document does not map to Caps members (typed or loose form, docs/caps.md).
    /// `path` names the place, e.g. `$[3].value`.
    case invalidJSON(path: String, reason: String)
    /// A CXR command (§6 vocabulary) is unknown, misses a field, or a field has the wrong
    /// type or an out-of-range value. `field` names it, e.g. `value` or `config.textSize`.
    case invalidCommand(field: String, reason: String)
    /// A well-formed Caps object is not a valid CXR packet (§5.1): a member is missing or has
    /// the wrong type. `field` names it, e.g. `member 1 (request id)`.
    case invalidPacket(field: String, reason: String)

    /// What is wrong with malformed Caps bytes.
    public enum Malformation: Sendable, Equatable, CustomStringConvertible {
        /// The version byte is not 5 (§1.3, §3.5).
        case unsupportedVersion(UInt8)
        /// A declared total size of 5 or less (§3.1: the smallest object is 6 bytes).
        case sizeTooSmall(UInt32)
        /// A declared total size above the configured limit (§3.4, §4.5).
        case sizeAboveLimit(UInt32, limit: Int)
        /// Bytes follow the object in a whole-buffer parse (§3.4 `Caps::parse`).
        case trailingBytes(count: Int)
        /// The values end before the declared size does.
        case sizeMismatch(declared: UInt32, used: Int)
        /// A member or nested object runs past the end of its enclosing object.
        case pastEnd(String)
        /// A type code outside `V i u l k f d S B O` (§3.2).
        case unknownTypeCode(UInt8)
        /// A LEB128 value still has its continuation bit set after 5 (32-bit) or 10 (64-bit)
        /// bytes (§3.2).
        case integerTooLong(bits: Int)
        /// A LEB128 value does not fit its type (§3.2, `invalid.json`).
        case integerOverflow(bits: Int)
        /// A string is neither UTF-8 nor CESU-8 (§3.7).
        case invalidUTF8
        /// Objects nested deeper than ``Caps/maxNestingDepth``.
        case nestingTooDeep(limit: Int)

        /// A short reason for people.
        public var description: String {
            switch self {
            case let .unsupportedVersion(v): return "unsupported version \(v) (only 5 is understood)"
            case let .sizeTooSmall(s): return "total size \(s) is too small (at least 6)"
            case let .sizeAboveLimit(s, limit): return "total size \(s) is above the limit of \(limit) bytes"
            case let .trailingBytes(n): return "\(n) trailing byte(s) after the object"
            case let .sizeMismatch(declared, used): return "total size \(declared) but the members end after \(used) bytes"
            case let .pastEnd(what): return "\(what) runs past the end of its object"
            case let .unknownTypeCode(c):
                let printable = (0x21...0x7E).contains(c) ? " '\(Character(Unicode.Scalar(c)))'" : ""
                return "unknown type code 0x\(String(c, radix: 16))\(printable)"
            case let .integerTooLong(bits): return "LEB128 longer than \(bits == 32 ? 5 : 10) bytes for a \(bits)-bit value"
            case let .integerOverflow(bits): return "LEB128 value does not fit in \(bits) bits"
            case .invalidUTF8: return "string is not valid UTF-8 (nor CESU-8)"
            case let .nestingTooDeep(limit): return "objects nested deeper than \(limit) levels"
            }
        }
    }

    /// True for ``needMoreData(offset:needed:)``: more input may complete the object.
    public var isNeedMoreData: Bool {
        if case .needMoreData = self { return true }
        return false
    }

    /// One line: what is wrong and where.
    public var description: String {
        switch self {
        case let .needMoreData(offset, needed):
            return "need more data: input ends at byte \(offset), at least \(needed) more byte(s) needed"
        case let .malformed(m, offset): return "malformed Caps at byte \(offset): \(m)"
        case let .unencodable(reason): return "cannot encode: \(reason)"
        case let .invalidJSON(path, reason): return "invalid Caps JSON at \(path): \(reason)"
        case let .invalidCommand(field, reason): return "invalid CXR command field '\(field)': \(reason)"
        case let .invalidPacket(field, reason): return "invalid CXR packet, \(field): \(reason)"
        }
    }
}
