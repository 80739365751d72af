import Foundation
import Mosquitto
import Reactor
import TestSupport
import Testing

/// One end-to-end environment: a broker, `gatt2mqtt simulate` with `devices`, a state directory.
/// `startBridge` runs `gatt2mqtt run` on a configuration whose `devices:` section is given.
/// The test's hub clients run on ``loop`` (disconnect them before ``stop()``).
final class EndToEnd {
    let broker: MosquittoBroker
    let loop = EventLoop(name: "t-e2e-hub")
    let simulator: Process
    let bus: String
    let directory: TemporaryDirectory
    var bridge: Process?

    /// Whether this environment still holds its ``Slots/processHeavy`` slot.
    private var holdsSlot = true

    init(simulate devices: [String] = []) async throws {
        await Slots.processHeavy.acquire()
        do {
            broker = try await MosquittoBroker.started()
            (simulator, bus) = try await BluetoothCLITests.simulate(devices)
            directory = try TemporaryDirectory()
        } catch {
            Slots.processHeavy.release()
            throw error
        }
    }

    /// - Parameters:
    ///   - mqtt: extra `mqtt:` keys (indented lines), e.g. a short `reconnect_max`.
    ///   - bus: the D-Bus address the bridge uses (default: the simulator's).
    ///   - adapter: `bluetooth.adapter`.
    ///   - adapters: `bluetooth.adapters` instead, when given.
    ///   - logLevel: the bridge's `--log-level`; its stderr goes to ``log`` (``bridgeLog()``).
    func startBridge(devices yaml: String, mqtt: String = "", bus: String? = nil, adapter: String = "hci0", adapters: [String]? = nil,
                     logLevel: String = "warning", environment: [String: String] = [:]) throws -> Process {
        let config = directory.path + "/bridge.yaml"
        try """
            mqtt:
              url: mqtt://127.0.0.1:\(broker.port)
            \(mqtt)
            bluetooth:
              bus_address: \(bus ?? self.bus)
              \(adapters.map { "adapters: [\($0.joined(separator: ", "))]" } ?? "adapter: \(adapter)")
            database:
              path: \(directory.path)/state.sqlite
            devices:
            \(yaml)
            """.write(toFile: config, atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: log, contents: nil)  // each bridge's log anew
        let p = try launchBridge(config: config, logLevel: logLevel, log: log, environment: environment)
        bridge = p
        return p
    }

    /// The `devices:` entry of the simulator's default device, the heart-rate sensor: its
    /// measurement and battery decoded by built-in layouts, its control point written raw.
    static let heart = """
          - id: heart
            address: C0:FF:EE:00:00:01
            profile: custom
            characteristics:
              - {uuid: 2A37, codec: layout, layout: "builtin:heart_rate_measurement", topic: heart_rate}
              - {uuid: 2A19, codec: layout, layout: "builtin:battery_level", direction: [read, notify], topic: battery}
              - {uuid: 2A39, codec: raw, direction: write, topic: control}
        """

    /// Where the last bridge's stderr goes.
    var log: String { directory.path + "/bridge.log" }

    /// The last bridge's stderr so far.
    func bridgeLog() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// Calls a method of the simulator's control object (``SimulatorControl``); returns gdbus's
    /// output, or throws with its error.
    @discardableResult
    func control(_ method: String, _ args: String..., interface: String = "org.gatt2mqtt.Simulator1") throws -> String {
        try SimulatorControl(bus: bus).call(method, args, interface: interface)
    }

    /// Stops every process by pid.
    func stop() {
        if let bridge {
            if bridge.isRunning { reap(bridge, SIGKILL) }
        }
        reap(simulator)
        broker.stop()
        loop.shutdown()
        if holdsSlot {
            holdsSlot = false
            Slots.processHeavy.release()
        }
    }
}

/// The control object `/org/gatt2mqtt/Simulator` of a `gatt2mqtt simulate` on `bus`, called with
/// gdbus (an independent D-Bus client).
struct SimulatorControl {
    let bus: String

