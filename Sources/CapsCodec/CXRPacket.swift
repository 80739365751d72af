import BinaryCoding

/// A CXR packet type id: member 0 of every packet, a `u` (spec rokid-caps.md §5.1).
public struct CXRPacketType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The id as it travels (a `u` member).
    public let rawValue: UInt32
    /// Any id, known or not.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    // The ids of spec §5.1.

    /// 0x1001 (§5.1).
    public static let request = CXRPacketType(rawValue: 0x1001)
    /// 0x1002 (§5.1).
    public static let response = CXRPacketType(rawValue: 0x1002)
    /// 0x1003 (§5.1).
    public static let notify = CXRPacketType(rawValue: 0x1003)
    /// 0x1004 (§5.1).
    public static let authRequest = CXRPacketType(rawValue: 0x1004)
    /// 0x1005 (§5.1).
    public static let authResponse = CXRPacketType(rawValue: 0x1005)
    /// 0x1006 (§5.1).
    public static let changeRokidAccount = CXRPacketType(rawValue: 0x1006)
    /// 0x1007 (§5.1).
    public static let disconnect = CXRPacketType(rawValue: 0x1007)
    /// 0x1008 (§5.1).
    public static let activeRequest = CXRPacketType(rawValue: 0x1008)
    /// 0x1009 (§5.1).
    public static let activeNotify = CXRPacketType(rawValue: 0x1009)
    /// 0x100A (§5.1).
    public static let clientListRequest = CXRPacketType(rawValue: 0x100A)
    /// 0x100B (§5.1).
    public static let clientListResponse = CXRPacketType(rawValue: 0x100B)
    /// 0x100C (§5.1).
    public static let removeClientRequest = CXRPacketType(rawValue: 0x100C)
    /// 0x100D (§5.1).
    public static let removeClientResponse = CXRPacketType(rawValue: 0x100D)
    /// 0x2001 (§5.1).
    public static let transferStart = CXRPacketType(rawValue: 0x2001)
    /// 0x2002 (§5.1).
    public static let transfer = CXRPacketType(rawValue: 0x2002)
    /// 0x2003 (§5.1).
    public static let transferLast = CXRPacketType(rawValue: 0x2003)
    /// 0x2011 (§5.1).
    public static let artcFrameStart = CXRPacketType(rawValue: 0x2011)
    /// 0x2012 (§5.1).
    public static let artcFrame = CXRPacketType(rawValue: 0x2012)
    /// 0x2013 (§5.1).
    public static let artcFrameLast = CXRPacketType(rawValue: 0x2013)
    /// 0x3001 (§5.1).
    public static let startAudioStream = CXRPacketType(rawValue: 0x3001)
    /// 0x3002 (§5.1).
    public static let audioStream = CXRPacketType(rawValue: 0x3002)
    /// 0x3003 (§5.1).
    public static let audioStreamFinish = CXRPacketType(rawValue: 0x3003)

    /// The name used in spec §5.1 (`REQUEST`, `AUTH_REQ`, …), or `0x….` for an unknown id.
    public var name: String {
        switch rawValue {
        case 0x1001: return "REQUEST"
        case 0x1002: return "RESPONSE"
        case 0x1003: return "NOTIFY"
        case 0x1004: return "AUTH_REQ"
        case 0x1005: return "AUTH_RESP"
        case 0x1006: return "CHANGE_ROKID_ACCOUNT"
        case 0x1007: return "DISCONNECT"
        case 0x1008: return "ACTIVE_REQ"
        case 0x1009: return "ACTIVE_NOTIFY"
        case 0x100A: return "CLIENT_LIST_REQ"
        case 0x100B: return "CLIENT_LIST_RESP"
        case 0x100C: return "REMOVE_CLIENT_REQ"
        case 0x100D: return "REMOVE_CLIENT_RESP"
        case 0x2001: return "TRANSFER_START"
        case 0x2002: return "TRANSFER"
        case 0x2003: return "TRANSFER_LAST"
        case 0x2011: return "ARTC_FRAME_START"
        case 0x2012: return "ARTC_FRAME"
        case 0x2013: return "ARTC_FRAME_LAST"
        case 0x3001: return "START_AUDIO_STREAM"
        case 0x3002: return "AUDIO_STREAM"
        case 0x3003: return "AUDIO_STREAM_FINISH"
        default:
            let h = String(rawValue, radix: 16)
            return "0x" + String(repeating: "0", count: max(0, 4 - h.count)) + h
        }
    }

    /// The §5.1 name.
    public var description: String { name }
}

