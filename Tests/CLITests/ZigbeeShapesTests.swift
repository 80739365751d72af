import Foundation
import Mosquitto
import TestSupport
import Testing

/// zigbee2mqtt's shapes on the bridge API (issue 22 item 4, docs/bridge-api.md), end to end: a
/// real mosquitto, `gatt2mqtt simulate`, `gatt2mqtt run`, a hub that speaks MQTT only.
@Suite(.serialized, .timeLimit(.minutes(6))) struct ZigbeeShapesTests {
    typealias API = BridgeAPITests

    static func json(_ m: MQTTMessage?) -> [String: Any] {
        guard let m else { return [:] }
        return (try? JSONSerialization.jsonObject(with: Data(m.payload))) as? [String: Any] ?? [:]
    }

    /// Publishes `payload` as it is (not JSON-wrapped) and returns the next response on `action`.
    static func raw(_ hub: MQTTClient, _ responses: MQTTSubscription, _ action: String, _ payload: String) async throws -> [String: Any] {
        try await hub.publish(topic: "gatt2mqtt/bridge/request/\(action)", payload: Array(payload.utf8), qos: .atLeastOnce)
        return json(await API.first(responses) { $0.topic == "gatt2mqtt/bridge/response/\(action)" })
    }

    /// Errors carry `data:{}`; events are `{type, data}` with the old fields kept; string payloads;
    /// `bridge/info`'s `config` without the password; `bridge/devices`' exposes; `bridge/logging`.
    @Test func errorsEventsStringPayloadsInfoDevicesAndLogging() async throws {
        let env = try await EndToEnd(simulate: ["--device", "hr@C0:FF:EE:00:00:01"])
        defer { env.stop() }
        let secret = "pw-\(UInt32.random(in: 100_000...UInt32.max))"
        let passwordFile = env.directory.path + "/mqtt-password"
        try (secret + "\n").write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let events = try await hub.subscribe("gatt2mqtt/bridge/event")
        let logging = try await hub.subscribe("gatt2mqtt/bridge/logging")
        let devices = try await hub.subscribe("gatt2mqtt/bridge/devices")
        let infos = try await hub.subscribe("gatt2mqtt/bridge/info")
        _ = try env.startBridge(devices: EndToEnd.heart, mqtt: "  username: hub\n  password_file: \(passwordFile)")

        // bridge/event: {type, data:{…, friendly_name}}, and the old top-level fields.
        let connected = Self.json(await API.first(events) { $0.payloadString.contains(#""type":"device_connected""#) })
        #expect((connected["data"] as? [String: Any])?["friendly_name"] as? String == "heart", "\(connected)")
        #expect((connected["data"] as? [String: Any])?["device"] as? String == "heart" && connected["device"] as? String == "heart", "\(connected)")

        // An error: {"status":"error","data":{},"error":…}.
        let refused = try await API.request(hub, responses, "device/remove", #"{"id":"nobody"}"#)
        #expect(refused["status"] as? String == "error" && (refused["data"] as? [String: Any])?.isEmpty == true, "\(refused)")
        #expect((refused["error"] as? String)?.contains("no device 'nobody'") == true)

        // String payloads where zigbee2mqtt takes them: the id as a JSON string or bare; true/false/seconds for scan.
        for payload in [#""nobody""#, "nobody"] {
            let r = try await Self.raw(hub, responses, "device/remove", payload)
            #expect((r["error"] as? String)?.contains("no device 'nobody'") == true, "\(payload): \(r)")
        }
        let unpair = try await Self.raw(hub, responses, "unpair", #""nobody""#)
        #expect((unpair["error"] as? String)?.contains("no device 'nobody'") == true, "\(unpair)")
        let started = try await Self.raw(hub, responses, "scan", "true")
        #expect(started["status"] as? String == "ok" && API.data(started)["scanning"] as? Bool == true, "\(started)")
        let scanEvent = Self.json(await API.first(events) { $0.payloadString.contains(#""type":"scan_started""#) })
        #expect((scanEvent["data"] as? [String: Any])?["seconds"] as? Double == 30 && scanEvent["seconds"] as? Double == 30, "\(scanEvent)")
        let stopped = try await Self.raw(hub, responses, "scan", "false")
        #expect(API.data(stopped)["scanning"] as? Bool == false, "\(stopped)")
        let join = try await Self.raw(hub, responses, "permit_join", #"{"time":5}"#)
        #expect(API.data(join)["scanning"] as? Bool == true && API.data(join)["seconds"] as? Double == 5, "\(join)")
        let leave = try await Self.raw(hub, responses, "permit_join", #"{"value":false}"#)
        #expect(API.data(leave)["scanning"] as? Bool == false, "\(leave)")
        let health = try await Self.raw(hub, responses, "health_check", #""""#)
        #expect(health["status"] as? String == "ok", "\(health)")
        let badRemove = try await Self.raw(hub, responses, "device/remove", "12")
        #expect((badRemove["error"] as? String)?.contains("a device id as a string") == true, "\(badRemove)")

        // bridge/info: the loaded configuration, the password file named, never what it holds.
        let info = try await API.request(hub, responses, "info")
        let config = try #require(API.data(info)["config"] as? [String: Any], "\(info)")
        let mqtt = config["mqtt"] as? [String: Any]
        #expect(mqtt?["password_file"] as? String == passwordFile && mqtt?["username"] as? String == "hub", "\(config)")
        #expect(((config["devices"] as? [[String: Any]])?.first)?["id"] as? String == "heart", "\(config)")
        let retained = await API.first(infos) { $0.payloadString.contains(#""config":"#) }
        #expect(retained != nil)
        #expect(!(retained?.payloadString.contains(secret) ?? true), "the password is not in bridge/info")

        // bridge/devices: each device's controls as zigbee2mqtt's exposes.
        let list = try #require(await API.first(devices) { $0.payloadString.contains(#""exposes""#) })
        let heart = try #require((try JSONSerialization.jsonObject(with: Data(list.payload)) as? [[String: Any]])?.first)
        #expect(heart["friendly_name"] as? String == "heart", "\(heart)")
        let exposes = try #require((heart["definition"] as? [String: Any])?["exposes"] as? [[String: Any]], "\(heart)")
        let battery = exposes.first { $0["property"] as? String == "battery" }
        let control = exposes.first { $0["property"] as? String == "control" }
        #expect(battery?["type"] as? String == "text" && battery?["access"] as? Int == 5, "\(exposes)")
        #expect(control?["access"] as? Int == 2 && control?["command_topic"] as? String == "gatt2mqtt/heart/control/write", "\(exposes)")

        // bridge/logging: the refusals above were logged at warning, and published as zigbee2mqtt does.
        let line = Self.json(await API.first(logging) { $0.payloadString.contains("bridge request refused") })
        #expect(line["level"] as? String == "warning" && (line["namespace"] as? String)?.hasPrefix("gatt2mqtt") == true, "\(line)")
        #expect((line["message"] as? String)?.contains("no device 'nobody'") == true, "\(line)")
        await hub.disconnect()
    }

    /// `backup`: a zip (base64) that `unzip`-compatible readers open, with a consistent copy of
    /// the database (the device in it), the runtime devices and the configuration file.
    @Test func backupIsAZipOfTheDatabaseAndTheConfiguration() async throws {
        let env = try await EndToEnd(simulate: ["--device", "hr@C0:FF:EE:00:00:01"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let availability = try await hub.subscribe("gatt2mqtt/+/availability")
        _ = try env.startBridge(devices: EndToEnd.heart)
        #expect(await API.first(availability) { $0.topic == "gatt2mqtt/heart/availability" && $0.payloadString.contains("online") } != nil)
        let answer = try await API.request(hub, responses, "backup")
        let base64 = try #require(API.data(answer)["zip"] as? String, "\(answer)")
        let zip = try #require(Data(base64Encoded: base64))
        let path = env.directory.path + "/backup.zip"
        try zip.write(to: URL(fileURLWithPath: path))
        let out = env.directory.path + "/restored"
        _ = try runTool("/usr/bin/python3", ["-m", "zipfile", "-t", path])
        _ = try runTool("/usr/bin/python3", ["-m", "zipfile", "-e", path, out])
        let ids = try runTool("/usr/bin/python3", ["-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            print(",".join(r[0] for r in db.execute("SELECT id FROM device ORDER BY id")))
            print(db.execute("PRAGMA integrity_check").fetchone()[0])
            """, out + "/gatt2mqtt.sqlite"])
        #expect(ids.contains("heart") && ids.contains("ok"), "\(ids)")
        let yaml = try String(contentsOfFile: out + "/configuration.yaml", encoding: .utf8)
        #expect(yaml.contains("id: heart"))
        #expect(try String(contentsOfFile: out + "/runtime_devices.json", encoding: .utf8) == "[]")
        await hub.disconnect()
    }

    /// `options`: a setting that needs a restart is answered `restart_required`, listed in
    /// `bridge/info`, kept in the database and applied at the next start.
    @Test func optionsPersistAcrossARestart() async throws {
        let env = try await EndToEnd(simulate: ["--device", "hr@C0:FF:EE:00:00:01"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let states = try await hub.subscribe("gatt2mqtt/bridge/state")
        let first = try env.startBridge(devices: EndToEnd.heart)
        #expect(await API.first(states) { $0.payloadString.contains("online") } != nil)
        let set = try await API.request(hub, responses, "options", #"{"options":{"limits":{"max_queued":5}}}"#)
        #expect(set["status"] as? String == "ok" && API.data(set)["restart_required"] as? Bool == true, "\(set)")
        let info = API.data(try await API.request(hub, responses, "info"))
        #expect((info["restart_required"] as? [String])?.contains("limits.max_queued") == true, "\(info)")
        #expect(((info["config"] as? [String: Any])?["limits"] as? [String: Any])?["max_queued"] as? Int == 100, "not applied before the restart")
        let bad = try await API.request(hub, responses, "options", #"{"limits.max_queued":0}"#)
        #expect(bad["code"] as? String == "invalid_value" && (bad["error"] as? String)?.contains("limits.max_queued") == true, "\(bad)")
        let unknown = try await API.request(hub, responses, "options", #"{"mqtt":{"url":"mqtt://elsewhere"}}"#)
        #expect((unknown["error"] as? String)?.contains("unknown option 'mqtt.url'") == true, "\(unknown)")
        kill(first.processIdentifier, SIGTERM)
        await first.exited()
        _ = try env.startBridge(devices: EndToEnd.heart)
        #expect(await API.first(states) { $0.payloadString.contains("online") } != nil)
        let after = API.data(try await API.request(hub, responses, "info"))
        #expect(((after["config"] as? [String: Any])?["limits"] as? [String: Any])?["max_queued"] as? Int == 5, "\(after)")
        #expect((after["restart_required"] as? [String])?.isEmpty == true, "\(after)")
        await hub.disconnect()
    }

    /// `health_check` asks the Bluetooth side: an adapter powered off, then `org.bluez` gone
    /// (the emulator stopped), make it unhealthy with the reasons.
    @Test func healthCheckSeesTheAdapterAndBlueZ() async throws {
        let env = try await EndToEnd(simulate: ["--device", "hr@C0:FF:EE:00:00:01"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let states = try await hub.subscribe("gatt2mqtt/bridge/state")
        _ = try env.startBridge(devices: EndToEnd.heart)
        #expect(await API.first(states) { $0.payloadString.contains("online") } != nil)
        let well = API.data(try await API.request(hub, responses, "health_check"))
        let checks = well["checks"] as? [String: Any]
        #expect(well["healthy"] as? Bool == true && checks?["mqtt"] as? Bool == true && checks?["bluez"] as? Bool == true, "\(well)")
        #expect((checks?["adapters"] as? [String: String])?["hci0"] == "ok", "\(well)")

        try env.control("SetAdapterPowered", "false")
        let off = API.data(try await API.request(hub, responses, "health_check"))
        #expect(off["healthy"] as? Bool == false, "\(off)")
        #expect(((off["checks"] as? [String: Any])?["adapters"] as? [String: String])?["hci0"] == "powered_off", "\(off)")
        #expect((off["reasons"] as? [String])?.contains { $0.contains("powered off") } == true, "\(off)")
        try env.control("SetAdapterPowered", "true")

        reap(env.simulator)  // org.bluez (and its bus) gone
        let gone = API.data(try await API.request(hub, responses, "health_check"))
        #expect(gone["healthy"] as? Bool == false && (gone["checks"] as? [String: Any])?["bluez"] as? Bool == false, "\(gone)")
        #expect((gone["reasons"] as? [String])?.isEmpty == false, "\(gone)")
        await hub.disconnect()
    }
}
