/// The GoPro GATT characteristics that carry packetized messages (spec gopro.md §1).
/// The raw value is the 16-bit `XXXX` of `GP-XXXX` = `b5f9XXXX-aa8d-11e3-9046-0002a5d5c51b`.
public enum GoProCharacteristic: UInt16, Sendable, CaseIterable, Hashable {
    /// GP-0072, Command (write); responses on GP-0073.
    case command = 0x0072
    /// GP-0073, Command Response (notify).
    case commandResponse = 0x0073
    /// GP-0074, Settings (write); responses on GP-0075.
    case settings = 0x0074
    /// GP-0075, Settings Response (notify).
    case settingsResponse = 0x0075
    /// GP-0076, Query (write); responses and pushes on GP-0077.
    case query = 0x0076
    /// GP-0077, Query Response (notify).
    case queryResponse = 0x0077
    /// GP-0091, Network Management command (write); responses on GP-0092.
    case networkManagement = 0x0091
    /// GP-0092, Network Management response (notify).
    case networkManagementResponse = 0x0092

    /// `GP-XXXX` (upper-case hex), GoPro's short form (§1).
    public var shortName: String {
        let digits = Array("0123456789ABCDEF")
        let v = Int(rawValue)
        return "GP-" + String([digits[(v >> 12) & 0xF], digits[(v >> 8) & 0xF], digits[(v >> 4) & 0xF], digits[v & 0xF]])
    }

    /// The full 128-bit UUID in lower case (§1).
    public var uuid: String {
        switch self {
        // Spelled out: a notification names its characteristic by this text, so `init(identifier:)`
        // compares it first, and building it costs more than the rest of a notification's routing.
        case .command: "b5f90072-aa8d-11e3-9046-0002a5d5c51b"
        case .commandResponse: "b5f90073-aa8d-11e3-9046-0002a5d5c51b"
        case .settings: "b5f90074-aa8d-11e3-9046-0002a5d5c51b"
        case .settingsResponse: "b5f90075-aa8d-11e3-9046-0002a5d5c51b"
        case .query: "b5f90076-aa8d-11e3-9046-0002a5d5c51b"
        case .queryResponse: "b5f90077-aa8d-11e3-9046-0002a5d5c51b"
        case .networkManagement: "b5f90091-aa8d-11e3-9046-0002a5d5c51b"
        case .networkManagementResponse: "b5f90092-aa8d-11e3-9046-0002a5d5c51b"
        }
    }

    /// True for the notify characteristics (responses and pushes).
    public var isNotify: Bool {
        switch self {
        case .commandResponse, .settingsResponse, .queryResponse, .networkManagementResponse: return true
        default: return false
        }
    }

    /// The characteristic a request written here is answered on (§1 "Pairs with"); a notify
    /// characteristic returns itself.
    public var responseCharacteristic: GoProCharacteristic {
        switch self {
        case .command: return .commandResponse
        case .settings: return .settingsResponse
        case .query: return .queryResponse
        case .networkManagement: return .networkManagementResponse
        default: return self
        }
    }

    /// Parses `GP-0073` (any case, also without the dash), `0073`, or the full UUID.
    public init(identifier: String) throws(GoProError) {
        // The common case: the full UUID as ``uuid`` spells it (what the link reports).
        if let c = Self.allCases.first(where: { $0.uuid == identifier }) {
            self = c
            return
        }
        var text = identifier.lowercased()
        if text.count == 36, text.hasPrefix("b5f9"), text.hasSuffix("-aa8d-11e3-9046-0002a5d5c51b") {
            text = String(text.dropFirst(4).prefix(4))
        } else if text.hasPrefix("gp-") {
            text = String(text.dropFirst(3))
        } else if text.hasPrefix("gp") {
            text = String(text.dropFirst(2))
        }
        guard text.count == 4, let v = UInt16(text, radix: 16), let c = GoProCharacteristic(rawValue: v) else {
            throw .unknownCharacteristic(identifier)
        }
        self = c
    }
}
