import BinaryCoding
import SwiftProtobuf

/// The JSON request vocabulary (docs/gopro.md): `{"command": …}`, `{"setting": …, "value": …}`
/// or `{"query": …}`, with the spec's operation names in snake_case (§5–§7).
extension GoProRequest {
    /// Builds the request a JSON object describes. Unknown operations and bad or missing fields
    /// throw `.unknownOperation` / `.invalidField` naming the field.
    public init(json: JSONValue) throws(GoProError) {
        guard let object = json.objectValue else {
            throw .invalidField(field: "request", reason: "expected a JSON object, got \(json.typeName)")
        }
        let fields = JSONFields(object)
        switch (object["command"] != nil, object["setting"] != nil, object["query"] != nil) {
        case (true, false, false): self = try Self.command(json: fields)
        case (false, true, false): self = try Self.setting(json: fields)
        case (false, false, true): self = try Self.query(json: fields)
        default:
            let kinds = ["command", "setting", "query"].filter { object[$0] != nil }
            throw .invalidField(field: "request", reason: kinds.isEmpty
                ? "needs one of \"command\", \"setting\" or \"query\""
                : "has both \(kinds.map { "\"\($0)\"" }.joined(separator: " and "))")
        }
    }

    private static func command(json f: JSONFields) throws(GoProError) -> GoProRequest {
        let name = try f.string("command")
        if name == "keep_alive" { return .keepAlive }
        if let id = GoProCommandID(name: name) {
            switch id {
            case .setShutter: return .command(id, parameters: [[try f.flag("value")]])
            case .locateCamera: return .command(id, parameters: [[try f.flag("value")]])
            case .setAPControl:
                let v = try f.choice("value", ["off": 0, "on": 1, "bounce": 2], allowBool: true)
                return .command(id, parameters: [[v]])
            case .loadLegacyMode: return .command(id, parameters: [[try f.uint8("mode")]])
            case .setSubmode: return .command(id, parameters: [[try f.uint8("mode")], [try f.uint8("submode")]])
            case .resetVideoProtune, .resetMultishotProtune, .resetPhotoProtune: return .command(id, parameters: [[1]])
            case .pressButton:
                let button = try f.choice("button", ["shutter": 0, "mode": 1])
                let press = try f.choice("press_type", ["short": 0, "long": 1])
                return .command(id, parameters: [[button], [press]])
            case .setClientDeviceType:
                let type = try f.choice("device_type", ["ios": 1, "android": 2])
                return .command(id, parameters: [[0], [type], [0], [0], [0], [0]])
            case .loadPresetGroup:
                let group: UInt16
                if let s = f.object["group"]?.stringValue {
                    switch s {
                    case "video": group = 1000
                    case "photo": group = 1001
                    case "timelapse", "time_lapse": group = 1002
                    default: throw .invalidField(field: "group", reason: "expected video, photo, timelapse or a number, got \"\(s)\"")
                    }
                } else {
                    group = try f.integer("group", UInt16.self)
                }
                return .command(id, parameters: [[UInt8(group >> 8), UInt8(group & 0xFF)]])
            case .loadPreset:
                let preset = try f.integer("preset", UInt32.self)
                return .command(id, parameters: [bigEndian(preset)])
            case .setDateTime:
                return .command(id, parameters: [try f.dateTime("date_time")])
            case .setLocalDateTime:
                var p = try f.dateTime("date_time")
                let offset = f.object["utc_offset_minutes"] == nil ? 0 : try f.integer("utc_offset_minutes", Int16.self)
                p += bigEndian(UInt16(bitPattern: offset))
                p.append(f.object["dst"] == nil ? 0 : try f.flag("dst"))
                return .command(id, parameters: [p])
            case .powerDown, .sleep, .getDateTime, .getLocalDateTime, .reboot, .hilightMoment, .getHardwareInfo,
                 .resetProtune, .deleteAllFiles, .deleteLastFile, .setAnalytics, .getOpenGoProVersion:
                return .command(id)
            }
        }
        switch name {
        case "set_camera_control":
            var m = OpenGopro_RequestSetCameraControlStatus()
            let v = try f.choice("status", ["idle": 0, "camera": 1, "external": 2, "cof_setup": 3])
            m.cameraControlStatus = OpenGopro_EnumCameraControlStatus(rawValue: Int(v)) ?? .cameraIdle
            return try .protobuf(feature: 0xF1, action: 0x69, message: m)
        case "set_turbo_active":
            var m = OpenGopro_RequestSetTurboActive()
            m.active = try f.flag("active") == 1
            return try .protobuf(feature: 0xF1, action: 0x6B, message: m)
        case "set_camera_name":
            var m = OpenGopro_RequestSetCameraName()
            m.cameraName = try f.nonEmptyString("name")
            return try .protobuf(feature: 0xF1, action: 0x62, message: m)
        case "release_network":
            return GoProRequest(characteristic: .command, message: [0xF1, 0x78], expectedResponse: .protobuf(feature: 0xF1, action: 0xF8))
        case "set_pairing_complete":
            var m = OpenGopro_RequestPairingFinish()
            m.phoneName = try f.nonEmptyString("phone_name")
            let result = f.object["result"] == nil ? 0 : try f.choice("result", ["success": 0, "failed": 1])
            m.result = result == 0 ? .success : .failed
            return try .protobuf(feature: 0x03, action: 0x01, message: m)
        case "scan_wifi_networks":
            return try .protobuf(feature: 0x02, action: 0x02, message: OpenGopro_RequestStartScan())
        case "get_ap_entries":
            var m = OpenGopro_RequestGetApEntries()
            m.scanID = try f.integer("scan_id", Int32.self)
            m.startIndex = f.object["start_index"] == nil ? 0 : try f.integer("start_index", Int32.self)
            m.maxEntries = f.object["max_entries"] == nil ? 100 : try f.integer("max_entries", Int32.self)
            return try .protobuf(feature: 0x02, action: 0x03, message: m)
        case "request_wifi_connect":
            var m = OpenGopro_RequestConnect()
            m.ssid = try f.nonEmptyString("ssid")
            return try .protobuf(feature: 0x02, action: 0x04, message: m)
        case "request_wifi_connect_new":
            var m = OpenGopro_RequestConnectNew()
            m.ssid = try f.nonEmptyString("ssid")
            m.password = try f.string("password")
            m.bypassEulaCheck = true
            return try .protobuf(feature: 0x02, action: 0x05, message: m)
        default:
            if GoProQueryID(name: name) != nil || protobufQueries.contains(name) {
                throw .unknownOperation(field: "command", value: "\(name)\" (it is a query: use {\"query\":\"\(name)\"}")
            }
            throw .unknownOperation(field: "command", value: name)
        }
    }

    private static let protobufQueries: Set<String> = [
        "get_last_captured_media", "get_preset_status", "get_livestream_status", "get_cohn_status", "get_cohn_cert",
    ]

    private static func setting(json f: JSONFields) throws(GoProError) -> GoProRequest {
        let setting: GoProSetting?
        let id: UInt8
        switch f.object["setting"] {
        case let .string(name)?:
            guard let s = GoProSetting.setting(named: name) else { throw .unknownOperation(field: "setting", value: name) }
            setting = s
            id = s.id
        default:
            id = try f.integer("setting", UInt8.self)
            setting = GoProSetting.setting(id: id)
        }
        let value: Int
        switch f.object["value"] {
        case let .string(name)?:
            guard let s = setting, let v = s.optionValue(named: name) else {
                throw .invalidField(field: "value", reason: "\"\(name)\" is not an option of setting \(setting?.name ?? String(id))")
            }
            value = v
        case let .bool(b)?:
            // A boolean means the setting's own "On"/"Off" option (LED On is 2, HindSight Off is
            // 4), never 1/0; a setting without that option refuses it.
            let name = b ? "On" : "Off"
            guard let s = setting, let v = s.optionValue(named: name) else {
                throw .invalidField(field: "value", reason: "setting \(setting?.name ?? String(id)) has no \"\(name)\" option: give one of its options by name or number")
            }
            value = v
        case nil: throw .invalidField(field: "value", reason: "missing")
        default: value = Int(try f.integer("value", UInt32.self))
        }
        // §8: most settings are 1 byte; 30, 32 and 168 are declared wider. Values above 255 are
        // written as u32 big-endian for those three only.
        if value <= 0xFF { return .setting(id: id, value: [UInt8(value)]) }
        guard [30, 32, 168].contains(id) else {
            throw .invalidField(field: "value", reason: "\(value) does not fit the 1-byte value of setting \(setting?.name ?? String(id))")
        }
        return .setting(id: id, value: bigEndian(UInt32(value)))
    }

    private static func query(json f: JSONFields) throws(GoProError) -> GoProRequest {
        let name = try f.string("query")
        if let q = GoProQueryID(name: name) {
            guard !q.isPush else { throw .unknownOperation(field: "query", value: "\(name)\" (a push is only received") }
            var ids = [UInt8]()
            if let list = f.object["ids"] {
                guard let array = list.arrayValue else {
                    throw .invalidField(field: "ids", reason: "expected an array, got \(list.typeName)")
                }
                for (i, item) in array.enumerated() {
                    if let s = item.stringValue {
                        let id = q.carriesStatuses ? GoProStatus.status(named: s)?.id : GoProSetting.setting(named: s)?.id
                        guard let id else {
                            throw .invalidField(field: "ids[\(i)]", reason: "unknown \(q.carriesStatuses ? "status" : "setting") \"\(s)\"")
                        }
                        ids.append(id)
                    } else if let n = item.int64Value, let id = UInt8(exactly: n) {
                        ids.append(id)
                    } else {
                        throw .invalidField(field: "ids[\(i)]", reason: "expected a name or an id 0–255, got \(item.jsonText)")
                    }
                }
            }
            return .query(q, ids: ids)
        }
        switch name {
        case "get_last_captured_media":
            return try .protobuf(feature: 0xF5, action: 0x6D, message: OpenGopro_RequestGetLastCapturedMedia())
        case "get_preset_status":
            var m = OpenGopro_RequestGetPresetStatus()
            let kinds: [String: UInt8] = ["preset": 1, "preset_group": 2]
            m.registerPresetStatus = try f.choices("register", kinds).compactMap { OpenGopro_EnumRegisterPresetStatus(rawValue: Int($0)) }
            m.unregisterPresetStatus = try f.choices("unregister", kinds).compactMap { OpenGopro_EnumRegisterPresetStatus(rawValue: Int($0)) }
            m.useConstantSettingIds = true
            m.includeHiddenPresets = true
            return try .protobuf(feature: 0xF5, action: 0x72, message: m)
        case "get_livestream_status":
            var m = OpenGopro_RequestGetLiveStreamStatus()
            let kinds: [String: UInt8] = ["status": 1, "error": 2, "mode": 3, "bitrate": 4]
            m.registerLiveStreamStatus = try f.choices("register", kinds).compactMap { OpenGopro_EnumRegisterLiveStreamStatus(rawValue: Int($0)) }
            m.unregisterLiveStreamStatus = try f.choices("unregister", kinds).compactMap { OpenGopro_EnumRegisterLiveStreamStatus(rawValue: Int($0)) }
            return try .protobuf(feature: 0xF5, action: 0x74, message: m)
        case "get_cohn_status":
            var m = OpenGopro_RequestGetCOHNStatus()
            if f.object["register"] != nil { m.registerCohnStatus = try f.flag("register") == 1 }
            return try .protobuf(feature: 0xF5, action: 0x6F, message: m)
        case "get_cohn_cert":
            return try .protobuf(feature: 0xF5, action: 0x6E, message: OpenGopro_RequestCOHNCert())
        default:
            throw .unknownOperation(field: "query", value: name)
        }
    }
}