/// AUTH_REQ 0x1004, the client's connection handshake (§5.2):
/// `[u type, u major, u minor, S serviceRecord, k clientTime, u extraType, S customInfo]`.
public struct CXRAuthRequest: Sendable, Equatable {
    /// CXR protocol major version (1).
    public var major: UInt32
    /// CXR protocol minor version (12 in the newest client, §5).
    public var minor: UInt32
    /// The service-record UUID read from characteristic 0x9301 (§4.1).
    public var serviceRecord: String
    /// Client time in nanoseconds since the Unix epoch.
    public var clientTime: UInt64
    /// 0 for Android clients; 194/195 are Rokid's own iOS apps.
    public var extraType: UInt32
    /// Free-form client information.
    public var customInfo: String

    /// An AUTH_REQ; defaults are protocol 1.12 and an Android client (extraType 0).
    public init(major: UInt32 = 1, minor: UInt32 = 12, serviceRecord: String, clientTime: UInt64,
                extraType: UInt32 = 0, customInfo: String = "") {
        self.major = major
        self.minor = minor
        self.serviceRecord = serviceRecord
        self.clientTime = clientTime
        self.extraType = extraType
        self.customInfo = customInfo
    }
}

/// AUTH_RESP 0x1005 (§5.2): `[u type, u major, u minor, i retCode, S clientMac]`.
/// `retCode` 0: authorised and active; 1: authorised, inactive; below 0: refused.
public struct CXRAuthResponse: Sendable, Equatable {
    /// The glasses' protocol major version.
    public var major: UInt32
    /// The glasses' protocol minor version.
    public var minor: UInt32
    /// 0 authorised and active, 1 authorised but inactive, < 0 refused (-1 major mismatch,
    /// -3 no service record, -4 record mismatch, -6 already connected or rejected; §5.2).
    public var retCode: Int32
    /// The client's MAC as the glasses see it.
    public var clientMac: String

    /// An AUTH_RESP.
    public init(major: UInt32, minor: UInt32, retCode: Int32, clientMac: String) {
        self.major = major
        self.minor = minor
        self.retCode = retCode
        self.clientMac = clientMac
    }
}

/// A CXR packet: one top-level Caps whose member 0 is the `u` packet type (spec §5).
/// Build one and call ``encoded()``; decode with ``init(decoding:)`` or ``init(caps:)``.
public enum CXRPacket: Sendable, Equatable {
    /// REQUEST 0x1001: `[u type, u reqId, S channel, O args]`; `args` is
    /// `[S subCommand, data?, dataExt?]` (§5.3).
    case request(requestID: UInt32, channel: String, args: Caps)
    /// RESPONSE 0x1002: `[u type, u reqId, O args]` (§5.4).
    case response(requestID: UInt32, args: Caps)
    /// NOTIFY 0x1003: `[u type, S channel, O args]`.
    case notify(channel: String, args: Caps)
    /// AUTH_REQ 0x1004 (§5.2).
    case authRequest(CXRAuthRequest)
    /// AUTH_RESP 0x1005 (§5.2).
    case authResponse(CXRAuthResponse)
    /// TRANSFER_START 0x2001: `[u type, u totalSize, S channel, O args]` (§5.3).
    case transferStart(totalSize: UInt32, channel: String, args: Caps)
    /// TRANSFER 0x2002 (`last == false`) or TRANSFER_LAST 0x2003: `[u type, B chunk]`.
    case transfer(chunk: [UInt8], last: Bool)
    /// Any other packet type (§5.1): the members after the type, undecoded.
    case other(type: CXRPacketType, members: [CapsValue])

