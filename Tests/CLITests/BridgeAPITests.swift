import Foundation
import Mosquitto
import TestSupport
import Testing

/// `bridge/request/…` end to end: a real mosquitto, the emulator, `gatt2mqtt run`; a hub that
/// speaks MQTT only (docs/bridge-api.md).
@Suite(.serialized, .timeLimit(.minutes(6))) struct BridgeAPITests {
    /// The first message on `subscription` that `matches`, within `timeout`.
    static func first(_ subscription: MQTTSubscription, timeout: Duration = .seconds(15),
                      where matches: @escaping @Sendable (MQTTMessage) -> Bool) async -> MQTTMessage? {
        await collectUntil(subscription, timeout: timeout, matches).last.flatMap { matches($0) ? $0 : nil }
    }

    /// Sends `bridge/request/<action>` with a fresh transaction and returns the response that
    /// echoes it (parsed), from `responses` (a subscription to `gatt2mqtt/bridge/response/#`).
    static func request(_ hub: MQTTClient, _ responses: MQTTSubscription, _ action: String, _ body: String = "{}",
                        timeout: Duration = .seconds(20)) async throws -> [String: Any] {
        let transaction = "t\(UInt32.random(in: 0...UInt32.max))"
        var payload = body.trimmingCharacters(in: .whitespaces)
        payload = payload == "{}" ? #"{"transaction":"\#(transaction)"}"# : #"{"transaction":"\#(transaction)","# + payload.dropFirst()
        try await hub.publish(topic: "gatt2mqtt/bridge/request/\(action)", payload: Array(payload.utf8), qos: .atLeastOnce)
        let m = await first(responses, timeout: timeout) { $0.payloadString.contains(#""transaction":"\#(transaction)""#) }
        let reply = try #require(m, "no response to \(action) \(body)")
        #expect(reply.topic == "gatt2mqtt/bridge/response/\(action)")
        return try #require(try JSONSerialization.jsonObject(with: Data(reply.payload)) as? [String: Any])
    }

    static func data(_ r: [String: Any]) -> [String: Any] { r["data"] as? [String: Any] ?? [:] }

    /// BlueZ's object tree on `bus` as gdbus prints it (an independent D-Bus client).
    static func bluezObjects(_ bus: String) async throws -> String {
        try await offThePool { try gdbusObjects(bus) }
    }

    private static func gdbusObjects(_ bus: String) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/gdbus")
        p.arguments = ["call", "--address", bus, "--dest", "org.bluez", "--object-path", "/",
                       "--method", "org.freedesktop.DBus.ObjectManager.GetManagedObjects"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: o, as: UTF8.self)
    }

    static let heartRate = """
          - id: heart
            address: C0:FF:EE:00:00:03
            profile: custom
            characteristics:
              - {uuid: 2A37, codec: layout, layout: "builtin:heart_rate_measurement", topic: heart_rate}
        """

    /// scan → add (profile guessed from the scan) → use → rename → options → restart (the device
    /// comes back from the store) → remove with forget; the file's device is refused every change.
    @Test func scanAddUseRenameOptionsRemove() async throws {
        let env = try await EndToEnd(simulate: ["--device", "gopro@C0:FF:EE:00:00:01", "--device", "hr@C0:FF:EE:00:00:03",
                                          "--device", "thermo@C0:FF:EE:00:00:04"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let scan = try await hub.subscribe("gatt2mqtt/bridge/scan")
        let availability = try await hub.subscribe("gatt2mqtt/+/availability")
        let discovery = try await hub.subscribe("homeassistant/+/+/+/config")
        _ = try env.startBridge(devices: Self.heartRate)
        #expect(await Self.first(availability) { $0.topic == "gatt2mqtt/heart/availability" && $0.payloadString.contains("online") } != nil)

        // Scan: every device in range, with what it advertises and a guess.
        let started = try await Self.request(hub, responses, "scan", #"{"seconds":20}"#)
        #expect(started["status"] as? String == "ok" && Self.data(started)["scanning"] as? Bool == true, "\(started)")
        let porch = try #require(await Self.first(scan) { $0.payloadString.contains("C0:FF:EE:00:00:04") })
        let sighting = try #require(try JSONSerialization.jsonObject(with: Data(porch.payload)) as? [String: Any])
        #expect(sighting["profile_guess"] as? String == "environmental_sensing" && sighting["configured"] as? Bool == false, "\(sighting)")
        #expect((sighting["service_uuids"] as? [String])?.contains("181A") == true && sighting["rssi"] is Int)
        let camera = try #require(await Self.first(scan) { $0.payloadString.contains("C0:FF:EE:00:00:01") })
        #expect(camera.payloadString.contains(#""manufacturer_data":{"0x02F2":"#) && camera.payloadString.contains(#""profile_guess":"gopro""#))
        // (The connected heart-rate sensor does not advertise: bluetoothd reports no sighting of it.)

        // Add without a profile: the scan's guess; connected, then its discovery is published.
        let temperature = try await hub.subscribe("gatt2mqtt/porch/temperature")
        let added = try await Self.request(hub, responses, "device/add", #"{"id":"porch","address":"c0:ff:ee:00:00:04"}"#)
        #expect(added["status"] as? String == "ok" && Self.data(added)["profile"] as? String == "environmental_sensing", "\(added)")
        #expect(await Self.first(availability) { $0.topic == "gatt2mqtt/porch/availability" && $0.payloadString.contains("online") } != nil)
        #expect(await Self.first(temperature) { $0.payloadString.contains(#""temperature":"#) } != nil)
        // Used like any device: a read through /get.
        let porchResponses = try await hub.subscribe("gatt2mqtt/porch/response")
        try await hub.publish(topic: "gatt2mqtt/porch/get", payload: Array(#"{"humidity":""}"#.utf8), qos: .atLeastOnce)
        let read = await collect(porchResponses, count: 1).first
        #expect(read?.payloadString.contains(#""status":"ok""#) == true && read?.payloadString.contains(#""humidity":"#) == true, "\(read?.payloadString ?? "none")")
        #expect(await Self.first(discovery) { $0.topic.contains("/gatt2mqtt_porch/") && !$0.payload.isEmpty } != nil)
        _ = try await Self.request(hub, responses, "scan", #"{"seconds":0}"#)

        // Refusals: duplicates, and any change to the file's device.
        let duplicate = try await Self.request(hub, responses, "device/add", #"{"id":"porch","address":"C0:FF:EE:00:00:09","profile":"heart_rate"}"#)
        #expect(duplicate["status"] as? String == "error" && (duplicate["error"] as? String)?.contains("exists already") == true)
        let sameAddress = try await Self.request(hub, responses, "device/add", #"{"id":"other","address":"C0:FF:EE:00:00:03","profile":"heart_rate"}"#)
        #expect((sameAddress["error"] as? String)?.contains("is already the device 'heart'") == true, "\(sameAddress)")
        for (action, body) in [("device/remove", #"{"id":"heart"}"#), ("device/rename", #"{"from":"heart","to":"h2"}"#),
                               ("device/options", #"{"id":"heart","options":{"command_timeout":"1s"}}"#)] {
            let refused = try await Self.request(hub, responses, action, body)
            #expect((refused["error"] as? String)?.contains("is defined in the configuration file") == true, "\(action): \(refused)")
        }

        // Rename: topics, retained state and discovery move.
        let renamed = try await Self.request(hub, responses, "device/rename", #"{"from":"porch","to":"garden"}"#)
        #expect(renamed["status"] as? String == "ok", "\(renamed)")
        #expect(await Self.first(discovery) { $0.topic.contains("/gatt2mqtt_porch/") && $0.payload.isEmpty } != nil)
        #expect(await Self.first(availability) { $0.topic == "gatt2mqtt/garden/availability" && $0.payloadString.contains("online") } != nil)
        // A retained message comes on subscribing, before a live marker published after it.
        let oldTopic = try await hub.subscribe("gatt2mqtt/porch/availability")
        try await hub.publish(topic: "gatt2mqtt/porch/availability", payload: Array("marker".utf8), qos: .atLeastOnce)
        let oldState = await collectUntil(oldTopic) { $0.payloadString == "marker" }
        #expect(oldState.map(\.payloadString) == ["marker"], "the old retained topics are cleared")
        let options = try await Self.request(hub, responses, "device/options", #"{"id":"garden","options":{"command_timeout":"2s","offline":{"policy":"reject"}}}"#)
        let device = Self.data(options)["device"] as? [String: Any]
        #expect(device?["command_timeout"] as? String == "2s" && (device?["offline"] as? [String: Any])?["policy"] as? String == "reject", "\(options)")
        let badOption = try await Self.request(hub, responses, "device/options", #"{"id":"garden","options":{"address":"C0:FF:EE:00:00:05"}}"#)
        #expect((badOption["error"] as? String)?.contains("not a device option") == true, "\(badOption)")

        // Restart of the process: the device added over MQTT comes back from the store.
        let first = try #require(env.bridge)
        kill(first.processIdentifier, SIGTERM)
        await first.exited()
        let devices = try await hub.subscribe("gatt2mqtt/bridge/devices")
        _ = try env.startBridge(devices: Self.heartRate)
        #expect(await Self.first(availability) { $0.topic == "gatt2mqtt/garden/availability" && $0.payloadString.contains("online") } != nil)
        let list = try #require(await Self.first(devices) { $0.payloadString.contains(#""id":"garden""#) })
        #expect(list.payloadString.contains(#""source":"mqtt""#) && list.payloadString.contains(#""source":"file""#), "\(list.payloadString)")
        #expect(list.payloadString.contains(#""id":"garden","name":"#), "the scan's name was kept")

        // Remove with forget: discovery withdrawn, retained cleared, BlueZ forgets it.
        let removed = try await Self.request(hub, responses, "device/remove", #"{"id":"garden","forget":true}"#)
        #expect(removed["status"] as? String == "ok" && Self.data(removed)["forgotten"] as? Bool == true, "\(removed)")
        #expect(await Self.first(discovery) { $0.topic.contains("/gatt2mqtt_garden/") && $0.payload.isEmpty } != nil)
        #expect(await Self.first(devices) { !$0.payloadString.contains(#""id":"garden""#) } != nil)
        #expect(!(try await Self.bluezObjects(env.bus)).contains("dev_C0_FF_EE_00_00_04"), "BlueZ forgot the device")
        let info = try await Self.request(hub, responses, "info")
        #expect(Self.data(info)["devices"] as? Int == 1 && Self.data(info)["devices_from_mqtt"] as? Int == 0, "\(info)")
        await hub.disconnect()
    }

    /// A retained `bridge/request/restart` left on the broker (issue 20: it restarted the bridge
    /// at every start, 67 times in 25 s) is answered `retained_request`, never run, and cleared:
    /// a later subscriber gets no retained request. Under MQTT 3.1.1 the bridge also receives
    /// its own clear back (an empty payload), which is no request either.
    @Test func aRetainedRestartRequestIsRefusedAndCleared() async throws {
        let env = try await EndToEnd(simulate: ["--device", "hr@C0:FF:EE:00:00:03"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        try await hub.publish(topic: "gatt2mqtt/bridge/request/restart", payload: Array(#"{"transaction":"left"}"#.utf8),
                              qos: .atLeastOnce, retain: true)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let states = try await hub.subscribe("gatt2mqtt/bridge/state")
        let bridge = try env.startBridge(devices: Self.heartRate, mqtt: "  protocol: 3.1.1")
        let refused = await Self.first(responses) { $0.topic == "gatt2mqtt/bridge/response/restart" }
        let body = try JSONSerialization.jsonObject(with: Data(try #require(refused, "no answer to the retained restart").payload)) as? [String: Any]
        #expect(body?["status"] as? String == "error" && body?["code"] as? String == "retained_request" && body?["transaction"] as? String == "left",
                "\(body ?? [:])")
        // The broker keeps no retained request: a new subscriber's first message is a live one.
        let late = try await env.broker.client(loop: env.loop)
        let requests = try await late.subscribe("gatt2mqtt/bridge/request/#")
        let info = try await Self.request(hub, responses, "info")
        #expect(info["status"] as? String == "ok")
        let first = await collect(requests, count: 1).first
        #expect(first?.topic == "gatt2mqtt/bridge/request/info" && first?.retain == false, "\(first?.topic ?? "none")")
        // Never restarted: the bridge went online once and never offline; one answer only. What
        // the bridge published before its answer to `info` is on the hub before that answer; a
        // marker the hub publishes now comes after all of it on each topic.
        try await hub.publish(topic: "gatt2mqtt/bridge/state", payload: Array("marker".utf8), qos: .atLeastOnce)
        let seen = await collectUntil(states) { $0.payloadString == "marker" }
        #expect(seen.last?.payloadString == "marker", "\(seen.map(\.payloadString))")
        #expect(!seen.contains { $0.payloadString.contains("offline") }, "\(seen.map(\.payloadString))")
        #expect(bridge.isRunning)
        #expect(env.bridgeLog().contains("gatt2mqtt/bridge/request/restart"), "the warning names the topic")
        try await hub.publish(topic: "gatt2mqtt/bridge/response/marker", payload: Array("marker".utf8), qos: .atLeastOnce)
        let more = await collectUntil(responses) { $0.topic == "gatt2mqtt/bridge/response/marker" }
        #expect(more.last?.topic == "gatt2mqtt/bridge/response/marker", "\(more.map(\.topic))")
        #expect(!more.contains { $0.topic == "gatt2mqtt/bridge/response/restart" }, "the clear's echo was not taken for a request")
        await late.disconnect()
        await hub.disconnect()
    }

    /// The bridge's own operations: info, health_check, options (log level at runtime),
    /// config/reload (by request and by SIGHUP) without dropping other links, restart in place,
    /// the MQTT 5 response topic, and bad input answered with errors while nothing changes.
    @Test func operationsReloadRestartAndBadInput() async throws {
        let env = try await EndToEnd(simulate: ["--device", "hr@C0:FF:EE:00:00:03", "--device", "hr@C0:FF:EE:00:00:04"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let availability = try await hub.subscribe("gatt2mqtt/+/availability")
        let events = try await hub.subscribe("gatt2mqtt/bridge/event")
        let bridge = try env.startBridge(devices: Self.heartRate)
        let pid = bridge.processIdentifier
        #expect(await Self.first(availability) { $0.topic == "gatt2mqtt/heart/availability" && $0.payloadString.contains("online") } != nil)

        let info = Self.data(try await Self.request(hub, responses, "info"))
        #expect(info["log_level"] as? String == "warning" && info["devices"] as? Int == 1 && info["version"] is String, "\(info)")
        let health = try await Self.request(hub, responses, "health_check")
        #expect(Self.data(health)["healthy"] as? Bool == true, "\(health)")
        #expect(((Self.data(health)["devices"] as? [String: Any])?["heart"] as? [String: Any])?["connected"] as? Bool == true, "\(health)")

        // The log level at runtime: debug lines appear from then on.
        let options = try await Self.request(hub, responses, "options", #"{"options":{"log_level":"debug"}}"#)
        #expect(Self.data(options)["log_level"] as? String == "debug", "\(options)")
        _ = try await Self.request(hub, responses, "config/reload")
        #expect(env.bridgeLog().contains(" debug "), "debug lines after options log_level=debug")

        // MQTT 5: the answer goes to the request's response topic, with its correlation data.
        let replies = try await hub.subscribe("hub/replies")
        try await hub.publish(topic: "gatt2mqtt/bridge/request/health_check", payload: Array("{}".utf8), qos: .atLeastOnce,
                              properties: MQTTPublishProperties(responseTopic: "hub/replies", correlationData: [7, 7]))
        let reply = await collect(replies, count: 1).first
        #expect(reply?.properties.correlationData == [7, 7] && reply?.payloadString.contains(#""healthy":true"#) == true)

        // Bad input: each gets an error that says what is wrong.
        let bad: [(String, String, String)] = [
            ("reboot", "{}", "unknown request 'reboot'"),
            ("device/add", #"{"address":"C0:FF:EE:00:00:04"}"#, "id: required"),
            ("device/add", #"{"id":"x","address":"C0:FF:EE:00:00:04","profile":"toaster"}"#, "profile: 'toaster' is not one of"),
            ("device/add", #"{"id":"x","address":"C0:FF:EE:00:00:04"}"#, "scan first"),
            ("device/add", #"{"id":"ghost","address":"C0:FF:EE:00:00:0F","profile":"heart_rate","timeout":2}"#,
             "C0:FF:EE:00:00:0F was not connected within 2 s"),
            ("device/remove", #"{"id":"nobody"}"#, "no device 'nobody'"),
            ("pair", #"{"id":"nobody"}"#, "no device 'nobody'"),
            ("options", #"{"log_level":"loud"}"#, "log_level: expected one of"),
            ("scan", #"{"seconds":-1}"#, "seconds: -1 is negative"),
        ]
        for (action, body, error) in bad {
            let r = try await Self.request(hub, responses, action, body)
            #expect(r["status"] as? String == "error" && (r["error"] as? String)?.contains(error) == true, "\(action) \(body): \(r)")
        }
        try await hub.publish(topic: "gatt2mqtt/bridge/request/info", payload: Array("{oops".utf8), qos: .atLeastOnce)
        let malformed = await Self.first(responses) { $0.topic == "gatt2mqtt/bridge/response/info" }
        #expect(malformed?.payloadString.contains("invalid JSON") == true, "\(malformed?.payloadString ?? "none")")

        // Reload: a device added to the file starts; the other's link stays up.
        let config = env.directory.path + "/bridge.yaml"
        let original = try String(contentsOfFile: config, encoding: .utf8)
        try (original + """

              - id: strap
                address: C0:FF:EE:00:00:04
                profile: custom
                characteristics:
                  - {uuid: 2A37, codec: layout, layout: "builtin:heart_rate_measurement", topic: heart_rate}
            """).write(toFile: config, atomically: true, encoding: .utf8)
        let reload = try await Self.request(hub, responses, "config/reload")
        #expect(Self.data(reload)["added"] as? [String] == ["strap"] && Self.data(reload)["unchanged"] as? Int == 1, "\(reload)")
        #expect(await Self.first(availability) { $0.topic == "gatt2mqtt/strap/availability" && $0.payloadString.contains("online") } != nil)
        // A broken file: refused with its error, nothing changed.
        try "devices: [oops".write(toFile: config, atomically: true, encoding: .utf8)
        let broken = try await Self.request(hub, responses, "config/reload")
        #expect((broken["error"] as? String)?.contains("nothing changed") == true, "\(broken)")
        // SIGHUP: the device left the file and is removed.
        try original.write(toFile: config, atomically: true, encoding: .utf8)
        kill(pid, SIGHUP)
        let reloaded = await Self.first(events) { $0.payloadString.contains(#""type":"config_reloaded""#) && $0.payloadString.contains(#""removed":["strap"]"#) }
        #expect(reloaded?.payloadString == #"{"type":"config_reloaded","data":{"added":[],"removed":["strap"],"changed":[]},"added":[],"removed":["strap"],"changed":[]}"#,
                "\(reloaded?.payloadString ?? "none")")
        // heart's link was not dropped: its session was kept (it is in none of the event's lists,
        // and a device's link belongs to its session).

        // Restart: offline, then online again, in the same process.
        let states = try await hub.subscribe("gatt2mqtt/bridge/state")
        #expect(await Self.first(states) { $0.payloadString.contains("online") } != nil)
        let restart = try await Self.request(hub, responses, "restart")
        #expect(restart["status"] as? String == "ok")
        #expect(await Self.first(states) { $0.payloadString.contains("offline") } != nil)
        #expect(await Self.first(states, timeout: .seconds(20)) { $0.payloadString.contains("online") } != nil)
        #expect(bridge.isRunning && bridge.processIdentifier == pid)
        #expect(await Self.first(availability) { $0.topic == "gatt2mqtt/heart/availability" && $0.payloadString.contains("online") } != nil)
        let after = Self.data(try await Self.request(hub, responses, "info"))
        #expect(after["log_level"] as? String == "warning", "a restart starts from the flag's level: \(after)")
        await hub.disconnect()
    }

    /// pair / unpair by request: BlueZ's bond is made and removed; bridge/devices says so.
    @Test func pairAndUnpair() async throws {
        let env = try await EndToEnd(simulate: ["--device", "hr@C0:FF:EE:00:00:03"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let availability = try await hub.subscribe("gatt2mqtt/+/availability")
        let devices = try await hub.subscribe("gatt2mqtt/bridge/devices")
        _ = try env.startBridge(devices: Self.heartRate)
        #expect(await Self.first(availability) { $0.topic == "gatt2mqtt/heart/availability" && $0.payloadString.contains("online") } != nil)
        let paired = try await Self.request(hub, responses, "pair", #"{"id":"heart"}"#)
        #expect(paired["status"] as? String == "ok" && Self.data(paired)["paired"] as? Bool == true, "\(paired)")
        #expect(await Self.first(devices) { $0.payloadString.contains(#""paired":true"#) } != nil)
        #expect(try await Self.bluezObjects(env.bus).contains("'Paired': <true>"))
        let unpaired = try await Self.request(hub, responses, "unpair", #"{"id":"heart"}"#)
        #expect(unpaired["status"] as? String == "ok", "\(unpaired)")
        #expect(await Self.first(devices) { $0.payloadString.contains(#""paired":false"#) } != nil)
        // The link dropped with the bond; the bridge connects again (a plain, unpaired link).
        #expect(await Self.first(availability) { $0.topic == "gatt2mqtt/heart/availability" && $0.payloadString.contains("online") } != nil)
        await hub.disconnect()
    }

    /// device/remove without forget, as on the real stack (`RealStackTests.API`): BlueZ keeps the
    /// device, and the next scan reports its GATT services (GAP and GATT included) as its UUIDs;
    /// it can be added again from that sighting.
    @Test func removeWithoutForgetKeepsTheDeviceAndItsServices() async throws {
        let env = try await EndToEnd(simulate: ["--device", "thermo@C0:FF:EE:00:00:04"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let states = try await hub.subscribe("gatt2mqtt/bridge/state")
        _ = try env.startBridge(devices: "  []")
        #expect(await Self.first(states) { $0.payloadString.contains("online") } != nil)
        _ = try await Self.request(hub, responses, "scan", #"{"seconds":20}"#)
        let added = try await Self.request(hub, responses, "device/add", #"{"id":"porch","address":"C0:FF:EE:00:00:04"}"#)
        #expect(added["status"] as? String == "ok", "\(added)")
        _ = try await Self.request(hub, responses, "scan", #"{"seconds":0}"#)
        let removed = try await Self.request(hub, responses, "device/remove", #"{"id":"porch"}"#)
        #expect(Self.data(removed)["forgotten"] as? Bool == false, "\(removed)")
        #expect(try await Self.bluezObjects(env.bus).contains("dev_C0_FF_EE_00_00_04"), "BlueZ kept the device")
        let scan = try await hub.subscribe("gatt2mqtt/bridge/scan")
        _ = try await Self.request(hub, responses, "scan", #"{"seconds":20}"#)
        let seen = try #require(await Self.first(scan) { $0.payloadString.contains("C0:FF:EE:00:00:04") })
        #expect(seen.payloadString.contains(#""service_uuids":["1800","1801","180F","181A"]"#)
                    && seen.payloadString.contains(#""configured":false"#), "\(seen.payloadString)")
        let again = try await Self.request(hub, responses, "device/add", #"{"id":"porch","address":"C0:FF:EE:00:00:04"}"#)
        #expect(again["status"] as? String == "ok" && Self.data(again)["profile"] as? String == "environmental_sensing", "\(again)")
        await hub.disconnect()
    }

    /// The demo as `scripts/run` starts it: config/demo.yaml and the four simulated devices, of
    /// which the thermometer is not in the file. Scan → add → use, as the demo's "Try" lists.
    @Test func theDemoAddsItsFourthDeviceOverMQTT() async throws {
        let env = try await EndToEnd(simulate: ["--device", "gopro@C0:FF:EE:00:00:01", "--device", "rokid@C0:FF:EE:00:00:02",
                                          "--device", "hr@C0:FF:EE:00:00:03", "--device", "thermo@C0:FF:EE:00:00:04"])
        defer { env.stop() }
        let demo = try String(contentsOfFile: CheckConfigCLITests.configDir + "/demo.yaml", encoding: .utf8)
        #expect(!demo.contains("address: C0:FF:EE:00:00:04"), "the thermometer is left out of the demo's file")
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let scan = try await hub.subscribe("gatt2mqtt/bridge/scan")
        let availability = try await hub.subscribe("gatt2mqtt/+/availability")
        let bridge = try launchBridge(config: CheckConfigCLITests.configDir + "/demo.yaml", logLevel: "warning", log: env.log,
                                      environment: ["GATT2MQTT_MQTT_URL": "mqtt://127.0.0.1:\(env.broker.port)",
                                                    "GATT2MQTT_BLUETOOTH_BUS_ADDRESS": env.bus,
                                                    "GATT2MQTT_DATABASE_PATH": env.directory.path + "/demo.sqlite"])
        env.bridge = bridge
        #expect(await Self.first(availability) { $0.topic == "gatt2mqtt/heart_rate/availability" && $0.payloadString.contains("online") } != nil)
        _ = try await Self.request(hub, responses, "scan", #"{"seconds":10}"#)
        let seen = await Self.first(scan) { $0.payloadString.contains("C0:FF:EE:00:00:04") }
        #expect(seen?.payloadString.contains(#""name":"Thermometer""#) == true && seen?.payloadString.contains(#""profile_guess":"environmental_sensing""#) == true,
                "\(seen?.payloadString ?? "none")")
        let added = try await Self.request(hub, responses, "device/add", #"{"id":"porch","address":"C0:FF:EE:00:00:04"}"#)
        #expect(added["status"] as? String == "ok", "\(added)")
        let porch = try await hub.subscribe("gatt2mqtt/porch/response")
        try await hub.publish(topic: "gatt2mqtt/porch/get", payload: Array(#"{"temperature":""}"#.utf8), qos: .atLeastOnce)
        let read = await collect(porch, count: 1).first
        #expect(read?.payloadString.contains(#""status":"ok""#) == true && read?.payloadString.contains(#""temperature":"#) == true,
                "\(read?.payloadString ?? "none")")
        await hub.disconnect()
    }
}
