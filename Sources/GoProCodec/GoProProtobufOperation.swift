import SwiftProtobuf

/// One protobuf operation of spec gopro.md §7: `[feature][action][proto2 bytes]` (§4.3).
public struct GoProProtobufOperation: Sendable, Hashable {
    /// Feature id: 0x02 network management, 0x03 wireless/pairing (GP-0091/GP-0092), 0xF1 command
    /// (GP-0072/GP-0073), 0xF3 setting (unused), 0xF5 query (GP-0076/GP-0077).
    public let feature: UInt8
    public let requestAction: UInt8
    /// Always `requestAction | 0x80` (§4.3).
    public var responseAction: UInt8 { requestAction | 0x80 }
    /// The action id of asynchronous notifications, when the operation has them.
    public let notificationAction: UInt8?
    /// The spec's operation id (e.g. `GPCAMERA_SET_CAMERA_CONTROL_STATUS`).
    public let specID: String
    public let requestMessage: String
    public let responseMessage: String
    /// The notification message, when `notificationAction` is set.
    public let notificationMessage: String?

    /// The characteristic requests are written to (§1, §7).
    public var writeCharacteristic: GoProCharacteristic { Self.writeCharacteristic(feature: feature) }
    /// The characteristic responses and notifications arrive on.
    public var notifyCharacteristic: GoProCharacteristic { writeCharacteristic.responseCharacteristic }

    static func writeCharacteristic(feature: UInt8) -> GoProCharacteristic {
        switch feature {
        case 0x02, 0x03: return .networkManagement
        case 0xF3: return .settings
        case 0xF5: return .query
        default: return .command
        }
    }

    init(_ feature: UInt8, _ request: UInt8, _ notification: UInt8?, _ specID: String,
         _ requestMessage: String, _ responseMessage: String, _ notificationMessage: String? = nil) {
        self.feature = feature
        self.requestAction = request
        self.notificationAction = notification
        self.specID = specID
        self.requestMessage = requestMessage
        self.responseMessage = responseMessage
        self.notificationMessage = notificationMessage ?? (notification == nil ? nil : responseMessage)
    }

