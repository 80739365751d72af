/// TLV command ids written to GP-0072 (spec gopro.md §5), with the snake_case operation names of
/// the JSON vocabulary (docs/gopro.md).
public enum GoProCommandID: UInt8, Sendable, CaseIterable {
    case setShutter = 0x01
    case loadLegacyMode = 0x02
    case setSubmode = 0x03
    case powerDown = 0x04
    case sleep = 0x05
    case resetVideoProtune = 0x0A
    case resetMultishotProtune = 0x0B
    case resetPhotoProtune = 0x0C
    case setDateTime = 0x0D
    case getDateTime = 0x0E
    case setLocalDateTime = 0x0F
    case getLocalDateTime = 0x10
    case reboot = 0x11
    case locateCamera = 0x16
    case setAPControl = 0x17
    case hilightMoment = 0x18
    case pressButton = 0x1B
    case setClientDeviceType = 0x1C
    case getHardwareInfo = 0x3C
    case loadPresetGroup = 0x3E
    case resetProtune = 0x3F
    case loadPreset = 0x40
    case deleteAllFiles = 0x41
    case deleteLastFile = 0x42
    case setAnalytics = 0x50
    case getOpenGoProVersion = 0x51

    /// The JSON operation name (`set_shutter`, `get_hardware_info`, …).
    public var name: String {
        switch self {
        case .setShutter: return "set_shutter"
        case .loadLegacyMode: return "load_legacy_mode"
        case .setSubmode: return "set_submode"
        case .powerDown: return "power_down"
        case .sleep: return "sleep"
        case .resetVideoProtune: return "reset_video_protune"
        case .resetMultishotProtune: return "reset_multishot_protune"
        case .resetPhotoProtune: return "reset_photo_protune"
        case .setDateTime: return "set_date_time"
        case .getDateTime: return "get_date_time"
        case .setLocalDateTime: return "set_local_date_time"
        case .getLocalDateTime: return "get_local_date_time"
        case .reboot: return "reboot"
        case .locateCamera: return "locate_camera"
        case .setAPControl: return "set_ap_control"
        case .hilightMoment: return "hilight_moment"
        case .pressButton: return "press_button"
        case .setClientDeviceType: return "set_client_device_type"
        case .getHardwareInfo: return "get_hardware_info"
        case .loadPresetGroup: return "load_preset_group"
        case .resetProtune: return "reset_protune"
        case .loadPreset: return "load_preset"
        case .deleteAllFiles: return "delete_all_files"
        case .deleteLastFile: return "delete_last_file"
        case .setAnalytics: return "set_analytics"
        case .getOpenGoProVersion: return "get_open_gopro_version"
        }
    }

    private static let byName: [String: GoProCommandID] = Dictionary(uniqueKeysWithValues: allCases.map { ($0.name, $0) })
    /// The command with this JSON name.
    public init?(name: String) {
        guard let c = Self.byName[name] else { return nil }
        self = c
    }
}

/// The keep-alive "setting" (spec gopro.md §5, §9): LED setting 91 with the special value 66,
/// written to GP-0074.
public enum GoProKeepAlive {
    public static let settingID: UInt8 = 0x5B
    public static let value: UInt8 = 0x42
}

/// TLV query ids written to GP-0076, and the push ids received on GP-0077 (spec gopro.md §6).
public enum GoProQueryID: UInt8, Sendable, CaseIterable {
    case getSettingValues = 0x12
    case getStatusValues = 0x13
    case getSettingCapabilities = 0x32
    case registerSettingValueUpdates = 0x52
    case registerStatusValueUpdates = 0x53
    case registerSettingCapabilityUpdates = 0x62
    case unregisterSettingValueUpdates = 0x72
    case unregisterStatusValueUpdates = 0x73
    case unregisterSettingCapabilityUpdates = 0x82
    /// Push: a registered setting changed (received only).
    case settingValuePush = 0x92
    /// Push: a registered status changed (received only).
    case statusValuePush = 0x93
    /// Push: the allowed values of a registered setting changed (received only).
    case settingCapabilityPush = 0xA2

