import BinaryCoding

/// A named command of the CXR message vocabulary (spec rokid-caps.md §6), as the bridge
/// receives it in JSON, e.g. `{"command":"set_brightness","value":8}`. Each becomes a REQUEST
/// packet `[u 0x1001, u reqId, S channel, O [S subCommand, data…]]` (§5.3).
public enum CXRCommand: Sendable, Equatable {
    /// `set_brightness` `value` 0–15 → `Dev` / `Dev_GlassBrightness`, `u`.
    case setBrightness(UInt32)
    /// `set_volume` `value` 0–15 → `Dev` / `Dev_GlassSound`, `u`.
    case setVolume(UInt32)
    /// `get_glass_info` → `Dev` / `Dev_GetGlassInfo`.
    case getGlassInfo
    /// `open_custom_view` `layout` (JSON object) → `Custom_View` / `Open_Custom_View`, `S` JSON text
    /// (compact, key order and number forms kept: ``BinaryCoding/JSONValue/payloadText``).
    case openCustomView(layout: JSONValue)
    /// `update_custom_view` `update` (JSON array or object) → `Custom_View` / `Update_Custom_View`, `S` JSON text.
    case updateCustomView(update: JSONValue)
    /// `close_custom_view` → `Custom_View` / `Close_Custom_View`.
    case closeCustomView
    /// `send_custom_view_icons` `icons` (JSON array or object) → `Custom_View` / `Send_Custom_View_Icons`, `S` JSON text.
    case sendCustomViewIcons(icons: JSONValue)
    /// `scene_control` `name`, `open` → `Sys` / `Scene_Control`, `S {"name":…,"open":…}` (§5.3 capture).
    case sceneControl(name: String, open: Bool)
    /// `get_scene_status` → `Sys` / `Scene_GetSceneStatusInfo`.
    case getSceneStatus
    /// `set_teleprompter_config` `config` → `Sys` / `WordTips_SetTvConfig`, `S` JSON text
    /// (`textSize`, `lineSpacing`, `mode`, `contentSite{startPointX,startPointY,width,height}`).
    case setTeleprompterConfig(config: JSONValue)
    /// `tts_result` `text` → `Ai` / `TTS_Result`, `S` text.
    case ttsResult(text: String)
    /// `request` `channel`, `sub_command`, optional `data` (a Caps member array, typed or loose
    /// form) → any REQUEST; the escape hatch for the rest of §6.
    case request(channel: String, subCommand: String, data: [CapsValue])

    /// The REQUEST channel (§6).
    public var channel: String {
        switch self {
        case .setBrightness, .setVolume, .getGlassInfo: return "Dev"
        case .openCustomView, .updateCustomView, .closeCustomView, .sendCustomViewIcons: return "Custom_View"
        case .sceneControl, .getSceneStatus, .setTeleprompterConfig: return "Sys"
        case .ttsResult: return "Ai"
        case let .request(channel, _, _): return channel
        }
    }

    /// The sub-command, member 0 of the args (§6).
    public var subCommand: String {
        switch self {
        case .setBrightness: return "Dev_GlassBrightness"
        case .setVolume: return "Dev_GlassSound"
        case .getGlassInfo: return "Dev_GetGlassInfo"
        case .openCustomView: return "Open_Custom_View"
        case .updateCustomView: return "Update_Custom_View"
        case .closeCustomView: return "Close_Custom_View"
        case .sendCustomViewIcons: return "Send_Custom_View_Icons"
        case .sceneControl: return "Scene_Control"
        case .getSceneStatus: return "Scene_GetSceneStatusInfo"
        case .setTeleprompterConfig: return "WordTips_SetTvConfig"
        case .ttsResult: return "TTS_Result"
        case let .request(_, sub, _): return sub
        }
    }

    /// The args members after the sub-command.
    public var data: [CapsValue] {
        switch self {
        case let .setBrightness(v), let .setVolume(v): return [.uint32(v)]
        case .getGlassInfo, .closeCustomView, .getSceneStatus: return []
        case let .openCustomView(j), let .updateCustomView(j), let .sendCustomViewIcons(j), let .setTeleprompterConfig(j):
            return [.string(j.payloadText)]
        case let .sceneControl(name, open):
            let o: JSONValue = ["name": .string(name), "open": .bool(open)]
            return [.string(o.payloadText)]
        case let .ttsResult(text): return [.string(text)]
        case let .request(_, _, data): return data
        }
    }