    /// The complete table of §7.
    public static let all: [GoProProtobufOperation] = [
        .init(0x02, 0x00, nil, "DEPRECATED_WIRELESS_PING", "", "ResponseGeneric"),
        .init(0x02, 0x01, nil, "GPCAMERA_NETWORK_GET_CAPABILITIES", "RequestGetNetworkCapabilities", "ResponseCapabilities"),
        .init(0x02, 0x02, 0x0B, "GPCAMERA_NETWORK_START_AP_SCAN", "RequestStartScan", "ResponseStartScanning", "NotifStartScanning"),
        .init(0x02, 0x03, nil, "GPCAMERA_NETWORK_GET_AP_LIST", "RequestGetApEntries", "ResponseGetApEntries"),
        .init(0x02, 0x04, 0x0C, "GPCAMERA_NETWORK_CONNECT_EXISTING_AP", "RequestConnect", "ResponseConnect", "NotifProvisioningState"),
        .init(0x02, 0x05, 0x0C, "GPCAMERA_NETWORK_CONNECT_NEW_AP", "RequestConnectNew", "ResponseConnectNew", "NotifProvisioningState"),
        .init(0x02, 0x06, nil, "GPCAMERA_NETWORK_DELETE_AP", "RequestDeleteSingleAp", "ResponseGeneric"),
        .init(0x02, 0x07, nil, "OGP_DELETE_ALL_ACCESS_POINTS", "RequestDeleteAllAp", "ResponseGeneric"),
        .init(0x02, 0x08, nil, "UNDOCUMENTED_NETWORK_TAKE_OWNERSHIP", "RequestTakeOwnership", "ResponseTakeOwnership"),
        .init(0x02, 0x0A, nil, "UNDOCUMENTED_NETWORK_STOP_NETWORK_FEATURES", "RequestStopNetworkFeatures", "ResponseGeneric"),
        .init(0x02, 0x0D, nil, "GPCAMERA_NETWORK_CONNECT_MFI", "RequestConnectMFi", "ResponseConnectMFi"),
        .init(0x03, 0x01, nil, "GPCAMERA_WIRELESS_PAIRING_COMPLETE", "RequestPairingFinish", "ResponseGeneric"),
        .init(0x03, 0x03, nil, "UNDOCUMENTED_WIRELESS_SET_RESUME_SEQUENCE", "RequestSetSuspendSequence", "ResponseGeneric"),
        .init(0x03, 0x04, nil, "UNDOCUMENTED_WIRELESS_SET_COLD_BOOT_SEQUENCE", "RequestSetSuspendSequence", "ResponseGeneric"),
        .init(0x03, 0x05, nil, "GPCAMERA_WIRELESS_PAIR_BTC", "RequestPairBtc", "ResponseGeneric"),
        .init(0x03, 0x07, nil, "GPCAMERA_WIRELESS_CONNECT_BTC", "RequestConnectBtc", "ResponseGeneric"),
        .init(0xF1, 0x60, nil, "GPCAMERA_SET_PRESET_LIST_ORDER", "RequestSetPresetListOrder", "ResponseGeneric"),
        .init(0xF1, 0x61, nil, "GPCAMERA_DUPLICATE_PRESET", "RequestPresetDuplicate", "ResponsePresetDuplicate"),
        .init(0xF1, 0x62, nil, "GPCAMERA_SET_CAMERA_NAME", "RequestSetCameraName", "ResponseGeneric"),
        .init(0xF1, 0x63, nil, "GPCAMERA_SET_PRESET_VISIBILITY", "RequestPresetSetVisibility", "ResponseGeneric"),
        .init(0xF1, 0x64, nil, "GPCAMERA_CUSTOM_PRESET_UPDATE", "RequestCustomPresetUpdate", "ResponseGeneric"),
        .init(0xF1, 0x65, nil, "GPCAMERA_SET_HOME_NETWORK_SETTING", "RequestSetCOHNSetting", "ResponseGeneric"),
        .init(0xF1, 0x66, nil, "GPCAMERA_CLEAR_HOME_NETWORK_CERT", "RequestClearCOHNCert", "ResponseGeneric"),
        .init(0xF1, 0x67, nil, "GPCAMERA_CREATE_HOME_NETWORK_CERT", "RequestCreateCOHNCert", "ResponseGeneric"),
        .init(0xF1, 0x69, nil, "GPCAMERA_SET_CAMERA_CONTROL_STATUS", "RequestSetCameraControlStatus", "ResponseGeneric"),
        .init(0xF1, 0x6A, nil, "GPCAMERA_SET_IN_CONTEXTUAL_MENU", "RequestSetInContextualMenu", "ResponseGeneric"),
        .init(0xF1, 0x6B, nil, "GPCAMERA_TURBO_MODE_ENABLE", "RequestSetTurboActive", "ResponseGeneric"),
        .init(0xF1, 0x6C, nil, "GPCAMERA_TIMEWARP_SPEED_RAMP_ACTIVE", "RequestSetTimeWarpSpeedRampActive", "ResponseGeneric"),
        .init(0xF1, 0x6D, nil, "GPCAMERA_TIMEWARP_SPEED_RAMP", "RequestSetTimeWarpSpeedRamp", "ResponseGeneric"),
        .init(0xF1, 0x6E, nil, "GPCAMERA_REMOVE_PRESET", "RequestSetPresetRemove", "ResponseGeneric"),
        .init(0xF1, 0x6F, nil, "GPCAMERA_ONSCREEN_SHORTCUTS_RESET", "RequestShortcutsReset", "ResponseGeneric"),
        .init(0xF1, 0x71, nil, "GPCAMERA_TIMEWARP_SPEED_1X", "RequestSetTimeWarpSpeed1X", "ResponseGeneric"),
        .init(0xF1, 0x75, nil, "GPCAMERA_RESET_PRESET", "RequestSetPresetFactoryReset", "ResponseGeneric"),
        .init(0xF1, 0x76, nil, "GPCAMERA_CREATE_PRESET", "RequestCreateCustomPreset", "ResponseCreateCustomPreset"),
        .init(0xF1, 0x77, nil, "GPCAMERA_SET_PRESET_ORDER", "RequestSetPresetOrder", "ResponseGeneric"),
        .init(0xF1, 0x78, nil, "GPCAMERA_NETWORK_RELEASE", "RequestReleaseNetwork", "ResponseGeneric"),
        .init(0xF1, 0x79, nil, "GPCAMERA_LIVE_STREAM_SETUP", "RequestSetLiveStreamMode", "ResponseGeneric"),
        .init(0xF1, 0x7A, nil, "GPCAMERA_NETWORK_FW_UPDATE", "RequestSetOTAUpdate", "ResponseGeneric"),
        .init(0xF1, 0x7B, nil, "GPCAMERA_WIRELESS_SELECT_BAND", "RequestSetBandSelect", "ResponseGeneric"),
        .init(0xF1, 0x7C, nil, "GPCAMERA_MOBILE_OFFLOAD_NEW_MEDIA_FLAG_CLEAR", "RequestClearNewMediaFlag", "ResponseGeneric"),
        .init(0xF1, 0x7D, nil, "GPCAMERA_SET_SYSTEM_NOTIFY_EVENT", "RequestSetSystemNotifyEvent", "ResponseGeneric"),
        .init(0xF5, 0x6C, nil, "OGP_GET_CAMERA_CAPABILITIES", "RequestGetCameraCapabilities", "ResponseGetCameraCapabilities"),
        .init(0xF5, 0x6D, nil, "OGP_GET_LAST_MEDIA", "RequestGetLastCapturedMedia", "ResponseLastCapturedMedia"),
        .init(0xF5, 0x6E, nil, "GPCAMERA_GET_HOME_NETWORK_CERT", "RequestCOHNCert", "ResponseCOHNCert"),
        .init(0xF5, 0x6F, 0xEF, "GPCAMERA_GET_HOME_NETWORK_STATUS", "RequestGetCOHNStatus", "NotifyCOHNStatus"),
        .init(0xF5, 0x72, 0xF3, "OGP_PRESETS_GET", "RequestGetPresetStatus", "NotifyPresetStatus"),
        .init(0xF5, 0x74, 0xF5, "OGP_LIVESTREAM_STATUS", "RequestGetLiveStreamStatus", "NotifyLiveStreamStatus"),
        .init(0xF5, 0x76, 0xF7, "UNDOCUMENTED_OTA_GET_STATUS", "RequestGetOTAStatus", "NotifyOTAStatus"),
        .init(0xF5, 0x7B, nil, "UNDOCUMENTED_CAH_GET_CSI_VALUE", "RequestGetCSIValue", "ResponseGetCSIValue"),
    ]