    /// The JSON name (`get_status_values`, `status_value_push`, …).
    public var name: String {
        switch self {
        case .getSettingValues: return "get_setting_values"
        case .getStatusValues: return "get_status_values"
        case .getSettingCapabilities: return "get_setting_capabilities"
        case .registerSettingValueUpdates: return "register_setting_value_updates"
        case .registerStatusValueUpdates: return "register_status_value_updates"
        case .registerSettingCapabilityUpdates: return "register_setting_capability_updates"
        case .unregisterSettingValueUpdates: return "unregister_setting_value_updates"
        case .unregisterStatusValueUpdates: return "unregister_status_value_updates"
        case .unregisterSettingCapabilityUpdates: return "unregister_setting_capability_updates"
        case .settingValuePush: return "setting_value_push"
        case .statusValuePush: return "status_value_push"
        case .settingCapabilityPush: return "setting_capability_push"
        }
    }

    /// True when the element ids are status ids (§11); otherwise they are setting ids.
    public var carriesStatuses: Bool {
        switch self {
        case .getStatusValues, .registerStatusValueUpdates, .unregisterStatusValueUpdates, .statusValuePush: return true
        default: return false
        }
    }

    /// True for capability lists: one element per allowed value, ids repeat (§4.2).
    public var carriesCapabilities: Bool {
        switch self {
        case .getSettingCapabilities, .registerSettingCapabilityUpdates, .settingCapabilityPush: return true
        default: return false
        }
    }

    /// True for the asynchronous pushes 0x92/0x93/0xA2 (never the answer to a request, §4.5).
    public var isPush: Bool {
        self == .settingValuePush || self == .statusValuePush || self == .settingCapabilityPush
    }

    private static let byName: [String: GoProQueryID] = Dictionary(uniqueKeysWithValues: allCases.map { ($0.name, $0) })
    /// The query with this JSON name (pushes included).
    public init?(name: String) {
        guard let q = Self.byName[name] else { return nil }
        self = q
    }
}

/// The status byte of a TLV response (spec gopro.md §4.1).
public enum GoProTLVStatus {
    /// `success`, `error`, `invalid_parameter`, or `reserved` for 3–255.
    public static func name(_ status: UInt8) -> String {
        switch status {
        case 0: return "success"
        case 1: return "error"
        case 2: return "invalid_parameter"
        default: return "reserved"
        }
    }
}

/// What a received message answers (spec gopro.md §4.5): the command, setting or query id of a
/// TLV response, the (feature, action) of a protobuf response/notification, or the feature of
/// the 2-byte "unsupported protobuf" error form (§4.3).
public enum GoProResponseID: Sendable, Hashable, CustomStringConvertible {
    case command(UInt8)
    case setting(UInt8)
    case query(UInt8)
    case protobuf(feature: UInt8, action: UInt8)
    case protobufError(feature: UInt8)

    /// True when a response with identifier `received` completes a request expecting `self`
    /// (equal ids; an unsupported-protobuf error matches by feature, §4.3).
    public func isAnswered(by received: GoProResponseID) -> Bool {
        if self == received { return true }
        if case let .protobuf(feature, _) = self, case let .protobufError(f) = received { return feature == f }
        return false
    }

    public var description: String {
        switch self {
        case let .command(id): return "command 0x\(GoProError.hex(id))"
        case let .setting(id): return "setting 0x\(GoProError.hex(id))"
        case let .query(id): return "query 0x\(GoProError.hex(id))"
        case let .protobuf(f, a): return "protobuf 0x\(GoProError.hex(f)) 0x\(GoProError.hex(a))"
        case let .protobufError(f): return "protobuf error 0x\(GoProError.hex(f))"
        }
    }
}