    /// The REQUEST packet for this command with the given request id.
    public func packet(requestID: UInt32) -> CXRPacket {
        .request(requestID: requestID, channel: channel, args: Caps([.string(subCommand)] + data))
    }

    /// The bytes of the REQUEST packet (what goes on the link, §4.3).
    public func encoded(requestID: UInt32) throws(CapsError) -> [UInt8] {
        try packet(requestID: requestID).encoded()
    }

    /// The command in its JSON form (inverse of ``init(json:)``).
    public var json: JSONValue {
        var o: JSONObject = ["command": .string(name)]
        switch self {
        case let .setBrightness(v), let .setVolume(v): o["value"] = .int(Int64(v))
        case .getGlassInfo, .closeCustomView, .getSceneStatus: break
        case let .openCustomView(j): o["layout"] = j
        case let .updateCustomView(j): o["update"] = j
        case let .sendCustomViewIcons(j): o["icons"] = j
        case let .sceneControl(name, open): o["name"] = .string(name); o["open"] = .bool(open)
        case let .setTeleprompterConfig(j): o["config"] = j
        case let .ttsResult(text): o["text"] = .string(text)
        case let .request(channel, sub, data):
            o["channel"] = .string(channel)
            o["sub_command"] = .string(sub)
            o["data"] = Caps(data).typedJSON
        }
        return .object(o)
    }

    /// The `command` name.
    public var name: String {
        switch self {
        case .setBrightness: return "set_brightness"
        case .setVolume: return "set_volume"
        case .getGlassInfo: return "get_glass_info"
        case .openCustomView: return "open_custom_view"
        case .updateCustomView: return "update_custom_view"
        case .closeCustomView: return "close_custom_view"
        case .sendCustomViewIcons: return "send_custom_view_icons"
        case .sceneControl: return "scene_control"
        case .getSceneStatus: return "get_scene_status"
        case .setTeleprompterConfig: return "set_teleprompter_config"
        case .ttsResult: return "tts_result"
        case .request: return "request"
        }
    }

    /// Every `command` name ``init(json:)`` understands.
    public static let names = [
        "set_brightness", "set_volume", "get_glass_info", "open_custom_view", "update_custom_view", "close_custom_view",
        "send_custom_view_icons", "scene_control", "get_scene_status", "set_teleprompter_config", "tts_result", "request",
    ]
}

extension CXRCommand {
    /// Parses JSON text and reads it as in ``init(json:)``.
    public init(jsonText: String) throws(CapsError) {
        let value: JSONValue
        do { value = try JSONValue(parsing: jsonText) } catch {
            throw .invalidCommand(field: "$", reason: error.description)
        }
        try self.init(json: value)
    }