    /// Largest TRANSFER chunk payload (§4.3, §5.1).
    public static let maxTransferChunk = 480

    /// The args object of a request/notify/response: `[S subCommand, data…]` (§5.3).
    public static func args(_ subCommand: String, _ data: CapsValue...) -> Caps {
        Caps([.string(subCommand)] + data)
    }

    /// The packet type id.
    public var type: CXRPacketType {
        switch self {
        case .request: return .request
        case .response: return .response
        case .notify: return .notify
        case .authRequest: return .authRequest
        case .authResponse: return .authResponse
        case .transferStart: return .transferStart
        case let .transfer(_, last): return last ? .transferLast : .transfer
        case let .other(type, _): return type
        }
    }

    /// The request id of a REQUEST or RESPONSE.
    public var requestID: UInt32? {
        switch self {
        case let .request(id, _, _), let .response(id, _): return id
        default: return nil
        }
    }

    /// The channel of a REQUEST, NOTIFY or TRANSFER_START (`Dev`, `Sys`, `Custom_View`, … §6).
    public var channel: String? {
        switch self {
        case let .request(_, channel, _), let .notify(channel, _), let .transferStart(_, channel, _): return channel
        default: return nil
        }
    }

    /// The args object of a REQUEST, RESPONSE, NOTIFY or TRANSFER_START.
    public var args: Caps? {
        switch self {
        case let .request(_, _, args), let .response(_, args), let .notify(_, args), let .transferStart(_, _, args): return args
        default: return nil
        }
    }

    /// The sub-command: the first member of `args` when it is a string (§5.3).
    public var subCommand: String? {
        args?.members.first?.stringValue
    }

    /// The packet as a Caps object (the builder side).
    public var caps: Caps {
        switch self {
        case let .request(id, channel, args):
            return [.uint32(CXRPacketType.request.rawValue), .uint32(id), .string(channel), .object(args)]
        case let .response(id, args):
            return [.uint32(CXRPacketType.response.rawValue), .uint32(id), .object(args)]
        case let .notify(channel, args):
            return [.uint32(CXRPacketType.notify.rawValue), .string(channel), .object(args)]
        case let .authRequest(a):
            return [.uint32(CXRPacketType.authRequest.rawValue), .uint32(a.major), .uint32(a.minor), .string(a.serviceRecord),
                    .uint64(a.clientTime), .uint32(a.extraType), .string(a.customInfo)]
        case let .authResponse(a):
            return [.uint32(CXRPacketType.authResponse.rawValue), .uint32(a.major), .uint32(a.minor), .int32(a.retCode),
                    .string(a.clientMac)]
        case let .transferStart(total, channel, args):
            return [.uint32(CXRPacketType.transferStart.rawValue), .uint32(total), .string(channel), .object(args)]
        case let .transfer(chunk, last):
            return [.uint32(last ? CXRPacketType.transferLast.rawValue : CXRPacketType.transfer.rawValue), .binary(chunk)]
        case let .other(type, members):
            return Caps([.uint32(type.rawValue)] + members)
        }
    }

    /// The packet's bytes: one Caps v5 object (§3.6 is a worked example).
    public func encoded() throws(CapsError) -> [UInt8] {
        try caps.encoded()
    }

    /// Decodes the bytes of one whole packet (see ``Caps/init(decoding:sizeLimit:)-([UInt8],_)``
    /// and ``init(caps:)``).
    public init(decoding bytes: [UInt8]) throws(CapsError) {
        try self.init(caps: try Caps(decoding: bytes))
    }

