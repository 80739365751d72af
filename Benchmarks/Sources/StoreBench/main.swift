// store-bench: the SQLite writes of one command, on a real file in a temporary directory
// (see docs/benchmarks.md, "The store").
//   swift run -c release --package-path Benchmarks store-bench [name-filter]
import BinaryCoding
import BridgeStore
import Foundation

/// A GoPro's merged state as the bridge keeps it: 40 named statuses and settings (booleans,
/// option names, integers, a couple of strings), about 0.9 KB of JSON.
func goproState(_ n: Int) -> JSONObject {
    var o = JSONObject()
    let bools = ["battery_present", "overheating", "busy", "quick_capture", "encoding", "lcd_lock_active", "wireless_connections_enabled",
                 "pairing_state", "sd_card_present", "ready", "camera_control", "gps_lock", "cold", "zoom_available", "mobile_friendly"]
    for (i, k) in bools.enumerated() { o[k] = .bool((i + n) % 3 == 0) }
    let options = ["video_resolution": "4K", "frames_per_second": "60.0", "video_lens": "Wide", "photo_lens": "Linear",
                   "hypersmooth": "Boost", "media_format": "Time Lapse Video", "anti_flicker": "60Hz", "video_bit_rate": "High",
                   "internal_battery_bars": "Three", "sd_status": "OK", "orientation": "Upright", "flatmode": "Video",
                   "preset_group": "Video", "wifi_band": "5 GHz"]
    for (k, v) in options { o[k] = .string(v) }
    let ints = ["internal_battery_percentage": 84, "video_encoding_duration": 0, "remaining_photos": 4210, "remaining_video_time": 7340,
                "num_total_photos": 812, "num_total_videos": 96, "space_remaining": 55_123_456, "wifi_bars": 3,
                "active_preset": 65536, "digital_zoom": 0]
    for (k, v) in ints { o[k] = .int(Int64(v)) }
    o["ap_ssid"] = .string("GP24500456")
    // The value the benchmark's commands change, so every save carries a new state.
    o["video_resolution"] = .int(Int64(1 + n % 2))
    return o
}

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-bench-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
defer { if ProcessInfo.processInfo.environment["STORE_BENCH_KEEP"] == nil { try? FileManager.default.removeItem(at: dir) } }
func freshStore(_ name: String) throws -> BridgeStore {
    try BridgeStore(path: dir.appendingPathComponent("\(name).sqlite").path)
}

let states = (0..<2).map(goproState)
let stateBytes = JSONValue.object(states[0]).jsonText.utf8.count
print("store-bench (\(ProcessInfo.processInfo.processorCount) cores), state \(states[0].count) keys, \(stateBytes) bytes of JSON, in \(dir.path)")

func entry(_ i: Int, _ now: Date) -> OutboxEntry {
    OutboxEntry(deviceID: "camera0", transaction: "\"t\(i)\"", command: #"{"setting":"video_resolution","value":1}"#,
                status: .sent, createdAt: now, deadline: now.addingTimeInterval(30))
}

// Not a store cost since the answer's commit takes the text the retained publish sends, but
// part of every case below that saves a state.
try measure("encode the state's JSON (shared with the publish)") { i in blackHole(JSONValue.object(states[i % 2]).jsonText) }

do {
    let store = try freshStore("steps")
    var ids: [Int64] = []
    try measure("enqueue sent (1 commit)") { i in ids.append(try store.enqueue(entry(i, Date())).entry.id!) }
    var next = 0
    try measure("remove (1 commit)") { _ in
        if next == ids.count { ids.append(try store.enqueue(entry(next, Date())).entry.id!) }
        try store.removeCommand(ids[next]); next += 1
    }
    try measure("saveState 40 keys (1 commit)") { i in try store.saveState(states[i % 2], for: "camera0", at: Date()) }
}

// The crash marker every command writes before it is handled and removes after (issue 24):
// in the mapped `-inflight` file, and in the `inflight` table as before (two commits).
for inFile in [true, false] {
    let store = try BridgeStore(path: dir.appendingPathComponent("markers-\(inFile).sqlite").path, markersInFile: inFile)
    let payload = Array(#"{"command":"set_shutter","value":false,"transaction":"t1"}"#.utf8)
    try measure("crash marker: mark + clear, \(inFile ? "mapped file" : "SQLite (2 commits)")") { i in
        let m = InflightMessage(topic: "gatt2mqtt/camera0/set", payload: payload, packetID: i & 0xFFFF, at: Date())
        try store.markInflight(m)
        try store.clearInflight(topic: m.topic, digest: m.digest)
    }
}

do {
    let store = try freshStore("lifecycle")
    try measure("command: enqueue sent, remove, saveState (3 commits)") { i in
        let now = Date()
        let id = try store.enqueue(entry(i, now)).entry.id!
        try store.removeCommand(id)
        try store.saveState(states[i % 2], for: "camera0", at: now)
    }
}

do {
    let store = try freshStore("answer")
    try measure("command: enqueue sent, answer (remove + state) in 1 commit") { i in
        let now = Date()
        let id = try store.enqueue(entry(i, now)).entry.id!
        // The state is encoded once: the same text is published retained.
        let json = JSONValue.object(states[i % 2]).jsonText
        try store.apply([.removeCommand(id), .saveState(deviceID: "camera0", json: json, at: now.timeIntervalSince1970)])
    }
}

do {
    // 8 devices with a command each; their 8 answers arrive in one event-loop turn and are
    // committed together (BridgeStore.apply's batching). Figures are per command.
    let store = try freshStore("batch")
    var ids: [Int64] = []
    var writes: [BridgeStore.Write] = []
    try measure("8 devices: enqueue sent each, 8 answers in 1 commit") { i in
        let now = Date()
        let device = i % 8
        ids.append(try store.enqueue(entry(i, now)).entry.id!)
        writes.append(.removeCommand(ids.last!))
        writes.append(.saveState(deviceID: "camera\(device)", json: JSONValue.object(states[(i / 8) % 2]).jsonText,
                                 at: now.timeIntervalSince1970))
        if device == 7 {
            try store.apply(writes)
            writes.removeAll(keepingCapacity: true)
            ids.removeAll(keepingCapacity: true)
        }
    }
}
