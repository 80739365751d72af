/// The value of the glasses' characteristic 0x9301, "RFCOMM connection info" (spec
/// rokid-caps.md §4.1): Caps `[S serviceRecord, S mac, S account, u glassesType, u extra]`
/// (published sample `SSSuu`). Member 0 is the service-record UUID a client must send in
/// AUTH_REQ (§5.2 steps 1 and 3); the glasses answer another record with retCode −4 or silence.
///
/// Decoding needs only member 0 (a non-empty `S`): the other members are taken when present
/// with their §4.1 type and left nil otherwise, and members after the fifth are ignored, so a
/// firmware that adds or changes a trailing field still yields its record.
public struct CXRConnectionInfo: Sendable, Equatable {
    /// Member 0: the service-record UUID (per session on the glasses, §4.1).
    public var serviceRecord: String
    /// Member 1: the glasses' Bluetooth MAC.
    public var mac: String?
    /// Member 2: the Rokid account ("" when none).
    public var account: String?
    /// Member 3: glasses type, 0 no display, 1 display.
    public var glassesType: UInt32?
    /// Member 4: meaning unsure (S7 calls it "GATT version").
    public var extra: UInt32?

    /// A connection info value.
    public init(serviceRecord: String, mac: String? = nil, account: String? = nil, glassesType: UInt32? = nil, extra: UInt32? = nil) {
        self.serviceRecord = serviceRecord
        self.mac = mac
        self.account = account
        self.glassesType = glassesType
        self.extra = extra
    }

    /// Decodes the bytes read from 0x9301: one whole Caps object (``Caps/init(decoding:)-([UInt8])``),
    /// then ``init(caps:)``.
    public init(decoding bytes: [UInt8]) throws(CapsError) {
        try self.init(caps: try Caps(decoding: bytes))
    }

    /// Reads a decoded object; ``CapsError/invalidPacket(field:reason:)`` when member 0 is
    /// missing, not a string, or empty.
    public init(caps: Caps) throws(CapsError) {
        let m = caps.members
        let field = "0x9301 member 0 (service record)"
        guard let first = m.first else { throw .invalidPacket(field: field, reason: "the object is empty") }
        guard case let .string(record) = first else {
            throw .invalidPacket(field: field, reason: "expected S, found \(first.type.code)")
        }
        guard !record.isEmpty else { throw .invalidPacket(field: field, reason: "the string is empty") }
        func string(_ i: Int) -> String? {
            if i < m.count, case let .string(s) = m[i] { return s }
            return nil
        }
        func uint(_ i: Int) -> UInt32? {
            if i < m.count, case let .uint32(v) = m[i] { return v }
            return nil
        }
        self.init(serviceRecord: record, mac: string(1), account: string(2), glassesType: uint(3), extra: uint(4))
    }

    /// The object as the glasses publish it: `SSSuu`, absent members written as "" and 0.
    public var caps: Caps {
        [.string(serviceRecord), .string(mac ?? ""), .string(account ?? ""), .uint32(glassesType ?? 0), .uint32(extra ?? 0)]
    }

    /// The bytes of ``caps``.
    public func encoded() throws(CapsError) -> [UInt8] { try caps.encoded() }
}
