import SwiftProtobuf

/// A decoded value of a query element (spec gopro.md §4.2, §8, §11).
public enum GoProValue: Sendable, Equatable {
    case bool(Bool)
    /// Unsigned big-endian integer of the received length (1–8 bytes).
    case integer(UInt64)
    /// An enumeration or setting option: the number and, when the spec lists it, its name.
    case option(Int64, name: String?)
    case string(String)
    /// Bytes the codec cannot interpret (e.g. an undocumented id, an empty or over-long value).
    case bytes([UInt8])
}

/// One `[id][len][value]` element of a query response or push, in wire order (§4.2).
public struct GoProQueryEntry: Sendable, Equatable {
    /// The element id (a status id or a setting id, depending on the query).
    public let id: UInt8
    /// Offset of the value in the message.
    public let offset: Int
    /// The value length (the `len` byte).
    public let length: Int
}

/// A TLV response `[id][status][data…]` on GP-0073 (command) or GP-0075 (setting) (§4.1).
public struct GoProTLVResponse: Sendable, Equatable {
    /// The reassembled message.
    public let message: [UInt8]
    /// The echoed command id (GP-0073) or setting id (GP-0075).
    public var id: UInt8 { message[0] }
    /// 0 success, 1 error, 2 invalid parameter (§4.1).
    public var status: UInt8 { message[1] }
    /// Bytes after the status (e.g. Get Hardware Info's fields).
    public var data: ArraySlice<UInt8> { message[2...] }
}

/// A query response or push `[query id][status]([id][len][value])*` on GP-0077 (§4.2, §6).
public struct GoProQueryResponse: Sendable, Equatable {
    /// The reassembled message.
    public let message: [UInt8]
    /// The elements in wire order (ids may repeat in capability lists; unknown ids are kept).
    public let entries: [GoProQueryEntry]
    /// The query id (0x12 … 0x82) or push id (0x92, 0x93, 0xA2).
    public var queryID: UInt8 { message[0] }
    public var status: UInt8 { message[1] }
    /// The query, if the id is one of §6.
    public var query: GoProQueryID? { GoProQueryID(rawValue: queryID) }

    /// The raw value bytes of `entry`.
    public func value(of entry: GoProQueryEntry) -> ArraySlice<UInt8> {
        message[entry.offset..<entry.offset + entry.length]
    }

    /// `entry` interpreted with the status table (§11) or setting table (appendix), depending on
    /// the query; `nil` when the query id is unknown.
    public func decodedValue(of entry: GoProQueryEntry) -> GoProValue? {
        guard let q = query else { return nil }
        let bytes = value(of: entry)
        if q.carriesStatuses {
            guard let status = GoProStatus.status(id: entry.id) else { return .bytes(Array(bytes)) }
            return GoProValueDecoding.status(status, bytes)
        }
        return GoProValueDecoding.setting(GoProSetting.setting(id: entry.id), bytes)
    }
}

/// A protobuf response or notification `[feature][action][proto2]` (§4.3, §7).
public struct GoProProtobufResponse: Sendable {
    public let feature: UInt8
    public let action: UInt8
    /// The §7 message name (e.g. `ResponseGeneric`), or `nil` for a (feature, action) pair that
    /// §7 does not list for this characteristic.
    public let messageName: String?
    /// The decoded message, when this codec's schema declares it.
    public let message: (any SwiftProtobuf.Message)?
    /// The serialized protobuf bytes.
    public let payload: ArraySlice<UInt8>
}

/// A message received on a GoPro notify characteristic, decoded per spec gopro.md §4.4.
public enum GoProResponse: Sendable {
    /// TLV command response on GP-0073 (§4.1).
    case command(GoProTLVResponse)
    /// TLV setting response on GP-0075 (§4.1).
    case setting(GoProTLVResponse)
    /// TLV query response or push on GP-0077 (§4.2).
    case query(GoProQueryResponse)
    /// Protobuf response or notification (§4.3).
    case protobuf(GoProProtobufResponse)
    /// The camera's answer to an unsupported protobuf request: `[feature][error status]` (§4.3).
    case protobufError(feature: UInt8, status: UInt8)

    /// What this message answers, for matching it to a pending request (§4.5).
    public var identifier: GoProResponseID {
        switch self {
        case let .command(r): return .command(r.id)
        case let .setting(r): return .setting(r.id)
        case let .query(r): return .query(r.queryID)
        case let .protobuf(p): return .protobuf(feature: p.feature, action: p.action)
        case let .protobufError(feature, _): return .protobufError(feature: feature)
        }
    }

    /// True for asynchronous messages that never answer a request: query pushes 0x92/0x93/0xA2
    /// and protobuf notifications (§4.5).
    public var isAsynchronous: Bool {
        switch self {
        case let .query(q): return q.query?.isPush ?? false
        case let .protobuf(p):
            return GoProProtobufOperation.all.contains {
                $0.feature == p.feature && $0.notificationAction == p.action && $0.notificationAction != $0.responseAction
            }
        default: return false
        }
    }