private func bigEndian<T: FixedWidthInteger>(_ v: T) -> [UInt8] {
    var w = ByteWriter(capacity: MemoryLayout<T>.size)
    w.writeInteger(v, endianness: .big)
    return w.bytes
}

/// Typed field access on a request object; every error names the field.
private struct JSONFields {
    let object: JSONObject
    init(_ object: JSONObject) { self.object = object }

    func value(_ key: String) throws(GoProError) -> JSONValue {
        guard let v = object[key] else { throw .invalidField(field: key, reason: "missing") }
        return v
    }

    func string(_ key: String) throws(GoProError) -> String {
        let v = try value(key)
        guard let s = v.stringValue else { throw .invalidField(field: key, reason: "expected a string, got \(v.typeName)") }
        return s
    }

    func nonEmptyString(_ key: String) throws(GoProError) -> String {
        let s = try string(key)
        guard !s.isEmpty else { throw .invalidField(field: key, reason: "must not be empty") }
        return s
    }

    /// A boolean (or 0/1) as one byte.
    func flag(_ key: String) throws(GoProError) -> UInt8 {
        let v = try value(key)
        if let b = v.boolValue { return b ? 1 : 0 }
        if let n = v.int64Value, n == 0 || n == 1 { return UInt8(n) }
        throw .invalidField(field: key, reason: "expected true or false, got \(v.jsonText)")
    }