    /// Reads a command object. An unknown `command`, a missing or unexpected field, a wrong
    /// JSON type or an out-of-range value throws ``CapsError/invalidCommand(field:reason:)``
    /// naming the field.
    public init(json: JSONValue) throws(CapsError) {
        guard case let .object(o) = json else {
            throw .invalidCommand(field: "$", reason: "expected a JSON object, found \(json.typeName)")
        }
        guard let nameValue = o["command"] else { throw .invalidCommand(field: "command", reason: "missing") }
        guard case let .string(name) = nameValue else {
            throw .invalidCommand(field: "command", reason: "expected a string, found \(nameValue.typeName)")
        }
        func allow(_ fields: Set<String>) throws(CapsError) {
            for key in o.keys where key != "command" && !fields.contains(key) {
                throw .invalidCommand(field: key, reason: "unexpected field for command '\(name)'")
            }
        }
        func field(_ key: String) throws(CapsError) -> JSONValue {
            guard let v = o[key] else { throw .invalidCommand(field: key, reason: "missing") }
            return v
        }
        func level(_ key: String) throws(CapsError) -> UInt32 {
            let v = try field(key)
            guard case .int = v, let n = v.int64Value else {
                if case let .double(d) = v, d.rounded() == d, let n = Int64(exactly: d), (0...15).contains(n) { return UInt32(n) }
                throw .invalidCommand(field: key, reason: "expected an integer 0...15, found \(v.jsonText)")
            }
            guard (0...15).contains(n) else { throw .invalidCommand(field: key, reason: "\(n) is out of range 0...15") }
            return UInt32(n)
        }
        func string(_ key: String) throws(CapsError) -> String {
            let v = try field(key)
            guard case let .string(s) = v else { throw .invalidCommand(field: key, reason: "expected a string, found \(v.typeName)") }
            return s
        }
        /// A JSON document given inline, or as a string holding JSON text.
        func document(_ key: String, objects: Bool, arrays: Bool) throws(CapsError) -> JSONValue {
            var v = try field(key)
            if case let .string(text) = v {
                do { v = try JSONValue(parsing: text) } catch {
                    throw .invalidCommand(field: key, reason: "string is not JSON: \(error.description)")
                }
            }
            switch v {
            case .object where objects, .array where arrays: return v
            default:
                let expected = objects && arrays ? "a JSON object or array" : objects ? "a JSON object" : "a JSON array"
                throw .invalidCommand(field: key, reason: "expected \(expected), found \(v.typeName)")
            }
        }

        switch name {
        case "set_brightness":
            try allow(["value"])
            self = .setBrightness(try level("value"))
        case "set_volume":
            try allow(["value"])
            self = .setVolume(try level("value"))
        case "get_glass_info":
            try allow([])
            self = .getGlassInfo
        case "open_custom_view":
            try allow(["layout"])
            self = .openCustomView(layout: try document("layout", objects: true, arrays: false))
        case "update_custom_view":
            try allow(["update"])
            self = .updateCustomView(update: try document("update", objects: true, arrays: true))
        case "close_custom_view":
            try allow([])
            self = .closeCustomView
        case "send_custom_view_icons":
            try allow(["icons"])
            self = .sendCustomViewIcons(icons: try document("icons", objects: true, arrays: true))
        case "scene_control":
            try allow(["name", "open"])
            let scene = try string("name")
            guard !scene.isEmpty else { throw .invalidCommand(field: "name", reason: "must not be empty") }
            let openValue = try field("open")
            guard case let .bool(open) = openValue else {
                throw .invalidCommand(field: "open", reason: "expected true or false, found \(openValue.typeName)")
            }
            self = .sceneControl(name: scene, open: open)
        case "get_scene_status":
            try allow([])
            self = .getSceneStatus
        case "set_teleprompter_config":
            try allow(["config"])
            let config = try document("config", objects: true, arrays: false)
            try CXRCommand.checkTeleprompterConfig(config)
            self = .setTeleprompterConfig(config: config)
        case "tts_result":
            try allow(["text"])
            self = .ttsResult(text: try string("text"))
        case "request":
            try allow(["channel", "sub_command", "data"])
            let channel = try string("channel")
            let sub = try string("sub_command")
            guard !channel.isEmpty else { throw .invalidCommand(field: "channel", reason: "must not be empty") }
            guard !sub.isEmpty else { throw .invalidCommand(field: "sub_command", reason: "must not be empty") }
            var data = [CapsValue]()
            if let d = o["data"] {
                do { data = try Caps(json: d).members } catch {
                    if case let .invalidJSON(path, reason) = error {
                        throw .invalidCommand(field: "data" + path.dropFirst(), reason: reason)
                    }
                    throw error
                }
            }
            self = .request(channel: channel, subCommand: sub, data: data)
        default:
            throw .invalidCommand(field: "command", reason: "unknown command '\(name)' (known: \(CXRCommand.names.joined(separator: ", ")))")
        }
    }

    /// Type checks of the WordTips_SetTvConfig fields this codec knows (§6); other keys pass.
    static func checkTeleprompterConfig(_ config: JSONValue) throws(CapsError) {
        guard case let .object(o) = config else { return }
        func number(_ v: JSONValue?, _ path: String, positive: Bool = false) throws(CapsError) {
            guard let v else { return }
            guard let d = v.doubleValue else {
                throw .invalidCommand(field: path, reason: "expected a number, found \(v.typeName)")
            }
            if positive && !(d > 0) { throw .invalidCommand(field: path, reason: "\(v.jsonText) must be greater than 0") }
            if !positive && d < 0 { throw .invalidCommand(field: path, reason: "\(v.jsonText) must not be negative") }
        }
        try number(o["textSize"], "config.textSize", positive: true)
        try number(o["lineSpacing"], "config.lineSpacing", positive: true)
        if let mode = o["mode"], mode.stringValue == nil {
            throw .invalidCommand(field: "config.mode", reason: "expected a string, found \(mode.typeName)")
        }
        if let site = o["contentSite"] {
            guard case let .object(s) = site else {
                throw .invalidCommand(field: "config.contentSite", reason: "expected an object, found \(site.typeName)")
            }
            for key in ["startPointX", "startPointY", "width", "height"] {
                try number(s[key], "config.contentSite.\(key)")
            }
        }
    }
}
