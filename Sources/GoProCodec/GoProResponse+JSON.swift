import BinaryCoding
import SwiftProtobuf

/// The JSON form of received messages (docs/gopro.md): TLV responses carry `"id"` and
/// `"status"` (numbers); query responses and pushes add `"entries"` (wire order, hex values) and
/// one member per element named from the status/setting tables; protobuf messages carry
/// `"feature_id"`, `"action_id"`, `"message"` and `"fields"`.
extension GoProResponse {
    public var json: JSONValue {
        switch self {
        case let .command(r): return .object(Self.commandJSON(r))
        case let .setting(r):
            var o: JSONObject = ["id": .int(Int64(r.id)), "status": .int(Int64(r.status))]
            o["name"] = .string(r.id == GoProKeepAlive.settingID && r.data.isEmpty ? "keep_alive"
                : GoProSetting.setting(id: r.id)?.name ?? "setting_\(r.id)")
            o["status_name"] = .string(GoProTLVStatus.name(r.status))
            if !r.data.isEmpty { o["data"] = .string(Hex.encode(r.data)) }
            return .object(o)
        case let .query(q): return .object(q.json)
        case let .protobuf(p):
            var o: JSONObject = [
                "feature_id": .int(Int64(p.feature)), "action_id": .int(Int64(p.action)),
                "message": p.messageName.map { .string($0) } ?? .null,
            ]
            if let m = p.message, let text = try? m.jsonString(options: Self.jsonOptions),
               let fields = try? JSONValue(parsing: text) {
                o["fields"] = fields
            } else {
                o["fields"] = .object([:])
                o["payload"] = .string(Hex.encode(p.payload))
            }
            return .object(o)
        case let .protobufError(feature, status):
            return .object([
                "feature_id": .int(Int64(feature)), "action_id": .null, "status": .int(Int64(status)),
                "error": "unsupported protobuf request",
            ])
        }
    }

    private static let jsonOptions: JSONEncodingOptions = {
        var o = JSONEncodingOptions()
        o.preserveProtoFieldNames = true
        return o
    }()

    static func commandJSON(_ r: GoProTLVResponse) -> JSONObject {
        var o = JSONObject()
        o.reserveCapacity(6)  // the usual members and one payload field without growing
        o["id"] = .int(Int64(r.id))
        o["status"] = .int(Int64(r.status))
        let command = GoProCommandID(rawValue: r.id)
        o["name"] = .string(command?.name ?? "command_\(r.id)")
        o["status_name"] = .string(GoProTLVStatus.name(r.status))
        let data = r.data
        guard !data.isEmpty else { return o }
        o["data"] = .string(Hex.encode(data))
        guard r.status == 0, let command else { return o }
        // Command-specific payloads (§5). A payload that does not parse keeps only "data".
        var reader = ByteReader(data)
        switch command {
        case .getOpenGoProVersion:
            if let major = try? lengthPrefixed(&reader), let minor = try? lengthPrefixed(&reader),
               let a = GoProValueDecoding.unsigned(major), let b = GoProValueDecoding.unsigned(minor) {
                o["version"] = .string("\(a).\(b)")
            }
        case .getHardwareInfo:
            if let info = try? hardwareInfo(&reader) { o.merge(info) }
        case .getDateTime, .getLocalDateTime:
            if let block = try? lengthPrefixed(&reader), block.count >= 7 {
                let b = Array(block)
                let year = Int(b[0]) << 8 | Int(b[1])
                func two(_ v: UInt8) -> String { v < 10 ? "0\(v)" : "\(v)" }
                let y = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
                o["date_time"] = .string("\(y)-\(two(b[2]))-\(two(b[3]))T\(two(b[4])):\(two(b[5])):\(two(b[6]))")
                if b.count >= 10 {
                    o["utc_offset_minutes"] = .int(Int64(Int16(bitPattern: UInt16(b[7]) << 8 | UInt16(b[8]))))
                    o["dst"] = .bool(b[9] != 0)
                }
            }
        default: break
        }
        return o
    }

    private static func lengthPrefixed(_ r: inout ByteReader) throws(ByteReaderError) -> ArraySlice<UInt8> {
        let n = try r.readUInt8()
        return try r.readBytes(count: Int(n))
    }

