import Foundation
import Mosquitto
import Reactor
import TestSupport
import Testing

/// `config/examples/mosquitto-acl.conf` (docs/security.md, "Locking down the broker") on a real
/// mosquitto: the hub may command devices and read the bridge, not restart it, add, remove or
/// pair devices, or spoof cluster claims; the administrator may; a viewer only reads.
@Suite struct SecurityACLTests {
    static let aclFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("config/examples/mosquitto-acl.conf").path

    @Test func theExampleACLSeparatesTheHubTheAdministratorAndTheViewer() async throws {
        let users = ["gatt2mqtt", "homeassistant", "admin", "viewer"]
        let passwords: @Sendable (String) throws -> Void = { dir in
            for (i, user) in users.enumerated() {
                try runTool("/usr/bin/mosquitto_passwd", (i == 0 ? ["-c"] : []) + ["-b", dir + "/passwd", user, "pw-\(user)"], in: dir)
            }
        }
        try await withBroker(fixture: "auth.conf", appending: ["acl_file \(Self.aclFile)"], prepare: passwords, loopName: "t-acl") { broker, loop in
            func client(_ user: String) async throws -> MQTTClient {
                try await broker.client(loop: loop) { $0.credentials = MQTTCredentials(username: user, password: .literal("pw-\(user)")) }
            }
            let bridge = try await client("gatt2mqtt")
            let hub = try await client("homeassistant")
            let admin = try await client("admin")
            let viewer = try await client("viewer")
            let seen = try await bridge.subscribe("gatt2mqtt/#")

            /// Publishes and says whether the broker accepted it (MQTT 5 PUBACK reason).
            func accepted(_ c: MQTTClient, _ topic: String) async -> Bool {
                do {
                    try await c.publish(topic: topic, payload: Array("{}".utf8), qos: .atLeastOnce)
                    return true
                } catch {
                    return false
                }
            }
            // The hub: commands and read-only requests, nothing that changes the bridge.
            #expect(await accepted(hub, "gatt2mqtt/camera/set"))
            #expect(await accepted(hub, "gatt2mqtt/camera/set/shutter"))
            #expect(await accepted(hub, "gatt2mqtt/bridge/request/health_check"))
            for denied in ["gatt2mqtt/bridge/request/restart", "gatt2mqtt/bridge/request/device/add", "gatt2mqtt/bridge/request/unpair",
                           "gatt2mqtt/bridge/request/config/reload", "gatt2mqtt/bridge/owners/camera", "gatt2mqtt/bridge/nodes/x/state",
                           "gatt2mqtt/bridge/state", "gatt2mqtt/camera"] {
                #expect(await !accepted(hub, denied), "the hub may publish to \(denied)")
            }
            // The administrator: the whole API, but not the bridge's own state or claims.
            #expect(await accepted(admin, "gatt2mqtt/bridge/request/restart"))
            #expect(await accepted(admin, "gatt2mqtt/bridge/request/device/add"))
            #expect(await !accepted(admin, "gatt2mqtt/bridge/owners/camera"))
            #expect(await !accepted(admin, "gatt2mqtt/camera/availability"))
            // The viewer: nothing.
            #expect(await !accepted(viewer, "gatt2mqtt/camera/set"))
            #expect(await !accepted(viewer, "gatt2mqtt/bridge/request/info"))
            // What the bridge received: exactly the accepted messages, in order. A marker the
            // administrator publishes after all of them were answered comes after them (one
            // subscriber's messages keep the broker's order): nothing else came before it.
            let marker = "gatt2mqtt/bridge/request/info"
            #expect(await accepted(admin, marker))
            let got = await collectUntil(seen) { $0.topic == marker }.map(\.topic)
            #expect(got == ["gatt2mqtt/camera/set", "gatt2mqtt/camera/set/shutter", "gatt2mqtt/bridge/request/health_check",
                            "gatt2mqtt/bridge/request/restart", "gatt2mqtt/bridge/request/device/add", marker], "\(got)")
            // The viewer reads the bridge's state.
            let watched = try await viewer.subscribe("gatt2mqtt/camera")
            try await bridge.publish(topic: "gatt2mqtt/camera", payload: Array(#"{"encoding":true}"#.utf8), qos: .atLeastOnce)
            #expect(await collect(watched, count: 1).first?.payloadString == #"{"encoding":true}"#)
            for c in [bridge, hub, admin, viewer] { await c.disconnect() }
        }
    }
}