    /// Calls `interface.method` on `path` (the control object unless told) with `args` (GVariant
    /// text); returns gdbus's output, or throws with its error.
    @discardableResult
    func call(_ method: String, _ args: [String], path: String = "/org/gatt2mqtt/Simulator",
              interface: String = "org.gatt2mqtt.Simulator1") throws -> String {
        try runTool("/usr/bin/gdbus", ["call", "--address", bus, "--dest", "org.bluez", "--object-path", path,
                                       "--method", "\(interface).\(method)"] + args)
    }

    /// The emulator's record of the writes a device received on `uuid` (`Received`, docs/bluez.md),
    /// one `Value` text per write, e.g. `[byte 0x01]`.
    func writes(_ address: String, on uuid: String) throws -> [String] {
        let text = try call("Received", [address])
        return text.components(separatedBy: "}, {").filter { $0.contains("'WriteValue'") && $0.lowercased().contains(uuid.lowercased()) }
            .map { r in
                guard let v = r.range(of: "'Value': <") else { return "" }
                return String(r[v.upperBound...].prefix { $0 != ">" })
            }
    }
}

/// The whole product as a user runs it: `mosquitto`, `gatt2mqtt simulate` (emulated BlueZ on a
/// private bus) and `gatt2mqtt run` as separate processes; a hub client talks MQTT only.
@Suite(.serialized, .timeLimit(.minutes(5))) struct RunEndToEndTests {
    @Test func bridgeProcessAgainstBrokerAndEmulator() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let heartRate = try await hub.subscribe("gatt2mqtt/heart/heart_rate")
        let availability = try await hub.subscribe("gatt2mqtt/heart/availability")
        let bridge = try env.startBridge(devices: EndToEnd.heart)

        let online = await collect(availability, count: 1)
        #expect(online.first?.payloadString == #"{"state":"online"}"#)
        // Home Assistant gets the heart rate itself, in bpm, not the whole decoded object.
        let hrConfig = await collect(try await hub.subscribe("homeassistant/sensor/gatt2mqtt_heart/heart_rate/config"), count: 1)
        #expect(hrConfig.first?.retain == true && hrConfig.first?.payloadString.contains(#""unit_of_measurement":"bpm""#) == true,
                "\(hrConfig.map(\.payloadString))")
        // Notifications of the simulated sensor arrive decoded.
        let hr = await collect(heartRate, count: 2)
        #expect(hr.count == 2 && hr.allSatisfy { $0.payloadString.contains(#""heart_rate":"#) })
        // Retained, so a subscriber that comes later (Home Assistant's json_attributes_topic after
        // a restart) gets the last value at once.
        let late = await collect(try await hub.subscribe("gatt2mqtt/heart/heart_rate"), count: 1)
        #expect(late.first?.retain == true && late.first?.payloadString.contains(#""heart_rate":"#) == true)
        // A read through /get and a raw write through <topic>/write, each answered.
        try await hub.publish(topic: "gatt2mqtt/heart/get", payload: Array(#"{"battery":""}"#.utf8), qos: .atLeastOnce)
        let r1 = await collect(responses, count: 1)
        #expect(r1.first?.payloadString == #"{"status":"ok","command":{"get":["battery"]},"data":{"battery_level":85}}"#)
        try await hub.publish(topic: "gatt2mqtt/heart/control/write", payload: Array("02".utf8), qos: .atLeastOnce)
        let r2 = await collect(responses, count: 1)
        #expect(r2.first?.payloadString.contains(#""code":"bluetooth_error""#) == true, "the simulated control point refuses 02 with ATT 0x80")
        // Graceful stop: offline retained, exit status 0.
        kill(bridge.processIdentifier, SIGTERM)
        await bridge.exited()
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
        let env = try await EndToEnd(simulate: ["--device", "gopro@C0:FF:EE:00:00:01", "--device", "rokid@C0:FF:EE:00:00:02"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
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
        // The camera's status push (encoding 1) reaches the retained state: waited for (deadline).
        let states = await Self.collectUntil(cameraState, { $0.payloadString.contains(#""encoding":true"#) })
        #expect(states.contains { $0.payloadString.contains(#""encoding":true"#) }, "\(states.map(\.payloadString))")
        // The response can go out before the state is republished: the retained state a late
        // subscriber gets first may be the one from before, so wait for the update (deadline).
        let glassesState = await Self.collectUntil(try await hub.subscribe("gatt2mqtt/glasses"), { $0.payloadString.contains(#""brightness":8"#) })
        #expect(glassesState.last?.payloadString.contains(#""brightness":8"#) == true, "\(glassesState.map(\.payloadString))")
        // The camera's hardware info (Get Hardware Info at connect) is its Home Assistant device's model.
        let battery = try await hub.subscribe("homeassistant/sensor/gatt2mqtt_camera/battery/config")
        let configs = await Self.collectUntil(battery, { $0.payloadString.contains(#""model":"HERO12 Black""#) })
        #expect(configs.last?.payloadString.contains(#""serial_number":"C3501324501234""#) == true, "\(configs.map(\.payloadString))")
        kill(bridge.processIdentifier, SIGTERM)
        await bridge.exited()
        await hub.disconnect()
    }
}

extension RunEndToEndTests {
    /// Puts a simulated device in or out of range through the emulator's control interface,
    /// with an independent D-Bus client (gdbus).
    static func setInRange(_ env: EndToEnd, _ address: String, _ on: Bool) async throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/gdbus")
        p.arguments = ["call", "--address", env.bus, "--dest", "org.bluez", "--object-path", "/org/gatt2mqtt/Simulator",
                       "--method", "org.gatt2mqtt.Simulator1.SetInRange", address, on ? "true" : "false"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        await p.exited()
        #expect(p.terminationStatus == 0)
    }

    /// A command queued for an away device survives `kill -9` of the bridge and is delivered
    /// exactly once after the restart, when the device comes into range.
    @Test func queuedCommandSurvivesSIGKILLAndIsDeliveredOnce() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        try await Self.setInRange(env, "C0:FF:EE:00:00:01", false)
        let devices = """
              - id: heart
                address: C0:FF:EE:00:00:01
                profile: custom
                characteristics:
                  - {uuid: 2A39, codec: raw, direction: write, topic: control}
            """
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let bridgeState = try await hub.subscribe("gatt2mqtt/bridge/state")
        var bridge = try env.startBridge(devices: devices)
        #expect(await collect(bridgeState, count: 1).first?.payloadString == #"{"state":"online"}"#)
        try await hub.publish(topic: "gatt2mqtt/heart/control/write", payload: Array("01".utf8), qos: .atLeastOnce)
        let queued = await collect(responses, count: 1)
        #expect(queued.first?.payloadString.contains(#""status":"queued""#) == true, "\(queued.map(\.payloadString))")

        kill(bridge.processIdentifier, SIGKILL)
        await bridge.exited()
        #expect(bridge.terminationReason == .uncaughtSignal)
        try await Self.setInRange(env, "C0:FF:EE:00:00:01", true)
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
        let env = try await EndToEnd()
        defer { env.stop() }
        var hub = try await env.broker.client(loop: env.loop)
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
        hub = try await env.broker.client(loop: env.loop)
        // Retained topics are back because the bridge published them again after reconnecting.
        let state = await collect(try await hub.subscribe("gatt2mqtt/bridge/state"), count: 1, timeout: .seconds(15))
        #expect(state.first?.payloadString == #"{"state":"online"}"#)
        let avail = await collect(try await hub.subscribe("gatt2mqtt/heart/availability"), count: 1, timeout: .seconds(30))
        #expect(avail.first?.payloadString == #"{"state":"online"}"#)
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        try await hub.publish(topic: "gatt2mqtt/heart/control/write", payload: Array("01".utf8), qos: .atLeastOnce)
        let r = await collect(responses, count: 1, timeout: .seconds(30))
        #expect(r.first?.payloadString == #"{"status":"ok","command":{"write":"control","payload":"01"}}"#)
        // …and retained: a hub that subscribes now gets it from the broker's store.
        let late = await collect(try await hub.subscribe("gatt2mqtt/heart/availability"), count: 1, timeout: .seconds(30))
        #expect(late.first?.retain == true && late.first?.payloadString == #"{"state":"online"}"#)
        await hub.disconnect()
    }
}

extension RunEndToEndTests {
    /// The emulator drops the link on the first write (a write request then fails with
    /// `Failed: Operation failed`, as bluetoothd does): the command ends `error`, the device goes
    /// offline, the bridge reconnects, and the next command succeeds.
    @Test func linkDroppedMidCommandThenRecovery() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        let faults = Process()
        faults.executableURL = URL(fileURLWithPath: "/usr/bin/gdbus")
        faults.arguments = ["call", "--address", env.bus, "--dest", "org.bluez", "--object-path", "/org/gatt2mqtt/Simulator",
                            "--method", "org.gatt2mqtt.Simulator1.SetFaults", "C0:FF:EE:00:00:01", "{'DropLinkOnWrite': <uint32 1>}"]
        faults.standardOutput = FileHandle.nullDevice
        try faults.run()
        await faults.exited()
        #expect(faults.terminationStatus == 0)
        let hub = try await env.broker.client(loop: env.loop)
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

// MARK: Faults across processes: absent devices, deadlines, pushes, garbage, bad input

extension RunEndToEndTests {
    static let heartControl = """
          - id: heart
            address: C0:FF:EE:00:00:01
            profile: custom
            characteristics:
              - {uuid: 2A39, codec: raw, direction: write, topic: control}
        """

    /// The JSON objects of `messages` (those that parse).
    static func objects(_ messages: [MQTTMessage]) -> [[String: Any]] {
        messages.compactMap { try? JSONSerialization.jsonObject(with: Data($0.payload)) as? [String: Any] }
    }

    /// Collects from `subscription` until a message satisfies `predicate` (or `timeout`); returns
    /// everything collected.
    static func collectUntil(_ subscription: MQTTSubscription, _ predicate: @escaping @Sendable (MQTTMessage) -> Bool,
                        timeout: Duration = .seconds(10)) async -> [MQTTMessage] {
        await TestSupport.collectUntil(subscription, timeout: timeout, predicate)
    }

    /// The emulator's record of the writes a device received on `uuid` (``SimulatorControl/writes(_:on:)``).
    static func writes(_ env: EndToEnd, _ address: String, on uuid: String) throws -> [String] {
        try SimulatorControl(bus: env.bus).writes(address, on: uuid)
    }

    /// A command to a device that is away is answered `queued` with the caller's transaction;
    /// when the device comes into range it is written once and answered `ok`.
    @Test func absentDeviceCommandQueuedThenDeliveredOnce() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        try env.control("SetInRange", "C0:FF:EE:00:00:01", "false")
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let bridgeState = try await hub.subscribe("gatt2mqtt/bridge/state")
        _ = try env.startBridge(devices: Self.heartControl)
        #expect(await collect(bridgeState, count: 1).first?.payloadString == #"{"state":"online"}"#)
        try await hub.publish(topic: "gatt2mqtt/heart/set", payload: Array(#"{"control":"01","transaction":"away-1"}"#.utf8), qos: .atLeastOnce)
        let queued = await collect(responses, count: 1)
        #expect(queued.first?.payloadString == #"{"transaction":"away-1","status":"queued","command":{"control":"01"}}"#)
        #expect(try Self.writes(env, "C0:FF:EE:00:00:01", on: "2a39").isEmpty)

        try env.control("SetInRange", "C0:FF:EE:00:00:01", "true")
        let rest = await Self.collectUntil(responses, { $0.payloadString.contains(#""status":"ok""#) }, timeout: .seconds(20))
        #expect(Self.objects(rest).map { $0["status"] as? String } == ["sent", "ok"], "\(rest.map(\.payloadString))")
        #expect(Self.objects(rest).allSatisfy { $0["transaction"] as? String == "away-1" })
        #expect(try Self.writes(env, "C0:FF:EE:00:00:01", on: "2a39") == ["[byte 0x01]"])
        await hub.disconnect()
    }

    /// A command that waits longer than the device's `offline.deadline` ends `expired` with the
    /// caller's transaction, and the device never receives it, not even once it is back.
    @Test func deadlineExpiryIsAnsweredAndNeverDelivered() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        try env.control("SetInRange", "C0:FF:EE:00:00:01", "false")
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let availability = try await hub.subscribe("gatt2mqtt/heart/availability")
        let bridgeState = try await hub.subscribe("gatt2mqtt/bridge/state")
        _ = try env.startBridge(devices: Self.heartControl + "\n    offline: {policy: queue, deadline: 1500ms}")
        #expect(await collect(bridgeState, count: 1).first?.payloadString == #"{"state":"online"}"#)
        let sent = ContinuousClock.now
        try await hub.publish(topic: "gatt2mqtt/heart/set", payload: Array(#"{"control":"02","transaction":"late-1"}"#.utf8), qos: .atLeastOnce)
        let r = await collect(responses, count: 2, timeout: .seconds(10))
        let waited = ContinuousClock.now - sent
        let o = Self.objects(r)
        #expect(o.map { $0["status"] as? String } == ["queued", "expired"], "\(r.map(\.payloadString))")
        #expect(o.allSatisfy { $0["transaction"] as? String == "late-1" })
        #expect((o.last?["error"] as? [String: Any])?["code"] as? String == "device_offline")
        // 1500ms, not rounded down to 1 s (the deadline keeps its sub-second part).
        #expect(waited >= .milliseconds(1400), "expired after \(waited)")

        try env.control("SetInRange", "C0:FF:EE:00:00:01", "true")
        let online = await Self.collectUntil(availability, { $0.payloadString == #"{"state":"online"}"# }, timeout: .seconds(20))
        #expect(online.last?.payloadString == #"{"state":"online"}"#)
        // A later command goes through, and it is the only write the device ever got.
        try await hub.publish(topic: "gatt2mqtt/heart/set", payload: Array(#"{"control":"01","transaction":"next"}"#.utf8), qos: .atLeastOnce)
        let next = await collect(responses, count: 1)
        #expect(next.first?.payloadString == #"{"transaction":"next","status":"ok","command":{"control":"01"}}"#)
        #expect(try Self.writes(env, "C0:FF:EE:00:00:01", on: "2a39") == ["[byte 0x01]"])
        await hub.disconnect()
    }

    /// The camera pushes a new battery level (status 70, through the simulator's
    /// `org.gatt2mqtt.SimulatedGoPro1.SetStatus`): the retained device state follows.
    @Test func goProStatusPushReachesRetainedState() async throws {
        let env = try await EndToEnd(simulate: ["--device", "gopro@C0:FF:EE:00:00:01"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let state = try await hub.subscribe("gatt2mqtt/camera")
        _ = try env.startBridge(devices: #"  - {id: camera, address: "C0:FF:EE:00:00:01", profile: gopro}"#)
        // Registering for status updates on connect answers with the current values (84 %).
        let first = await Self.collectUntil(state, { $0.payloadString.contains(#""internal_battery_percentage":84"#) })
        #expect(first.last?.payloadString.contains(#""internal_battery_percentage":84"#) == true, "\(first.map(\.payloadString))")

        try env.control("SetStatus", "C0:FF:EE:00:00:01", "70", "[50]", interface: "org.gatt2mqtt.SimulatedGoPro1")
        let pushed = await Self.collectUntil(state, { $0.payloadString.contains(#""internal_battery_percentage":50"#) })
        #expect(pushed.last?.payloadString.contains(#""internal_battery_percentage":50"#) == true, "\(pushed.map(\.payloadString))")
        #expect(pushed.last?.retain == false, "a live publish reaches current subscribers without the retain flag")
        // A hub that subscribes now gets the new value from the broker's retained store.
        let late = await collect(try await hub.subscribe("gatt2mqtt/camera"), count: 1)
        #expect(late.first?.retain == true && late.first?.payloadString.contains(#""internal_battery_percentage":50"#) == true)
        // The control method refuses an unknown camera with a clear error.
        #expect(throws: HarnessError.self) { try env.control("SetStatus", "C0:FF:EE:00:00:09", "70", "[1]", interface: "org.gatt2mqtt.SimulatedGoPro1") }
        await hub.disconnect()
    }

    /// Garbage notified by a GoPro and by Rokid glasses: a `device_error` event on
    /// `bridge/event` names the device and what is wrong, the state is unchanged, and each
    /// device still answers its next command `ok`.
    @Test func garbageFromDevicesIsReportedAndHarmless() async throws {
        let env = try await EndToEnd(simulate: ["--device", "gopro@C0:FF:EE:00:00:01", "--device", "rokid@C0:FF:EE:00:00:02"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let availability = try await hub.subscribe("gatt2mqtt/+/availability")
        let events = try await hub.subscribe("gatt2mqtt/bridge/event")
        let camera = try await hub.subscribe("gatt2mqtt/camera/response")
        let glasses = try await hub.subscribe("gatt2mqtt/glasses/response")
        _ = try env.startBridge(devices: """
              - {id: camera, address: "C0:FF:EE:00:00:01", profile: gopro}
              - {id: glasses, address: "C0:FF:EE:00:00:02", profile: rokid}
            """)
        #expect(await collect(availability, count: 2).map(\.payloadString) == [#"{"state":"online"}"#, #"{"state":"online"}"#])
        // Both states as they are before the garbage (the camera's after its registration answers).
        let glassesState = try await hub.subscribe("gatt2mqtt/glasses")
        try await hub.publish(topic: "gatt2mqtt/glasses/set", payload: Array(#"{"command":"set_brightness","value":5,"transaction":"b5"}"#.utf8), qos: .atLeastOnce)
        #expect(await collect(glasses, count: 1).first?.payloadString.hasPrefix(#"{"transaction":"b5","status":"ok""#) == true)
        // The retained state follows the response: wait for it, not only for the answer.
        #expect(await Self.collectUntil(glassesState, { $0.payloadString.contains(#""brightness":5"#) }).last?.payloadString.contains(#""brightness":5"#) == true)
        // The camera's start-up registers statuses, then settings, then reads its hardware
        // info: wait for the last of them.
        let cameraState = try await hub.subscribe("gatt2mqtt/camera")
        let settled = await Self.collectUntil(cameraState, { $0.payloadString.contains(#""serial_number""#) })
        #expect(settled.last?.payloadString.contains(#""video_lens""#) == true, "\(settled.map(\.payloadString))")
        let before = await collect(try await hub.subscribe("gatt2mqtt/+"), count: 2, timeout: .seconds(30))
        #expect(before.count == 2)

        // GoPro: a continuation packet with no start packet, on the query response characteristic.
        #expect(try env.control("Notify", "C0:FF:EE:00:00:01", "b5f90077-aa8d-11e3-9046-0002a5d5c51b", "[0x80, 0xde, 0xad]").contains("true"))
        // Rokid: a Caps header whose size (0xDEADBEEF) is far over the limit.
        #expect(try env.control("Notify", "C0:FF:EE:00:00:02", "9202", "[0xde, 0xad, 0xbe, 0xef, 0x05]").contains("true"))
        var e: [[String: Any]] = []
        _ = await TestSupport.collectUntil(events, timeout: .seconds(10)) { message in
            e += Self.objects([message]).filter { $0["type"] as? String == "device_error" }
            return e.count >= 2
        }
        let cameraError = e.first { $0["device"] as? String == "camera" }?["message"] as? String
        let glassesError = e.first { $0["device"] as? String == "glasses" }?["message"] as? String
        #expect(cameraError?.contains("GoPro") == true, "\(e)")
        #expect(glassesError?.contains("Rokid") == true, "\(e)")

        // State unchanged: the retained states are still the ones from before.
        let after = await collect(try await hub.subscribe("gatt2mqtt/+"), count: 2, timeout: .seconds(30))
        #expect(Set(after.map(\.payloadString)) == Set(before.map(\.payloadString)))
        // Both answer their next command.
        try await hub.publish(topic: "gatt2mqtt/camera/set", payload: Array(#"{"query":"get_status_values","transaction":"q1"}"#.utf8), qos: .atLeastOnce)
        try await hub.publish(topic: "gatt2mqtt/glasses/set", payload: Array(#"{"command":"set_volume","value":3,"transaction":"v3"}"#.utf8), qos: .atLeastOnce)
        #expect(await collect(camera, count: 1).first?.payloadString.hasPrefix(#"{"transaction":"q1","status":"ok""#) == true)
        #expect(await collect(glasses, count: 1).first?.payloadString.hasPrefix(#"{"transaction":"v3","status":"ok""#) == true)

        // Rokid: a plausible header (4096 bytes, version 5) and nothing more. The stream reader
        // would wait for the rest and swallow the next answers; a partial object that gets no
        // more bytes for 1 s is dropped (and reported) when the next notification arrives.
        #expect(try env.control("Notify", "C0:FF:EE:00:00:02", "9202", "[0x00, 0x00, 0x10, 0x00, 0x05, 0x01]").contains("true"))
        // The 1 s is the bridge's, in another process: no event says when its clock started
        // (when it got the header), so the gap is waited for, and a command's answer that came
        // within 1 s of the header in the bridge's time (a busy machine: the header arrived late)
        // is swallowed by the partial object; the command then gets no answer and is sent again,
        // until one is answered `ok` (each after the same gap), 40 s at most.
        let deadline = ContinuousClock.now + .seconds(40)
        var attempt = 0, answer = "nothing"
        while ContinuousClock.now < deadline {
            attempt += 1
            try await Task.sleep(for: .milliseconds(1100))  // a gap of wall time, not a wait for an event
            let transaction = "v4-\(attempt)"
            try await hub.publish(topic: "gatt2mqtt/glasses/set",
                                  payload: Array(#"{"command":"set_volume","value":4,"transaction":"\#(transaction)"}"#.utf8), qos: .atLeastOnce)
            let got = await Self.collectUntil(glasses, { $0.payloadString.contains(#""transaction":"\#(transaction)""#) },
                                              timeout: deadline - ContinuousClock.now)
            answer = got.last?.payloadString ?? "nothing"
            if answer.hasPrefix(#"{"transaction":"\#(transaction)","status":"ok""#) { break }
        }
        #expect(answer.contains(#""status":"ok""#), "\(attempt) attempts, the last answered \(answer)")
        let dropped = await Self.collectUntil(events, { $0.payloadString.contains("incomplete") })
        // 6 bytes (the header) when the first command was answered; more if it was swallowed.
        let what = attempt == 1 ? "6 bytes of an incomplete Caps object" : "bytes of an incomplete Caps object"
        #expect(dropped.contains { $0.payloadString.contains(#""device":"glasses""#) && $0.payloadString.contains(what) },
                "\(dropped.map(\.payloadString))")
        await hub.disconnect()
    }

    /// Malformed JSON, an unknown command, an out-of-range value and an unknown device, sent to
    /// the bridge process over MQTT: `error` answers with stable codes, and the bridge still works.
    @Test func badCommandsGetStableErrorCodes() async throws {
        let env = try await EndToEnd(simulate: ["--device", "rokid@C0:FF:EE:00:00:02"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let availability = try await hub.subscribe("gatt2mqtt/glasses/availability")
        let responses = try await hub.subscribe("gatt2mqtt/glasses/response")
        let events = try await hub.subscribe("gatt2mqtt/bridge/event")
        _ = try env.startBridge(devices: #"  - {id: glasses, address: "C0:FF:EE:00:00:02", profile: rokid}"#)
        #expect(await collect(availability, count: 1).first?.payloadString == #"{"state":"online"}"#)
        for payload in ["{not json", #"{"command":"self_destruct","transaction":"u1"}"#,
                        #"{"command":"set_brightness","value":99,"transaction":"r1"}"#, #"[]"#] {
            try await hub.publish(topic: "gatt2mqtt/glasses/set", payload: Array(payload.utf8), qos: .atLeastOnce)
        }
        try await hub.publish(topic: "gatt2mqtt/ghost/set", payload: Array(#"{"command":"x"}"#.utf8), qos: .atLeastOnce)
        try await hub.publish(topic: "gatt2mqtt/glasses/set", payload: Array(#"{"command":"set_brightness","value":9,"transaction":"ok1"}"#.utf8), qos: .atLeastOnce)
        let r = Self.objects(await collect(responses, count: 5))
        func code(_ o: [String: Any]) -> String? { (o["error"] as? [String: Any])?["code"] as? String }
        // Payloads that do not parse are answered by the router, the others by the device
        // session: match them by transaction and message, not by order.
        func answer(_ transaction: String) -> [String: Any]? { r.first { $0["transaction"] as? String == transaction } }
        func message(_ o: [String: Any]) -> String { (o["error"] as? [String: Any])?["message"] as? String ?? "" }
        #expect(r.count == 5)
        #expect(r.filter { $0["status"] as? String == "error" }.count == 4)
        #expect(answer("u1").map(code) == "unknown_command")
        #expect(answer("r1").map(code) == "invalid_value" && answer("r1").map(message)?.contains("99") == true)
        let anonymous = r.filter { $0["transaction"] == nil }
        #expect(Set(anonymous.compactMap(code)) == ["invalid_json", "invalid_value"])
        #expect(anonymous.contains { message($0) == "empty command array" })
        #expect(answer("ok1")?["status"] as? String == "ok")
        let e = await Self.collectUntil(events, { $0.payloadString.contains("ghost") })
        #expect(e.contains { $0.payloadString.contains(#""type":"command_rejected""#) && $0.payloadString.contains("no device 'ghost'") })
        await hub.disconnect()
    }

    /// Glasses that refuse the bridge's AUTH_REQ (`simulate --rokid-auth taken`: AUTH_RESP −6,
    /// rokid-caps.md §5.2): a `device_error` event with code `auth_failed`, and a command ends
    /// `error`/`auth_failed` naming the retCode at once instead of timing out.
    @Test func refusedAuthenticationEndsCommandsWithAuthFailed() async throws {
        let env = try await EndToEnd(simulate: ["--device", "rokid@C0:FF:EE:00:00:02", "--rokid-auth", "taken"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/glasses/response")
        let events = try await hub.subscribe("gatt2mqtt/bridge/event")
        _ = try env.startBridge(devices: #"  - {id: glasses, address: "C0:FF:EE:00:00:02", profile: rokid}"#)
        let e = await Self.collectUntil(events, { $0.payloadString.contains(#""type":"device_error""#) })
        let refusal = Self.objects(e).first { $0["type"] as? String == "device_error" }
        #expect(refusal?["device"] as? String == "glasses" && refusal?["code"] as? String == "auth_failed", "\(e.map(\.payloadString))")
        #expect((refusal?["message"] as? String)?.contains("AUTH_RESP retCode -6 (already connected or rejected)") == true)
        let started = ContinuousClock.now
        try await hub.publish(topic: "gatt2mqtt/glasses/set", payload: Array(#"{"command":"set_brightness","value":4,"transaction":"a1"}"#.utf8),
                              qos: .atLeastOnce)
        let r = Self.objects(await collect(responses, count: 1)).first
        let error = r?["error"] as? [String: Any]
        #expect(r?["transaction"] as? String == "a1" && r?["status"] as? String == "error")
        #expect(error?["code"] as? String == "auth_failed" && (error?["message"] as? String)?.contains("retCode -6") == true, "\(String(describing: r))")
        #expect(ContinuousClock.now - started < .seconds(4), "answered at once, not after the 5 s command timeout")
        await hub.disconnect()
    }
}

extension RunEndToEndTests {
    /// One device away must not keep another from connecting (shared/spec/bridge.md point 2):
    /// with the glasses out of range from the start, the camera still comes online and answers.
    /// (Connects are serialised per adapter; an attempt holds the gate for at most 10 s, so the
    /// camera waits at most that long when the glasses' attempt started first.)
    @Test func awayDeviceDoesNotBlockAnother() async throws {
        let env = try await EndToEnd(simulate: ["--device", "gopro@C0:FF:EE:00:00:01", "--device", "rokid@C0:FF:EE:00:00:02"])
        defer { env.stop() }
        try env.control("SetInRange", "C0:FF:EE:00:00:02", "false")
        let hub = try await env.broker.client(loop: env.loop)
        let availability = try await hub.subscribe("gatt2mqtt/camera/availability")
        let camera = try await hub.subscribe("gatt2mqtt/camera/response")
        _ = try env.startBridge(devices: """
              - {id: glasses, address: "C0:FF:EE:00:00:02", profile: rokid}
              - {id: camera, address: "C0:FF:EE:00:00:01", profile: gopro}
            """)
        let online = await collect(availability, count: 1, timeout: .seconds(15))
        #expect(online.first?.payloadString == #"{"state":"online"}"#)
        try await hub.publish(topic: "gatt2mqtt/camera/set", payload: Array(#"{"query":"get_status_values","transaction":"q"}"#.utf8), qos: .atLeastOnce)
        #expect(await collect(camera, count: 1).first?.payloadString.hasPrefix(#"{"transaction":"q","status":"ok""#) == true)
        await hub.disconnect()
    }
}
