import Foundation
import Mosquitto
import Reactor
import TestSupport
import Testing

/// The hostile-input suite (issue 20, docs/security.md): the real bridge process against a real
/// mosquitto and the emulator, and everything a stranger on the broker can send it. After each
/// barrage the same process must still be running, answer a normal command `ok`, and its RSS stay
/// within a bound.
@Suite(.serialized, .timeLimit(.minutes(8))) struct HostileInputTests {
    /// The camera (GoPro) and a layout sensor, and the knobs the limits are tested with.
    static let devices = """
          - {id: camera, address: "C0:FF:EE:00:00:01", profile: gopro, offline: {deadline: 3s}}
          - id: heart
            address: C0:FF:EE:00:00:02
            profile: custom
            characteristics:
              - {uuid: 2A37, codec: layout, layout: "builtin:heart_rate_measurement", topic: heart_rate}
              - {uuid: 2A39, codec: raw, direction: write, topic: control}
        """

    /// A bridge on a fresh broker and emulator, its camera online, with a hub client that can send
    /// the normal command.
    final class Target {
        let env: EndToEnd
        let hub: MQTTClient
        let bridge: Process
        let responses: MQTTSubscription
        private var probes = 0

        init(mqtt: String = "", extraConfig: String = "") async throws {
            env = try await EndToEnd(simulate: ["--device", "gopro@C0:FF:EE:00:00:01", "--device", "hr@C0:FF:EE:00:00:02",
                                                "--seconds", "600"])
            hub = try await env.broker.client(loop: env.loop)
            // The probes' answers come on a topic of their own (MQTT 5 response topic), so the
            // thousands of error answers to the barrage cannot crowd them out of the buffer.
            responses = try await hub.subscribe("hostile/probe")
            let availability = try await hub.subscribe("gatt2mqtt/camera/availability")
            bridge = try env.startBridge(devices: HostileInputTests.devices + extraConfig, mqtt: mqtt)
            let online = await collectUntil(availability, timeout: .seconds(20)) { $0.payloadString.contains("online") }
            guard online.last?.payloadString.contains("online") == true else {
                throw HarnessError("the camera never came online: \(env.bridgeLog())")
            }
        }

        /// The bridge's resident set in bytes (`/proc/<pid>/status`).
        var rss: Int {
            let status = (try? String(contentsOfFile: "/proc/\(bridge.processIdentifier)/status", encoding: .utf8)) ?? ""
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
                  let kb = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
            return kb * 1024
        }

        /// Sends a normal command and waits for its `ok`: the bridge is alive and handles
        /// commands in order after whatever came before on the broker. The command is shutter
        /// off, which a GoPro takes even while it records (the barrage may have started it: any
        /// other command waits for the recording to end, as on the camera). While the barrage's
        /// own commands fill the camera's queue (`limits.max_queued`) the answer is `queue_full`,
        /// which is the limit doing its work: the probe is sent again until the queue has room
        /// (the camera's queued commands expire after its 3 s offline deadline), within 30 s.
        func answersNormally(after what: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let deadline = ContinuousClock.now + .seconds(30)
            var answer = "nothing"
            while ContinuousClock.now < deadline {
                #expect(bridge.isRunning, "the bridge died after \(what): \(env.bridgeLog().suffix(2000))", sourceLocation: sourceLocation)
                guard bridge.isRunning else { throw HarnessError("bridge died") }
                probes += 1
                let transaction = "probe-\(probes)"
                try await hub.publish(topic: "gatt2mqtt/camera/set",
                                      payload: Array(#"{"command":"set_shutter","value":false,"transaction":"\#(transaction)"}"#.utf8),
                                      qos: .atLeastOnce, properties: MQTTPublishProperties(responseTopic: "hostile/probe"))
                let got = await collectUntil(responses, timeout: deadline - ContinuousClock.now) {
                    $0.payloadString.contains(#""transaction":"\#(transaction)""#) && !$0.payloadString.contains(#""status":"queued""#)
                        && !$0.payloadString.contains(#""status":"sent""#)
                }
                answer = got.last?.payloadString ?? "nothing"
                guard answer.contains(#""code":"queue_full""#) else { break }
                try await Task.sleep(for: .milliseconds(200))  // the queue drains by the device's answers and deadlines
            }
            #expect(answer.contains(#""status":"ok""#),
                    "after \(what) a normal command got \(answer) (hub connected: \(hub.statistics.isConnected)); the bridge's log ends: \(env.bridgeLog().suffix(3000))",
                    sourceLocation: sourceLocation)
        }

        func stop() async {
            await hub.disconnect()
            env.stop()
        }
    }

    /// What a stranger sends, deterministic: wrong types, numbers out of every range and their
    /// spellings, NaN/Infinity, deep nesting, huge arrays, invalid UTF-8, empty, and objects that
    /// put each of those under every key the bridge reads.
    static func payloads() -> [[UInt8]] {
        let values = [
            "null", "true", "false", "0", "-1", "-0", "1.5", "1e300", "-1e300", "1e16", "-1e16", "9223372036854775807",
            "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e999", "\"NaN\"", "\"Infinity\"",
            "\"-Infinity\"", "\"nan\"", "\"inf\"", "\"1e300\"", "\"1e16\"", "\"-5s\"", "\"99999999999d\"", "\"\"", "[]", "{}",
            "\"__proto__\"", "[[[[[[[[[[1]]]]]]]]]]", "{\"__proto__\":{\"x\":1}}", "\"" + String(repeating: "x", count: 70_000) + "\"",
        ]
        let keys = ["command", "value", "transaction", "id", "address", "profile", "options", "seconds", "timeout", "command_timeout",
                    "offline", "deadline", "duration", "name", "new_id", "to", "level", "log_level", "epoch", "node", "rssi", "age",
                    "characteristics", "uuid", "layout", "preset", "shutter", "brightness", "volume", "control", "get", "__proto__"]
        var texts: [String] = ["", " ", "{", "}", "[", "\"", "not json", "{\"a\":}", "[1,]", "NaN", "Infinity", "-Infinity", "nan",
                               "ON", "OFF", "toggle"]
        texts += values
        for key in keys {
            for value in values { texts.append("{\"\(key)\":\(value)}") }
            texts.append("{\"command\":\"\(key)\",\"value\":1e300}")
        }
        // A command the camera knows with every hostile value, and device/add-shaped requests.
        for value in values {
            texts.append(#"{"command":"set_shutter","value":\#(value)}"#)
            texts.append(#"{"command":"set_setting","setting":\#(value),"value":\#(value)}"#)
            texts.append(#"{"id":"x\#(texts.count)","address":"C0:FF:EE:00:09:99","profile":"gopro","options":{"command_timeout":\#(value),"offline_deadline":\#(value)}}"#)
            texts.append(#"{"id":"camera","options":{"command_timeout":\#(value)}}"#)
            texts.append(#"{"seconds":\#(value)}"#)
        }
        var all = texts.map { Array($0.utf8) }
        all.append(Array(repeating: UInt8(ascii: "["), count: 100_000))
        all.append(Array(repeating: UInt8(ascii: "{"), count: 100_000))
        all.append(Array(("[" + Array(repeating: "{}", count: 100_000).joined(separator: ",") + "]").utf8))
        all.append(Array(("[" + Array(repeating: "1", count: 100_000).joined(separator: ",") + "]").utf8))
        all.append([0xFF, 0xFE, 0x80, 0xC0, 0xAF])
        all.append(Array("{\"command\":\"".utf8) + [0xC3, 0x28, 0xED, 0xA0, 0x80] + Array("\"}".utf8))
        all.append([0x00, 0x00, 0x00])
        return all
    }

    /// Every topic the bridge subscribes to (and a few around them), for a bridge whose base is
    /// `gatt2mqtt` with the devices above.
    static let topics: [String] = [
        "gatt2mqtt/camera/set", "gatt2mqtt/camera/set/shutter", "gatt2mqtt/camera/set/__proto__", "gatt2mqtt/camera/get",
        "gatt2mqtt/heart/control/write", "gatt2mqtt/heart/heart_rate/write", "gatt2mqtt/camera/nothing/write",
        "gatt2mqtt/nobody/set", "gatt2mqtt/nobody/set/x", "gatt2mqtt/__proto__/set",
        "gatt2mqtt/bridge/request/info", "gatt2mqtt/bridge/request/devices", "gatt2mqtt/bridge/request/health_check",
        "gatt2mqtt/bridge/request/options", "gatt2mqtt/bridge/request/scan", "gatt2mqtt/bridge/request/device/add",
        "gatt2mqtt/bridge/request/device/rename", "gatt2mqtt/bridge/request/device/options", "gatt2mqtt/bridge/request/pair",
        "gatt2mqtt/bridge/request/unpair", "gatt2mqtt/bridge/request/nonsense", "gatt2mqtt/bridge/request/a/b/c/d",
        "homeassistant/status",
    ]

    /// Each topic × every generated payload, at QoS 0 and 1, then retained: after each topic's
    /// barrage the bridge answers a normal command `ok`, and its RSS stays within 64 MiB of where
    /// it started.
    @Test func everyTopicTimesGeneratedPayloads() async throws {
        let target = try await Target()
        let payloads = Self.payloads()
        let start = target.rss
        do {
            for topic in Self.topics {
                for (i, payload) in payloads.enumerated() {
                    try await target.hub.publish(topic: topic, payload: payload, qos: i % 2 == 0 ? .atMostOnce : .atLeastOnce)
                }
                try await target.answersNormally(after: "\(payloads.count) payloads on \(topic)")
                // Retained: what a stranger leaves for every future start; a few kinds suffice.
                for payload in payloads.prefix(40) {
                    try await target.hub.publish(topic: topic, payload: payload, qos: .atLeastOnce, retain: true)
                }
                try await target.answersNormally(after: "retained payloads on \(topic)")
                #expect(target.rss - start < 64 << 20, "RSS grew from \(start >> 20) to \(target.rss >> 20) MiB after \(topic)")
            }
            // A topic as long as MQTT allows, under every level the bridge subscribes to.
            let long = String(repeating: "x", count: 60_000)
            for topic in ["gatt2mqtt/\(long)/set", "gatt2mqtt/camera/set/\(long)", "gatt2mqtt/bridge/request/\(long)",
                          "gatt2mqtt/camera/\(long)/write"] {
                try await target.hub.publish(topic: topic, payload: Array("{}".utf8), qos: .atLeastOnce)
            }
            try await target.answersNormally(after: "topics of 60 000 characters")
        } catch {
            await target.stop()
            throw error
        }
        await target.stop()
    }

    /// The issue's figure: 50 × 4 MiB messages (to an unknown device, to the camera, to a bridge
    /// request) and 200 000-command arrays leave the bridge's RSS within 48 MiB of where it
    /// started, and the bridge still answering.
    @Test func floodOfLargeMessagesLeavesMemoryFlat() async throws {
        let target = try await Target()
        do {
            try await target.answersNormally(after: "start")
            let start = target.rss
            let big = Array(#"{"command":"set_shutter","value":""#.utf8) + Array(repeating: UInt8(ascii: "a"), count: 4 << 20) + Array(#""}"#.utf8)
            for i in 0..<50 {
                let topic = ["gatt2mqtt/nobody/set", "gatt2mqtt/camera/set", "gatt2mqtt/bridge/request/device/add"][i % 3]
                try await target.hub.publish(topic: topic, payload: big, qos: .atLeastOnce)
            }
            try await target.answersNormally(after: "50 × 4 MiB messages")
            let array = "[" + Array(repeating: #"{"command":"set_shutter","value":true}"#, count: 200_000).joined(separator: ",") + "]"
            for _ in 0..<2 {
                try await target.hub.publish(topic: "gatt2mqtt/camera/set", payload: Array(array.utf8), qos: .atLeastOnce)
            }
            try await target.answersNormally(after: "two arrays of 200 000 commands")
            let end = target.rss
            print("HostileInputTests flood: the bridge's RSS \(start >> 10) KiB before, \(end >> 10) KiB after 50 × 4 MiB and 2 × 200 000 commands")
            #expect(end - start < 48 << 20, "RSS went from \(start >> 20) MiB to \(end >> 20) MiB")
        } catch {
            await target.stop()
            throw error
        }
        await target.stop()
    }

    /// A retained `{}` on `bridge/request/restart`, left before the bridge starts: answered
    /// `retained_request`, cleared from the broker, never executed (a restart loop before).
    @Test func aRetainedRestartRequestIsAnsweredAndClearedNotExecuted() async throws {
        let env = try await EndToEnd(simulate: ["--device", "gopro@C0:FF:EE:00:00:01", "--seconds", "600"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        try await hub.publish(topic: "gatt2mqtt/bridge/request/restart", payload: Array("{}".utf8), qos: .atLeastOnce, retain: true)
        let answers = try await hub.subscribe("gatt2mqtt/bridge/response/restart")
        let states = try await hub.subscribe("gatt2mqtt/bridge/state")
        _ = try env.startBridge(devices: #"  - {id: camera, address: "C0:FF:EE:00:00:01", profile: gopro}"#)
        let answer = await collect(answers, count: 1, timeout: .seconds(20))
        #expect(answer.first?.payloadString.contains(#""code":"retained_request""#) == true, "\(answer.map(\.payloadString))")
        // Cleared: a new subscriber gets no retained request. A retained message comes right after
        // the subscription, before anything published later: a marker on a topic of the same
        // filter that no bridge subscription matches ends the wait.
        let requests = try await hub.subscribe("gatt2mqtt/bridge/+/restart")
        try await hub.publish(topic: "gatt2mqtt/bridge/marker/restart", payload: Array("marker".utf8), qos: .atLeastOnce)
        let cleared = await collectUntil(requests) { $0.topic == "gatt2mqtt/bridge/marker/restart" }
        #expect(cleared.last?.topic == "gatt2mqtt/bridge/marker/restart", "\(cleared.map(\.topic))")
        #expect(!cleared.contains { $0.topic == "gatt2mqtt/bridge/request/restart" && !$0.payload.isEmpty }, "\(cleared.map(\.payloadString))")
        // Not executed: the bridge went online once and never offline. What the bridge published
        // before its answer is on the hub before it; a marker the hub publishes now comes after.
        try await hub.publish(topic: "gatt2mqtt/bridge/state", payload: Array("marker".utf8), qos: .atLeastOnce)
        let seen = await collectUntil(states) { $0.payloadString == "marker" }
        #expect(seen.last?.payloadString == "marker", "\(seen.map(\.payloadString))")
        #expect(!seen.contains { $0.payloadString.contains("offline") }, "\(seen.map(\.payloadString))")
        await hub.disconnect()
    }

    /// Cluster mode: a retained claim with the largest epoch (and other numbers out of range) on
    /// `bridge/owners/…` and `bridge/nodes/…` is logged and ignored; the node keeps serving.
    @Test func spoofedClusterTopicsAreIgnored() async throws {
        let env = try await EndToEnd(simulate: ["--device", "gopro@C0:FF:EE:00:00:01", "--seconds", "600"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        for (topic, payload) in [
            ("gatt2mqtt/bridge/owners/camera", #"{"node":null,"epoch":9223372036854775807}"#),
            ("gatt2mqtt/bridge/owners/other", #"{"node":"x","epoch":1e300}"#),
            ("gatt2mqtt/bridge/nodes/x/state", #"{"state":"online","epoch":-9223372036854775808}"#),
            ("gatt2mqtt/bridge/nodes/x/seen", #"{"node":"x","devices":{"C0:FF:EE:00:00:01":{"rssi":1e300,"age_ms":-1e300,"connected":true}}}"#),
            ("gatt2mqtt/bridge/nodes/y/seen", #"{"node":"y","devices":{"C0:FF:EE:00:00:01":{"rssi":-9223372036854775809,"age_ms":1e16}}}"#),
        ] {
            try await hub.publish(topic: topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: true)
        }
        let responses = try await hub.subscribe("gatt2mqtt/camera/response")
        let claims = try await hub.subscribe("gatt2mqtt/bridge/owners/camera")
        let bridge = try env.startBridge(devices: #"  - {id: camera, address: "C0:FF:EE:00:00:01", profile: gopro}"#,
                                         mqtt: "node_id: n1\ncluster:\n  enabled: true\n  claim_settle: 300ms\n")
        // The garbage claim does not stop this node from claiming the camera (epoch 1 over nothing).
        let claimed = await collectUntil(claims, timeout: .seconds(20)) { $0.payloadString.contains(#""node":"n1""#) }
        #expect(claimed.last?.payloadString.contains(#""node":"n1""#) == true, "\(claimed.map(\.payloadString))")
        try await hub.publish(topic: "gatt2mqtt/camera/set",
                              payload: Array(#"{"command":"set_shutter","value":false,"transaction":"c1"}"#.utf8), qos: .atLeastOnce)
        let got = await collectUntil(responses, timeout: .seconds(20)) { $0.payloadString.contains(#""status":"ok""#) }
        let answer = got.last?.payloadString ?? ""
        #expect(bridge.isRunning, "\(env.bridgeLog().suffix(2000))")
        #expect(answer.contains(#""status":"ok""#), "\(answer); the bridge's log ends: \(env.bridgeLog().suffix(3000))")
        await hub.disconnect()
    }
}