    func integer<T: FixedWidthInteger>(_ key: String, _: T.Type) throws(GoProError) -> T {
        let v = try value(key)
        if let n = v.int64Value, let t = T(exactly: n) { return t }
        if let n = v.uint64Value, let t = T(exactly: n) { return t }
        throw .invalidField(field: key, reason: "expected an integer \(T.min)–\(T.max), got \(v.jsonText)")
    }

    func uint8(_ key: String) throws(GoProError) -> UInt8 { try integer(key, UInt8.self) }

    /// A name from `names` or one of their numbers.
    func choice(_ key: String, _ names: [String: UInt8], allowBool: Bool = false) throws(GoProError) -> UInt8 {
        let v = try value(key)
        return try choice(key, v, names, allowBool: allowBool)
    }

    func choice(_ key: String, _ v: JSONValue, _ names: [String: UInt8], allowBool: Bool = false) throws(GoProError) -> UInt8 {
        if let s = v.stringValue, let n = names[s] { return n }
        if allowBool, let b = v.boolValue { return b ? 1 : 0 }
        if let n = v.int64Value, let u = UInt8(exactly: n), names.values.contains(u) { return u }
        let allowed = names.sorted { $0.value < $1.value }.map { "\($0.key) (\($0.value))" }.joined(separator: ", ")
        throw .invalidField(field: key, reason: "expected one of \(allowed), got \(v.jsonText)")
    }

