import Foundation
import Mosquitto
import Testing

/// End-to-end on Linux's own Bluetooth stack (the kernel's LE stack, bluetoothd 5.66, SMP and
/// ATT for real) with the project's device models on Bumble's radio: `gatt2mqtt run` as a
/// user runs it, a hub that speaks MQTT only. `scripts/test` runs this suite inside
/// `scripts/vm-bluez`; the scenario table and figures are in docs/bluez.md, "The real stack".
@Suite(.serialized, .enabled(if: RealStack.enabled, "needs the real Bluetooth stack: run inside scripts/vm-bluez with GATT2MQTT_REAL_STACK=1"))
struct RealStackTests {
    static let gopro = "C0:FF:EE:00:00:01"
    static let glasses = "C0:FF:EE:00:00:02"
    static let heart = "C0:FF:EE:00:00:03"

    static let cameraYAML = #"  - {id: camera, address: "C0:FF:EE:00:00:01", profile: gopro}"#
    static let glassesYAML = #"  - {id: glasses, address: "C0:FF:EE:00:00:02", profile: rokid}"#
    static let heartYAML = """
          - id: heart
            address: "C0:FF:EE:00:00:03"
            profile: custom
            characteristics:
              - {uuid: 2A37, codec: layout, layout: "builtin:heart_rate_measurement", topic: heart_rate}
              - {uuid: 2A19, codec: layout, layout: "builtin:battery_level", direction: [read, notify], topic: battery}
              - {uuid: 2A39, codec: raw, direction: write, topic: control}
        """