    /// Reads a decoded Caps object as a packet. Known types must have exactly the members of
    /// §5.1 with the listed types, otherwise ``CapsError/invalidPacket(field:reason:)`` names
    /// the member; unknown types become ``other(type:members:)``.
    public init(caps: Caps) throws(CapsError) {
        let m = caps.members
        guard let first = m.first else { throw .invalidPacket(field: "member 0 (packet type)", reason: "the object is empty") }
        guard case let .uint32(raw) = first else {
            throw .invalidPacket(field: "member 0 (packet type)", reason: "expected u, found \(first.type.code)")
        }
        let type = CXRPacketType(rawValue: raw)
        func layout(_ fields: [(CapsType, String)]) throws(CapsError) {
            guard m.count == fields.count + 1 else {
                let codes = fields.map(\.0.code).joined()
                throw .invalidPacket(field: "\(type.name) layout",
                                     reason: "expected \(fields.count + 1) members (u\(codes)), found \(m.count)")
            }
            for (k, f) in fields.enumerated() where m[k + 1].type != f.0 {
                throw .invalidPacket(field: "member \(k + 1) (\(f.1))", reason: "expected \(f.0.code), found \(m[k + 1].type.code)")
            }
        }
        switch type {
        case .request:
            try layout([(.uint32, "request id"), (.string, "channel"), (.object, "args")])
            self = .request(requestID: m[1].uint32Value!, channel: m[2].stringValue!, args: m[3].objectValue!)
        case .response:
            try layout([(.uint32, "request id"), (.object, "args")])
            self = .response(requestID: m[1].uint32Value!, args: m[2].objectValue!)
        case .notify:
            try layout([(.string, "channel"), (.object, "args")])
            self = .notify(channel: m[1].stringValue!, args: m[2].objectValue!)
        case .authRequest:
            try layout([(.uint32, "major"), (.uint32, "minor"), (.string, "service record"), (.uint64, "client time"),
                        (.uint32, "extra type"), (.string, "custom info")])
            self = .authRequest(CXRAuthRequest(major: m[1].uint32Value!, minor: m[2].uint32Value!, serviceRecord: m[3].stringValue!,
                                               clientTime: m[4].uint64Value!, extraType: m[5].uint32Value!, customInfo: m[6].stringValue!))
        case .authResponse:
            try layout([(.uint32, "major"), (.uint32, "minor"), (.int32, "ret code"), (.string, "client mac")])
            self = .authResponse(CXRAuthResponse(major: m[1].uint32Value!, minor: m[2].uint32Value!, retCode: m[3].int32Value!,
                                                 clientMac: m[4].stringValue!))
        case .transferStart:
            try layout([(.uint32, "total size"), (.string, "channel"), (.object, "args")])
            self = .transferStart(totalSize: m[1].uint32Value!, channel: m[2].stringValue!, args: m[3].objectValue!)
        case .transfer, .transferLast:
            try layout([(.binary, "chunk")])
            self = .transfer(chunk: m[1].binaryValue!, last: type == .transferLast)
        default:
            self = .other(type: type, members: Array(m.dropFirst()))
        }
    }

    /// The packets that send `data` as a stream (§5.3): TRANSFER_START with
    /// `args = [S subCommand, S json]`, then TRANSFER chunks of at most 480 bytes, the final one
    /// as TRANSFER_LAST. Throws when `data` is larger than a uint32.
    public static func transferPackets(channel: String, subCommand: String, json: JSONValue, data: [UInt8]) throws(CapsError) -> [CXRPacket] {
        guard let total = UInt32(exactly: data.count) else { throw .unencodable(reason: "transfer of \(data.count) bytes exceeds a uint32 size") }
        var out: [CXRPacket] = [.transferStart(totalSize: total, channel: channel, args: args(subCommand, .string(json.payloadText)))]
        var start = 0
        repeat {
            let end = min(start + maxTransferChunk, data.count)
            out.append(.transfer(chunk: Array(data[start..<end]), last: end == data.count))
            start = end
        } while start < data.count
        return out
    }
}
