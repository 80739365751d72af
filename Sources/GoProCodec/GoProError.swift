/// Every error the GoPro codec raises (spec gopro.md §3–§7). Decoders tell *need more data*
/// (`truncated`) from *malformed* input, with the reason and the byte offset.
public enum GoProError: Error, Sendable, Equatable, CustomStringConvertible {
    // MARK: Transport (§3)

    /// An empty GATT value: there is no header byte.
    case emptyPacket
    /// A start packet with the reserved header `0b011xxxxx` (§3 table).
    case reservedHeader(byte: UInt8)
    /// An extended start header cut short: `needed` header bytes, only `available` present.
    case truncatedHeader(needed: Int, available: Int)
    /// A continuation packet arrived while no message was in progress (§3, robustness notes);
    /// the packet is ignored and the assembler stays idle.
    case strayContinuation(header: UInt8)
    /// The continuation counter of a counting sender skipped a value (a packet was lost);
    /// the message in progress is dropped.
    case continuationGap(expected: UInt8, received: UInt8)
    /// The continuation counter of a counting sender repeated a value (a packet was duplicated);
    /// the message in progress is dropped.
    case continuationDuplicate(counter: UInt8)
    /// More payload bytes arrived than the start header announced; the message is dropped.
    case overrun(declared: Int, received: Int)
    /// A message too long for the header the camera accepts (extended-13, at most 8191 bytes;
    /// extended-16 is never sent towards the camera, §3).
    case messageTooLong(length: Int, maximum: Int)

    // MARK: Messages (§4)

    /// The message ends before a field it announces; `offset` is where the missing bytes were due.
    case truncated(reason: String, offset: Int)
    /// The bytes at `offset` cannot be what the spec allows.
    case malformed(reason: String, offset: Int)
    /// A protobuf payload that SwiftProtobuf cannot decode as the message §7 names.
    case invalidProtobuf(message: String, reason: String)
    /// A characteristic name that is not a GoPro `GP-XXXX` characteristic the codec knows, or one
    /// that carries no packetized messages.
    case unknownCharacteristic(String)

    // MARK: JSON vocabulary (docs/gopro.md)

    /// A request names no known operation (`command`, `setting` or `query`).
    case unknownOperation(field: String, value: String)
    /// A request field is missing, of the wrong type, or out of range.
    case invalidField(field: String, reason: String)

    public var description: String {
        switch self {
        case .emptyPacket: return "empty packet: no header byte"
        case let .reservedHeader(byte): return "reserved start header 0x\(Self.hex(byte)) at offset 0"
        case let .truncatedHeader(needed, available):
            return "start header needs \(needed) byte(s), packet has \(available) at offset 0"
        case let .strayContinuation(header):
            return "continuation packet 0x\(Self.hex(header)) with no message in progress (ignored)"
        case let .continuationGap(expected, received):
            return "continuation counter gap: expected \(expected), got \(received) (message dropped)"
        case let .continuationDuplicate(counter):
            return "duplicated continuation counter \(counter) (message dropped)"
        case let .overrun(declared, received):
            return "message overrun: header declared \(declared) byte(s), received \(received) (message dropped)"
        case let .messageTooLong(length, maximum):
            return "message of \(length) bytes exceeds the \(maximum)-byte maximum"
        case let .truncated(reason, offset): return "truncated at offset \(offset): \(reason)"
        case let .malformed(reason, offset): return "malformed at offset \(offset): \(reason)"
        case let .invalidProtobuf(message, reason): return "invalid protobuf \(message): \(reason)"
        case let .unknownCharacteristic(name): return "unknown GoPro characteristic \"\(name)\""
        case let .unknownOperation(field, value): return "unknown \(field) \"\(value)\""
        case let .invalidField(field, reason): return "invalid field \"\(field)\": \(reason)"
        }
    }

    static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }
}