    static func json(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Whether `payload` is the terminal lifecycle message (ok, error or expired) of `transaction`.
    static func isFinal(_ payload: String, _ transaction: String) -> Bool {
        payload.contains(#""transaction":"\#(transaction)""#)
            && [#""status":"ok""#, #""status":"error""#, #""status":"expired""#].contains { payload.contains($0) }
    }

    /// Discovery → connect → SMP Just Works pairing → Pairing Finish → a command, a query and
    /// the status pushes; then the bridge restarts while the bonded camera's link is up, and the
    /// new bridge reaches it again without pairing again (adopting what BlueZ brings up).
    @Test func goproPairsCommandsAndSurvivesABridgeRestart() async throws {
        let stack = try RealStack(devices: ["gopro@\(Self.gopro)"])
        defer { stack.stop() }
        let hub = try await stack.broker.client(loop: stack.loop)
        let events = try await hub.subscribe("gatt2mqtt/bridge/event")
        let availability = try await hub.subscribe("gatt2mqtt/camera/availability")
        let responses = try await hub.subscribe("gatt2mqtt/camera/response")
        let state = try await hub.subscribe("gatt2mqtt/camera")
        let started = ContinuousClock.now
        try stack.startBridge(devices: Self.cameraYAML, logLevel: "debug")

        let paired = await firstMessage(events) { $0.contains("device_paired") }
        #expect(paired != nil, "no device_paired event; bridge log:\n\(stack.bridgeLog.suffix(3000))")
        let online = await firstMessage(availability) { $0 == #"{"state":"online"}"# }
        try #require(online != nil, "camera never online; bridge log:\n\(stack.bridgeLog.suffix(3000))")
        RealStackFigures.record("start to online (GoPro, pairing included)", ContinuousClock.now - started)

        // A query first (while recording, the camera's busy gate would hold it), then the shutter.
        try await hub.publish(topic: "gatt2mqtt/camera/set", payload: Self.json(#"{"command":"get_hardware_info","transaction":"h1"}"#), qos: .atLeastOnce)
        let info = await firstMessage(responses) { Self.isFinal($0, "h1") }
        #expect(info?.payloadString.contains(#""status":"ok""#) == true && info?.payloadString.contains(#""status_name":"success""#) == true,
                "\(info?.payloadString ?? "no answer")")
        try await hub.publish(topic: "gatt2mqtt/camera/set", payload: Self.json(#"{"command":"set_shutter","value":true,"transaction":"s1"}"#), qos: .atLeastOnce)
        let ok = await firstMessage(responses) { Self.isFinal($0, "s1") }
        #expect(ok?.payloadString.contains(#""status":"ok""#) == true, "\(ok?.payloadString ?? "no answer")")
        let encoding = await firstMessage(state) { $0.contains(#""encoding":true"#) }
        #expect(encoding != nil, "no status push with encoding true")
        #expect(stack.pairCalls == 1, "Pair calls before the restart: \(stack.pairCalls)")

        // The bridge restarts while the link is up.
        #expect(stack.stopBridge() == 0)
        let restarted = ContinuousClock.now
        try stack.startBridge(devices: Self.cameraYAML, logLevel: "debug")
        let again = await firstMessage(availability) { $0 == #"{"state":"online"}"# }
        #expect(again != nil, "camera not online after the bridge restart; bridge log:\n\(stack.bridgeLog.suffix(4000))")
        RealStackFigures.record("bridge restart to online (bonded GoPro)", ContinuousClock.now - restarted)
        try await hub.publish(topic: "gatt2mqtt/camera/set", payload: Self.json(#"{"command":"set_shutter","value":false,"transaction":"s2"}"#), qos: .atLeastOnce)
        let ok2 = await firstMessage(responses) { Self.isFinal($0, "s2") }
        #expect(ok2?.payloadString.contains(#""status":"ok""#) == true, "\(ok2?.payloadString ?? "no answer"); bridge log:\n\(stack.bridgeLog.suffix(3000))")
        #expect(stack.pairCalls == 1, "the bonded camera was paired again: \(stack.pairCalls) Pair calls")
        await hub.disconnect()
    }

    /// Command round trips on the real stack (GoPro shutter on/off), for the figures.
    @Test func goproRoundTrips() async throws {
        let stack = try RealStack(devices: ["gopro@\(Self.gopro)"])
        defer { stack.stop() }
        let hub = try await stack.broker.client(loop: stack.loop)
        let responses = try await hub.subscribe("gatt2mqtt/camera/response")
        _ = try await stack.startOnline("camera", devices: Self.cameraYAML, hub: hub, logLevel: "warning")
        var samples: [Duration] = []
        for i in 0..<40 {
            let t = ContinuousClock.now
            try await hub.publish(topic: "gatt2mqtt/camera/set", payload: Self.json(#"{"command":"set_shutter","value":\#(i % 2 == 0),"transaction":"r\#(i)"}"#), qos: .atMostOnce)
            let answer = await firstMessage(responses, timeout: .seconds(20)) { Self.isFinal($0, "r\(i)") }
            try #require(answer?.payloadString.contains(#""status":"ok""#) == true, "\(answer?.payloadString ?? "no answer")")
            samples.append(ContinuousClock.now - t)
        }
        samples.sort()
        RealStackFigures.record("command round trip p50 (GoPro shutter)", samples[samples.count / 2])
        RealStackFigures.record("command round trip p99 (GoPro shutter)", samples[samples.count * 99 / 100])
        await hub.disconnect()
    }

    /// Rokid glasses: 0x9301 read, AUTH_REQ with its service record, AUTH_RESP, REQUEST →
    /// RESPONSE (brightness) and NOTIFY (battery).
    @Test func rokidAuthRequestAndNotify() async throws {
        let stack = try RealStack(devices: ["rokid@\(Self.glasses)"])
        defer { stack.stop() }
        let hub = try await stack.broker.client(loop: stack.loop)
        let responses = try await hub.subscribe("gatt2mqtt/glasses/response")
        let state = try await hub.subscribe("gatt2mqtt/glasses")
        _ = try await stack.startOnline("glasses", devices: Self.glassesYAML, hub: hub)
        try await hub.publish(topic: "gatt2mqtt/glasses/set", payload: Self.json(#"{"command":"set_brightness","value":8,"transaction":"b1"}"#), qos: .atLeastOnce)
        let ok = await firstMessage(responses) { Self.isFinal($0, "b1") }
        #expect(ok?.payloadString.contains(#""status":"ok""#) == true, "\(ok?.payloadString ?? "no answer"); bridge log:\n\(stack.bridgeLog.suffix(3000))")
        let brightness = await firstMessage(state) { $0.contains(#""brightness":8"#) }
        #expect(brightness != nil)
        // A NOTIFY from the glasses (Dev_BatteryChanged) reaches the state.
        let battery = await firstMessage(state) { $0.contains(#""battery":"#) }
        #expect(battery != nil, "no battery notify from the glasses")
        await hub.disconnect()
    }

    /// A layout device: notifications decoded, a read through /get, a write through a raw
    /// characteristic; on the AcquireNotify path (bluetoothd offers it for notify-only
    /// characteristics).
    @Test func layoutDeviceNotifyReadAndWrite() async throws {
        let stack = try RealStack(devices: ["hr@\(Self.heart)"])
        defer { stack.stop() }
        let hub = try await stack.broker.client(loop: stack.loop)
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let heartRate = try await hub.subscribe("gatt2mqtt/heart/heart_rate")
        _ = try await stack.startOnline("heart", devices: Self.heartYAML, hub: hub)
        let hr = await firstMessage(heartRate) { $0.contains(#""heart_rate":"#) }
        #expect(hr != nil, "no heart-rate notification")
        try await hub.publish(topic: "gatt2mqtt/heart/get", payload: Self.json(#"{"battery":""}"#), qos: .atLeastOnce)
        let read = await firstMessage(responses) { $0.contains(#""get":["battery"]"#) }
        #expect(read?.payloadString.contains(#""battery_level":85"#) == true, "\(read?.payloadString ?? "no answer")")
        await hub.disconnect()
    }
}

/// Figures measured by the real-stack tests, printed as `real-stack figure: NAME: VALUE` (the
/// table in docs/bluez.md is made from these lines).
enum RealStackFigures {
    static func record(_ name: String, _ duration: Duration) {
        let ms = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
        print("real-stack figure: \(name): \(String(format: "%.1f", ms)) ms")
    }

    static func record(_ name: String, count: Int) {
        print("real-stack figure: \(name): \(count)")
    }
}