    /// Decodes a reassembled message received on `characteristic` (§4.4): a (feature, action)
    /// pair that §7 lists as a response or notification *on that characteristic* is protobuf;
    /// on GP-0073/GP-0077 a first byte 0xF1/0xF3/0xF5, and anything on GP-0092, is protobuf too
    /// (a 2-byte unknown pair there is the unsupported-protobuf error form); the rest is TLV.
    public init(decoding message: [UInt8], on characteristic: GoProCharacteristic) throws(GoProError) {
        guard characteristic.isNotify else { throw .unknownCharacteristic(characteristic.shortName) }
        guard message.count >= 1 else { throw .truncated(reason: "empty message, need an id", offset: 0) }
        guard message.count >= 2 else {
            throw .truncated(reason: "need a status or action byte after id 0x\(GoProError.hex(message[0]))", offset: 1)
        }
        let b0 = message[0], b1 = message[1]
        // Only the §7 feature ids can start a protobuf message; skip the table lookup otherwise.
        let knownFeature = b0 == 0x02 || b0 == 0x03 || b0 == 0xF1 || b0 == 0xF3 || b0 == 0xF5
        if knownFeature, let name = GoProProtobufOperation.receivedMessage(feature: b0, action: b1, on: characteristic) {
            self = .protobuf(try Self.decodeProtobuf(message, name: name))
            return
        }
        let protobufFeature: Bool
        switch characteristic {
        case .networkManagementResponse: protobufFeature = true
        case .commandResponse, .queryResponse, .settingsResponse: protobufFeature = b0 == 0xF1 || b0 == 0xF3 || b0 == 0xF5
        default: protobufFeature = false
        }
        if protobufFeature {
            if message.count == 2 {
                self = .protobufError(feature: b0, status: b1)
            } else {
                self = .protobuf(GoProProtobufResponse(feature: b0, action: b1, messageName: nil, message: nil, payload: message[2...]))
            }
            return
        }
        switch characteristic {
        case .commandResponse: self = .command(GoProTLVResponse(message: message))
        case .settingsResponse: self = .setting(GoProTLVResponse(message: message))
        default: self = .query(try Self.decodeQuery(message))
        }
    }

    static func decodeQuery(_ message: [UInt8]) throws(GoProError) -> GoProQueryResponse {
        var entries = [GoProQueryEntry]()
        let count = message.count
        entries.reserveCapacity((count - 2) / 3)
        try message.withUnsafeBufferPointer { (m: UnsafeBufferPointer<UInt8>) throws(GoProError) in
            var i = 2
            while i < count {
                guard i + 1 < count else {
                    throw .truncated(reason: "element 0x\(GoProError.hex(m[i])) has no length byte", offset: i + 1)
                }
                let length = Int(m[i + 1])
                guard i + 2 + length <= count else {
                    throw .truncated(
                        reason: "element 0x\(GoProError.hex(m[i])) declares \(length) byte(s), \(count - i - 2) left",
                        offset: i + 2)
                }
                entries.append(GoProQueryEntry(id: m[i], offset: i + 2, length: length))
                i += 2 + length
            }
        }
        return GoProQueryResponse(message: message, entries: entries)
    }

    static func decodeProtobuf(_ message: [UInt8], name: String) throws(GoProError) -> GoProProtobufResponse {
        let payload = message[2...]
        var decoded: (any SwiftProtobuf.Message)? = nil
        if let type = GoProProtobufOperation.messageTypes[name] {
            do {
                decoded = try type.init(serializedBytes: Array(payload), extensions: nil, partial: true, options: BinaryDecodingOptions())
            } catch {
                throw .invalidProtobuf(message: name, reason: "\(error) (payload at offset 2)")
            }
        }
        return GoProProtobufResponse(feature: message[0], action: message[1], messageName: name, message: decoded, payload: payload)
    }
}

/// Interprets element values length-driven (§4.2: integers are unsigned BE of the received length).
enum GoProValueDecoding {
    static func unsigned(_ bytes: ArraySlice<UInt8>) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 8 else { return nil }
        var v: UInt64 = 0
        for b in bytes { v = v << 8 | UInt64(b) }
        return v
    }

    static func string(_ bytes: ArraySlice<UInt8>) -> GoProValue {
        if let s = String(validating: bytes, as: UTF8.self) { return .string(s) }
        return .bytes(Array(bytes))
    }

    static func status(_ status: GoProStatus, _ bytes: ArraySlice<UInt8>) -> GoProValue {
        switch status.type {
        case .string: return string(bytes)
        case .bool:
            guard !bytes.isEmpty else { return .bytes([]) }
            return .bool(bytes.contains { $0 != 0 })
        case .integer:
            guard let v = unsigned(bytes) else { return .bytes(Array(bytes)) }
            return .integer(v)
        case .enumeration:
            guard let v = unsigned(bytes) else { return .bytes(Array(bytes)) }
            // -1 has no documented byte form; all-ones of the received width is the likely one (§11, status 33).
            if status.options.contains(where: { $0.value == -1 }), v == (bytes.count == 8 ? UInt64.max : (UInt64(1) << (8 * bytes.count)) - 1) {
                return .option(-1, name: status.optionName(-1))
            }
            guard let n = Int64(exactly: v) else { return .integer(v) }
            return .option(n, name: status.optionName(Int(n)))
        }
    }

    static func setting(_ setting: GoProSetting?, _ bytes: ArraySlice<UInt8>) -> GoProValue {
        guard let setting else { return .bytes(Array(bytes)) }
        guard let v = unsigned(bytes) else { return .bytes(Array(bytes)) }
        guard let n = Int64(exactly: v) else { return .integer(v) }
        if setting.options.isEmpty { return .integer(v) }
        return .option(n, name: setting.optionName(Int(n)))
    }
}