    /// An optional array of names from `names` (or their numbers).
    func choices(_ key: String, _ names: [String: UInt8]) throws(GoProError) -> [UInt8] {
        guard let v = object[key] else { return [] }
        guard let array = v.arrayValue else { throw .invalidField(field: key, reason: "expected an array, got \(v.typeName)") }
        var out = [UInt8]()
        for (i, item) in array.enumerated() { out.append(try choice("\(key)[\(i)]", item, names)) }
        return out
    }

    /// `YYYY-MM-DDTHH:MM:SS` as the 7 bytes of §5 (year u16 BE, month, day, hour, minute, second).
    func dateTime(_ key: String) throws(GoProError) -> [UInt8] {
        let text = try string(key)
        let u = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            var n = 0
            for i in range {
                guard u[i] >= 48, u[i] <= 57 else { return nil }
                n = n * 10 + Int(u[i] - 48)
            }
            return n
        }
        guard u.count == 19, u[4] == UInt8(ascii: "-"), u[7] == UInt8(ascii: "-"),
              u[10] == UInt8(ascii: "T") || u[10] == UInt8(ascii: " "), u[13] == UInt8(ascii: ":"), u[16] == UInt8(ascii: ":"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { throw .invalidField(field: key, reason: "expected YYYY-MM-DDTHH:MM:SS, got \"\(text)\"") }
        guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60 else {
            throw .invalidField(field: key, reason: "date or time out of range in \"\(text)\"")
        }
        return [UInt8(year >> 8), UInt8(year & 0xFF), UInt8(month), UInt8(day), UInt8(hour), UInt8(minute), UInt8(second)]
    }
}