    /// Get Hardware Info (§5, 0x3C): length-prefixed model number, model name, a deprecated
    /// field, firmware, serial, AP SSID, AP MAC; reserved bytes follow.
    private static func hardwareInfo(_ r: inout ByteReader) throws(ByteReaderError) -> JSONObject {
        let number = try lengthPrefixed(&r)
        let name = try lengthPrefixed(&r)
        _ = try lengthPrefixed(&r)
        let firmware = try lengthPrefixed(&r)
        let serial = try lengthPrefixed(&r)
        let ssid = try lengthPrefixed(&r)
        let mac = try lengthPrefixed(&r)
        var o = JSONObject()
        o["model_number"] = GoProValueDecoding.unsigned(number).map { GoProValue.integer($0).json } ?? .string(Hex.encode(number))
        o["model_name"] = .string(String(decoding: name, as: UTF8.self))
        o["firmware_version"] = .string(String(decoding: firmware, as: UTF8.self))
        o["serial_number"] = .string(String(decoding: serial, as: UTF8.self))
        o["ap_ssid"] = .string(String(decoding: ssid, as: UTF8.self))
        o["ap_mac_addr"] = .string(String(decoding: mac, as: UTF8.self))
        return o
    }
}

extension GoProValue {
    /// The JSON form: booleans, numbers, option names (the number when unnamed), strings, hex.
    public var json: JSONValue {
        switch self {
        case let .bool(b): return .bool(b)
        case let .integer(v): return v <= UInt64(Int64.max) ? .int(Int64(v)) : .uint(v)
        case let .option(v, name): return name.map { .string($0) } ?? .int(v)
        case let .string(s): return .string(s)
        case let .bytes(b): return .string(Hex.encode(b))
        }
    }
}

extension GoProQueryResponse {
    /// The element values keyed by status/setting name (§11, appendix), in first-seen order,
    /// without building a `JSONObject` (linear; what the bridge merges into device state).
    /// Capability lists (0x32, 0x62, 0xA2) give an array per setting; a repeated id in other
    /// queries keeps the last value. Ids the tables lack are kept as `status_<id>` /
    /// `setting_<id>` with the value in hex.
    public var namedEntries: [(name: String, value: JSONValue)] {
        guard let q = query else { return [] }
        var out = [(name: String, value: JSONValue)]()
        out.reserveCapacity(entries.count)
        // The key is a function of the element id, so the id indexes the first occurrence.
        var index = [Int](repeating: -1, count: 256)
        for entry in entries {
            let key: String
            if q.carriesStatuses {
                key = GoProStatus.status(id: entry.id)?.name ?? "status_\(entry.id)"
            } else {
                key = GoProSetting.setting(id: entry.id)?.name ?? "setting_\(entry.id)"
            }
            let value = decodedValue(of: entry)?.json ?? .string(Hex.encode(self.value(of: entry)))
            let i = index[Int(entry.id)]
            if i >= 0 {
                if q.carriesCapabilities, case var .array(list) = out[i].value {
                    list.append(value)
                    out[i].value = .array(list)
                } else {
                    out[i].value = value
                }
            } else {
                index[Int(entry.id)] = out.count
                out.append((key, q.carriesCapabilities ? .array([value]) : value))
            }
        }
        return out
    }

    /// `namedEntries` as a JSON object.
    public var namedValues: JSONObject { JSONObject(namedEntries.map { (key: $0.name, value: $0.value) }) }

    /// The JSON form: `id`, `status`, `name`, `entries` and the named values.
    public var json: JSONObject {
        var members: [(key: String, value: JSONValue)] = [
            ("id", .int(Int64(queryID))), ("status", .int(Int64(status))),
            ("name", .string(query?.name ?? "query_\(queryID)")),
            ("entries", .array(entries.map { e in
                .object(["id": .int(Int64(e.id)), "value": .string(Hex.encode(value(of: e)))])
            })),
        ]
        for (k, v) in namedEntries where k != "id" && k != "status" && k != "name" && k != "entries" {
            members.append((k, v))
        }
        return JSONObject(members)
    }
}
