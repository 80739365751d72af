import SwiftProtobuf

/// A message to write to the camera (spec gopro.md §4–§7): the characteristic, the message bytes
/// before packetizing, and the identifier of the response that answers it (§4.5).
public struct GoProRequest: Sendable, Equatable {
    /// Where the packets are written (GP-0072, GP-0074, GP-0076 or GP-0091).
    public let characteristic: GoProCharacteristic
    /// The message bytes (no packet headers).
    public let message: [UInt8]
    /// The response that completes this request on `responseCharacteristic` (§4.5).
    public let expectedResponse: GoProResponseID

    public init(characteristic: GoProCharacteristic, message: [UInt8], expectedResponse: GoProResponseID) {
        self.characteristic = characteristic
        self.message = message
        self.expectedResponse = expectedResponse
    }

    /// The notify characteristic the answer arrives on (§1).
    public var responseCharacteristic: GoProCharacteristic { characteristic.responseCharacteristic }

    /// The GATT writes for this request (§3); defaults as open-gopro writes them.
    public func packets(
        startHeader: GoProStartHeader = .extended13, continuation: GoProContinuationStyle = .flat
    ) throws(GoProError) -> GoProPackets {
        try GoProPacketizer.packetize(message, startHeader: startHeader, continuation: continuation)
    }

    // MARK: Builders

    /// A TLV command on GP-0072 (§4.1, §5): `[id]([len][value])*`.
    public static func command(_ id: GoProCommandID, parameters: [[UInt8]] = []) -> GoProRequest {
        var m: [UInt8] = [id.rawValue]
        for p in parameters {
            m.append(UInt8(truncatingIfNeeded: p.count))
            m.append(contentsOf: p)
        }
        return GoProRequest(characteristic: .command, message: m, expectedResponse: .command(id.rawValue))
    }

    /// A setting change on GP-0074 (§8): `[setting id][len][value]`.
    public static func setting(id: UInt8, value: [UInt8]) -> GoProRequest {
        GoProRequest(
            characteristic: .settings, message: [id, UInt8(truncatingIfNeeded: value.count)] + value,
            expectedResponse: .setting(id))
    }

    /// The keep-alive, `5B 01 42` on GP-0074, to send every 3 s (§5, §9).
    public static var keepAlive: GoProRequest { setting(id: GoProKeepAlive.settingID, value: [GoProKeepAlive.value]) }

    /// A TLV query on GP-0076 (§4.2, §6): `[query id][element id]*`, no ids = all.
    public static func query(_ query: GoProQueryID, ids: [UInt8] = []) -> GoProRequest {
        GoProRequest(characteristic: .query, message: [query.rawValue] + ids, expectedResponse: .query(query.rawValue))
    }

    /// A protobuf request (§4.3, §7): `[feature][action][serialized message]`, written to the
    /// characteristic of its feature; the answer is `(feature, action | 0x80)`.
    public static func protobuf(
        feature: UInt8, action: UInt8, message: some SwiftProtobuf.Message
    ) throws(GoProError) -> GoProRequest {
        let body: [UInt8]
        do { body = try message.serializedBytes() } catch {
            throw .invalidProtobuf(message: String(describing: type(of: message)), reason: "\(error)")
        }
        return GoProRequest(
            characteristic: GoProProtobufOperation.writeCharacteristic(feature: feature),
            message: [feature, action] + body, expectedResponse: .protobuf(feature: feature, action: action | 0x80))
    }
}
