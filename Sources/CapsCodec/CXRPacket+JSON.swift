import BinaryCoding

extension CXRPacket {
    /// The data of the packet as plain JSON (§5.3, §6): for REQUEST/RESPONSE/NOTIFY/
    /// TRANSFER_START the `args` members after the sub-command (none → `null`, one → that
    /// value, several → an array; a string holding a JSON object or array becomes that JSON, see
    /// ``CapsValue/plainJSON``); for AUTH_REQ/AUTH_RESP an object of the fields; for TRANSFER a
    /// base64 string of the chunk; for other types the members after the type.
    public var payload: JSONValue {
        func plain(_ values: ArraySlice<CapsValue>) -> JSONValue {
            switch values.count {
            case 0: return .null
            case 1: return values.first!.plainJSON
            default: return .array(values.map(\.plainJSON))
            }
        }
        switch self {
        case let .authRequest(a):
            return ["major": .int(Int64(a.major)), "minor": .int(Int64(a.minor)), "service_record": .string(a.serviceRecord),
                    "client_time": a.clientTime <= UInt64(Int64.max) ? .int(Int64(a.clientTime)) : .uint(a.clientTime),
                    "extra_type": .int(Int64(a.extraType)), "custom_info": .string(a.customInfo)]
        case let .authResponse(a):
            return ["major": .int(Int64(a.major)), "minor": .int(Int64(a.minor)), "ret_code": .int(Int64(a.retCode)),
                    "client_mac": .string(a.clientMac)]
        case let .transfer(chunk, _):
            return .string(Base64.encode(chunk))
        case let .other(_, members):
            return plain(members[...])
        default:
            guard let args else { return .null }
            let m = args.members
            return m.first?.stringValue != nil ? plain(m.dropFirst()) : plain(m[...])
        }
    }

    /// The packet as JSON for MQTT and the CLI: always `type` (spec §5.1 name), `request_id`,
    /// `channel`, `sub_command` (each `null` when the packet has none) and `payload`; plus
    /// `args` (the args object in the canonical typed form, lossless) where the packet has
    /// one, `total_size` for TRANSFER_START, and `packet_type` (the numeric id).
    public var json: JSONValue {
        var o = JSONObject()
        o["type"] = .string(type.name)
        o["packet_type"] = .int(Int64(type.rawValue))
        o["request_id"] = requestID.map { .int(Int64($0)) } ?? .null
        o["channel"] = channel.map { .string($0) } ?? .null
        o["sub_command"] = subCommand.map { .string($0) } ?? .null
        o["payload"] = payload
        if let args { o["args"] = args.typedJSON }
        if case let .transferStart(total, _, _) = self { o["total_size"] = .int(Int64(total)) }
        if case let .other(_, members) = self { o["members"] = Caps(members).typedJSON }
        return .object(o)
    }
}