    /// What a received (feature, action) pair is on a notify characteristic (§4.4): the message
    /// name, or `nil` when it is not a protobuf response/notification there.
    public static func receivedMessage(
        feature: UInt8, action: UInt8, on characteristic: GoProCharacteristic
    ) -> String? {
        received[Key(characteristic: characteristic.rawValue, feature: feature, action: action)]
    }

    private struct Key: Hashable {
        var characteristic: UInt16
        var feature: UInt8
        var action: UInt8
    }

    private static let received: [Key: String] = {
        var table = [Key: String]()
        for op in all {
            let c = op.notifyCharacteristic.rawValue
            table[Key(characteristic: c, feature: op.feature, action: op.responseAction)] = op.responseMessage
            if let n = op.notificationAction, let m = op.notificationMessage {
                table[Key(characteristic: c, feature: op.feature, action: n)] = m
            }
        }
        return table
    }()

    /// The SwiftProtobuf types of the messages this codec's schema declares (Proto/gopro.proto);
    /// other §7 messages are identified but left undecoded.
    static let messageTypes: [String: any SwiftProtobuf.Message.Type] = [
        "ResponseGeneric": OpenGopro_ResponseGeneric.self,
        "ResponseLastCapturedMedia": OpenGopro_ResponseLastCapturedMedia.self,
        "NotifyPresetStatus": OpenGopro_NotifyPresetStatus.self,
        "ResponseStartScanning": OpenGopro_ResponseStartScanning.self,
        "NotifStartScanning": OpenGopro_NotifStartScanning.self,
        "ResponseGetApEntries": OpenGopro_ResponseGetApEntries.self,
        "ResponseConnect": OpenGopro_ResponseConnect.self,
        "ResponseConnectNew": OpenGopro_ResponseConnectNew.self,
        "NotifProvisioningState": OpenGopro_NotifProvisioningState.self,
        "NotifyLiveStreamStatus": OpenGopro_NotifyLiveStreamStatus.self,
        "NotifyCOHNStatus": OpenGopro_NotifyCOHNStatus.self,
        "ResponseCOHNCert": OpenGopro_ResponseCOHNCert.self,
    ]
}
