import Foundation
import Mosquitto
import Testing

/// One end-to-end environment: a broker, `gatt2mqtt simulate` with `devices`, a state directory.
/// `startBridge` runs `gatt2mqtt run` on a configuration whose `devices:` section is given.
final class EndToEnd {
    let broker: MosquittoBroker
    let simulator: Process
    let bus: String
    let directory: TemporaryDirectory
    var bridge: Process?

    init(simulate devices: [String] = []) throws {
        broker = try MosquittoBroker()
        (simulator, bus) = try BluetoothCLITests.simulate(devices)
        directory = try TemporaryDirectory()
    }

    func startBridge(devices yaml: String) throws -> Process {
        let config = directory.path + "/bridge.yaml"
        try """
            mqtt:
              url: mqtt://127.0.0.1:\(broker.port)
            bluetooth:
              bus_address: \(bus)
            database:
              path: \(directory.path)/state.sqlite
            devices:
            \(yaml)
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let p = Process()
        p.executableURL = CLI.executable
        p.arguments = ["run", "--config", config, "--log-level", "warning"]
        var env = ProcessInfo.processInfo.environment
        env["SWIFT_BACKTRACE"] = "enable=no"
        p.environment = env
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        bridge = p
        return p
    }

    /// Stops every process by pid.
    func stop() {
        if let bridge {
            if bridge.isRunning { kill(bridge.processIdentifier, SIGKILL) }
            bridge.waitUntilExit()
        }
        kill(simulator.processIdentifier, SIGTERM)
        simulator.waitUntilExit()
        broker.stop()
    }
}

/// The whole product as a user runs it: `mosquitto`, `gatt2mqtt simulate` (emulated BlueZ on a
/// private bus) and `gatt2mqtt run` as separate processes; a hub client talks MQTT only.
@Suite(.serialized, .timeLimit(.minutes(1))) struct RunEndToEndTests {
    @Test func bridgeProcessAgainstBrokerAndEmulator() async throws {
        let env = try EndToEnd()
        defer { env.stop() }
        let hub = try await env.broker.client()
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let heartRate = try await hub.subscribe("gatt2mqtt/heart/heart_rate")
        let availability = try await hub.subscribe("gatt2mqtt/heart/availability")
        let bridge = try env.startBridge(devices: """
              - id: heart
                address: C0:FF:EE:00:00:01
                profile: custom
                characteristics:
                  - {uuid: 2A37, codec: layout, layout: "builtin:heart_rate_measurement", topic: heart_rate}
                  - {uuid: 2A19, codec: layout, layout: "builtin:battery_level", direction: [read, notify], topic: battery}
                  - {uuid: 2A39, codec: raw, direction: write, topic: control}
            """)

        let online = await collect(availability, count: 1)
        #expect(online.first?.payloadString == #"{"state":"online"}"#)
        // Notifications of the simulated sensor arrive decoded.
        let hr = await collect(heartRate, count: 2)
        #expect(hr.count == 2 && hr.allSatisfy { $0.payloadString.contains(#""heart_rate":"#) })
        // A read through /get and a raw write through <topic>/write, each answered.
        try await hub.publish(topic: "gatt2mqtt/heart/get", payload: Array(#"{"battery":""}"#.utf8), qos: .atLeastOnce)
        let r1 = await collect(responses, count: 1)
        #expect(r1.first?.payloadString == #"{"status":"ok","command":{"get":["battery"]},"data":{"battery_level":85}}"#)
        try await hub.publish(topic: "gatt2mqtt/heart/control/write", payload: Array("02".utf8), qos: .atLeastOnce)
        let r2 = await collect(responses, count: 1)
        #expect(r2.first?.payloadString.contains(#""code":"bluetooth_error""#) == true, "the simulated control point refuses 02 with ATT 0x80")
        // Graceful stop: offline retained, exit status 0.
        kill(bridge.processIdentifier, SIGTERM)
        bridge.waitUntilExit()
        #expect(bridge.terminationStatus == 0)
        let state = await collect(try await hub.subscribe("gatt2mqtt/bridge/state"), count: 1)
        #expect(state.first?.payloadString == #"{"state":"offline"}"# && state.first?.retain == true)
        await hub.disconnect()
    }
}

extension RunEndToEndTests {
    /// The issue's headline flows: GoPro shutter on → `ok` and state `encoding: true`; Rokid
    /// brightness → RESPONSE → state.
    @Test func goproAndRokidThroughTheBridgeProcess() async throws {
        let env = try EndToEnd(simulate: ["--device", "gopro@C0:FF:EE:00:00:01", "--device", "rokid@C0:FF:EE:00:00:02"])
        defer { env.stop() }
        let hub = try await env.broker.client()
        let camera = try await hub.subscribe("gatt2mqtt/camera/response")
        let glasses = try await hub.subscribe("gatt2mqtt/glasses/response")
        let availability = try await hub.subscribe("gatt2mqtt/+/availability")
        let cameraState = try await hub.subscribe("gatt2mqtt/camera")
        let bridge = try env.startBridge(devices: """
              - {id: camera, address: "C0:FF:EE:00:00:01", profile: gopro}
              - {id: glasses, address: "C0:FF:EE:00:00:02", profile: rokid}
            """)
        // Both devices connected (and the bridge subscribed) before commanding them.
        let online = await collect(availability, count: 2)
        #expect(online.map(\.payloadString) == [#"{"state":"online"}"#, #"{"state":"online"}"#])
        try await hub.publish(topic: "gatt2mqtt/camera/set", payload: Array(#"{"command":"set_shutter","value":true,"transaction":"s1"}"#.utf8), qos: .atLeastOnce)
        try await hub.publish(topic: "gatt2mqtt/glasses/set", payload: Array(#"{"command":"set_brightness","value":8,"transaction":"b1"}"#.utf8), qos: .atLeastOnce)
        let c = await collect(camera, count: 1)
        #expect(c.first?.payloadString.hasPrefix(#"{"transaction":"s1","status":"ok""#) == true, "\(c.map(\.payloadString))")
        let g = await collect(glasses, count: 1)
        #expect(g.first?.payloadString.hasPrefix(#"{"transaction":"b1","status":"ok""#) == true, "\(g.map(\.payloadString))")
        // The camera's status push (encoding 1) reaches the retained state; collect what arrives.
        let states = await collect(cameraState, count: 50, timeout: .seconds(3))
        #expect(states.contains { $0.payloadString.contains(#""encoding":true"#) }, "\(states.map(\.payloadString))")
        let glassesState = await collect(try await hub.subscribe("gatt2mqtt/glasses"), count: 1)
        #expect(glassesState.first?.payloadString.contains(#""brightness":8"#) == true)
        kill(bridge.processIdentifier, SIGTERM)
        bridge.waitUntilExit()
        await hub.disconnect()
    }
}

extension RunEndToEndTests {
    /// Puts a simulated device in or out of range through the emulator's control interface,
    /// with an independent D-Bus client (gdbus).
    static func setInRange(_ env: EndToEnd, _ address: String, _ on: Bool) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/gdbus")
        p.arguments = ["call", "--address", env.bus, "--dest", "org.bluez", "--object-path", "/org/gatt2mqtt/Simulator",
                       "--method", "org.gatt2mqtt.Simulator1.SetInRange", address, on ? "true" : "false"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
    }

    /// A command queued for an away device survives `kill -9` of the bridge and is delivered
    /// exactly once after the restart, when the device comes into range.
    @Test func queuedCommandSurvivesSIGKILLAndIsDeliveredOnce() async throws {
        let env = try EndToEnd()
        defer { env.stop() }
        try Self.setInRange(env, "C0:FF:EE:00:00:01", false)
        let devices = """
              - id: heart
                address: C0:FF:EE:00:00:01
                profile: custom
                characteristics:
                  - {uuid: 2A39, codec: raw, direction: write, topic: control}
            """
        let hub = try await env.broker.client()
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let bridgeState = try await hub.subscribe("gatt2mqtt/bridge/state")
        var bridge = try env.startBridge(devices: devices)
        #expect(await collect(bridgeState, count: 1).first?.payloadString == #"{"state":"online"}"#)
        try await hub.publish(topic: "gatt2mqtt/heart/control/write", payload: Array("01".utf8), qos: .atLeastOnce)
        let queued = await collect(responses, count: 1)
        #expect(queued.first?.payloadString.contains(#""status":"queued""#) == true, "\(queued.map(\.payloadString))")

        kill(bridge.processIdentifier, SIGKILL)
        bridge.waitUntilExit()
        #expect(bridge.terminationReason == .uncaughtSignal)
        try Self.setInRange(env, "C0:FF:EE:00:00:01", true)
        bridge = try env.startBridge(devices: devices)

        let after = await collect(responses, count: 3, timeout: .seconds(15))
        let statuses = after.compactMap { m -> String? in
            guard let s = try? JSONSerialization.jsonObject(with: Data(m.payload)) as? [String: Any] else { return nil }
            return s["status"] as? String
        }
        #expect(statuses.filter { $0 == "ok" }.count == 1, "\(after.map(\.payloadString))")
        #expect(!statuses.contains("error"))
    }
}

extension RunEndToEndTests {
    /// The broker dies (SIGKILL) and comes back empty on the same port: the bridge reconnects,
    /// republishes its retained topics, and commands work again.
    @Test func brokerRestartRepublishesAndCommandsFlow() async throws {
        let env = try EndToEnd()
        defer { env.stop() }
        var hub = try await env.broker.client()
        let availability = try await hub.subscribe("gatt2mqtt/heart/availability")
        _ = try env.startBridge(devices: """
              - id: heart
                address: C0:FF:EE:00:00:01
                profile: custom
                characteristics:
                  - {uuid: 2A39, codec: raw, direction: write, topic: control}
            """)
        #expect(await collect(availability, count: 1).first?.payloadString == #"{"state":"online"}"#)
        await hub.disconnect()

        env.broker.kill()  // SIGKILL; the broker keeps nothing (persistence off)
        try env.broker.start()
        hub = try await env.broker.client()
        // Retained topics are back because the bridge published them again after reconnecting.
        let state = await collect(try await hub.subscribe("gatt2mqtt/bridge/state"), count: 1, timeout: .seconds(15))
        #expect(state.first?.payloadString == #"{"state":"online"}"#)
        let avail = await collect(try await hub.subscribe("gatt2mqtt/heart/availability"), count: 1, timeout: .seconds(5))
        #expect(avail.first?.payloadString == #"{"state":"online"}"#)
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        try await hub.publish(topic: "gatt2mqtt/heart/control/write", payload: Array("01".utf8), qos: .atLeastOnce)
        let r = await collect(responses, count: 1, timeout: .seconds(5))
        #expect(r.first?.payloadString == #"{"status":"ok","command":{"write":"control","payload":"01"}}"#)
        // …and retained: a hub that subscribes now gets it from the broker's store.
        let late = await collect(try await hub.subscribe("gatt2mqtt/heart/availability"), count: 1, timeout: .seconds(5))
        #expect(late.first?.retain == true && late.first?.payloadString == #"{"state":"online"}"#)
        await hub.disconnect()
    }
}

extension RunEndToEndTests {
    /// The emulator drops the link on the first write (a write request then fails with
    /// `Failed: Operation failed`, as bluetoothd does): the command ends `error`, the device goes
    /// offline, the bridge reconnects, and the next command succeeds.
    @Test func linkDroppedMidCommandThenRecovery() async throws {
        let env = try EndToEnd()
        defer { env.stop() }
        let faults = Process()
        faults.executableURL = URL(fileURLWithPath: "/usr/bin/gdbus")
        faults.arguments = ["call", "--address", env.bus, "--dest", "org.bluez", "--object-path", "/org/gatt2mqtt/Simulator",
                            "--method", "org.gatt2mqtt.Simulator1.SetFaults", "C0:FF:EE:00:00:01", "{'DropLinkOnWrite': <uint32 1>}"]
        faults.standardOutput = FileHandle.nullDevice
        try faults.run()
        faults.waitUntilExit()
        #expect(faults.terminationStatus == 0)
        let hub = try await env.broker.client()
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let availability = try await hub.subscribe("gatt2mqtt/heart/availability")
        _ = try env.startBridge(devices: """
              - id: heart
                address: C0:FF:EE:00:00:01
                profile: custom
                characteristics:
                  - {uuid: 2A39, codec: raw, direction: write, topic: control}
            """)
        #expect(await collect(availability, count: 1).first?.payloadString == #"{"state":"online"}"#)
        try await hub.publish(topic: "gatt2mqtt/heart/control/write", payload: Array("01".utf8), qos: .atLeastOnce)
        let failed = await collect(responses, count: 1, timeout: .seconds(10))
        #expect(failed.first?.payloadString.contains(#""status":"error""#) == true, "\(failed.map(\.payloadString))")
        let back = await collect(availability, count: 2, timeout: .seconds(15))
        #expect(back.map(\.payloadString) == [#"{"state":"offline"}"#, #"{"state":"online"}"#])
        try await hub.publish(topic: "gatt2mqtt/heart/control/write", payload: Array("01".utf8), qos: .atLeastOnce)
        let ok = await collect(responses, count: 1, timeout: .seconds(10))
        #expect(ok.first?.payloadString == #"{"status":"ok","command":{"write":"control","payload":"01"}}"#)
        await hub.disconnect()
    }
}
