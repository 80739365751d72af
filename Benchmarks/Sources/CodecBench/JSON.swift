import BinaryCoding

/// `JSONValue`/`JSONObject` (BinaryCoding) on the bridge's hot path: a command's payload parsed,
/// a device's 40-key state updated as `DeviceSession.commitState` does (copy, merge what changed,
/// set `last_seen`) and encoded for the store and the retained publish.
func jsonBenchmarks() {
    let payload = #"{"setting":"video_resolution","value":1,"transaction":"t1"}"#
    let stateText = """
        {"battery_present":true,"overheating":false,"busy":false,"quick_capture":true,"encoding":false,\
        "lcd_lock_active":false,"wireless_connections_enabled":true,"pairing_state":false,"sd_card_present":true,\
        "ready":true,"camera_control":false,"gps_lock":false,"cold":false,"zoom_available":true,"mobile_friendly":true,\
        "video_resolution":1,"frames_per_second":"60.0","video_lens":"Wide","photo_lens":"Linear","hypersmooth":"Boost",\
        "media_format":"Time Lapse Video","anti_flicker":"60Hz","video_bit_rate":"High","internal_battery_bars":"Three",\
        "sd_status":"OK","orientation":"Upright","flatmode":"Video","preset_group":"Video","wifi_band":"5 GHz",\
        "internal_battery_percentage":84,"video_encoding_duration":0,"remaining_photos":4210,"remaining_video_time":7340,\
        "num_total_photos":812,"num_total_videos":96,"space_remaining":55123456,"wifi_bars":3,"active_preset":65536,\
        "digital_zoom":0,"ap_ssid":"GP24500456"}
        """
    let state = try! JSONValue(parsing: stateText).objectValue!
    precondition(state.count == 40)
    let keys = state.keys
    let members = Array(state)

    bench("JSON parse command payload (\(payload.utf8.count) B)") {
        blackHole(try! JSONValue(parsing: payload))
    }
    let command = try! JSONValue(parsing: payload).objectValue!
    bench("JSON 3 lookups in the 3-key payload") {
        var found = 0
        for k in ["setting", "value", "transaction"] where command[k] != nil { found += 1 }
        blackHole(found)
    }
    bench("JSON parse 40-key state (\(stateText.utf8.count) B)") {
        blackHole(try! JSONValue(parsing: stateText))
    }
    bench("JSON encode 40-key state") {
        blackHole(JSONValue.object(state).jsonText)
    }
    var n: Int64 = 0
    bench("JSON state update: copy, merge 2 keys, set last_seen") {
        n += 1
        var newState = state
        newState.merge(["video_resolution": .int(n & 1), "busy": .bool(n & 2 == 0)])
        newState["last_seen"] = .string("2026-11-25T05:40:00Z")
        blackHole(newState)
    }
    bench("JSON build 40-key object member by member") {
        var o = JSONObject()
        for m in members { o[m.key] = m.value }
        blackHole(o)
    }
    bench("JSON 40 lookups in a 40-key object") {
        var found = 0
        for k in keys where state[k] != nil { found += 1 }
        blackHole(found)
    }
    bench("JSON remove 1 key of 40 (copy)") {
        var o = state
        o["busy"] = nil
        blackHole(o)
    }
}
