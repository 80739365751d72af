import Foundation
import Mosquitto
import TestSupport
import Testing

/// Several adapters in one bridge (docs/scale-out.md): `gatt2mqtt simulate --adapters hci0,hci1`
/// (one emulated bluetoothd with two radios, each device at its own RSSI on each) and
/// `gatt2mqtt run` with `bluetooth.adapters: [hci0, hci1]`.
@Suite(.serialized, .timeLimit(.minutes(5))) struct AdapterEndToEndTests {
    static let near1 = "C0:FF:EE:00:00:01"
    static let pinned = "C0:FF:EE:00:00:02"

    static let devices = """
          - id: heart
            address: \(near1)
            profile: custom
            characteristics:
              - {uuid: 2A39, codec: raw, direction: write, topic: control}
          - id: strap
            address: \(pinned)
            adapter: hci0
            profile: custom
            characteristics:
              - {uuid: 2A39, codec: raw, direction: write, topic: control}
        """

    /// Whether the emulator says the device is connected through `adapter` (its Device1 there).
    static func connected(_ env: EndToEnd, _ address: String, on adapter: String) -> Bool {
        let path = "/org/bluez/\(adapter)/dev_" + address.replacingOccurrences(of: ":", with: "_")
        let out = try? runTool("/usr/bin/gdbus", ["call", "--address", env.bus, "--dest", "org.bluez", "--object-path", path,
                                                  "--method", "org.freedesktop.DBus.Properties.Get", "org.bluez.Device1", "Connected"])
        return out?.contains("true") == true
    }

    static func ok(_ hub: MQTTClient, _ device: String, _ transaction: String) async throws -> Bool {
        let responses = try await hub.subscribe("gatt2mqtt/\(device)/response")
        try await hub.publish(topic: "gatt2mqtt/\(device)/set", payload: Array(#"{"control":"01","transaction":"\#(transaction)"}"#.utf8),
                              qos: .atLeastOnce)
        let r = await collectUntil(responses, timeout: .seconds(15)) { $0.payloadString.contains(#""transaction":"\#(transaction)""#) }
        try? await responses.unsubscribe()
        return r.last?.payloadString.contains(#""status":"ok""#) == true
    }

    @Test func eachDeviceGoesThroughTheAdapterThatHearsItBestOrItsPinAndMovesWhenItsAdapterGoesOff() async throws {
        // heart: hci1 hears it far better; strap: hci1 too, but it is pinned to hci0.
        let env = try await EndToEnd(simulate: [
            "--adapters", "hci0,hci1", "--device", "hr@\(Self.near1)", "--device", "hr@\(Self.pinned)",
            "--rssi", "hci0/\(Self.near1)=-85", "--rssi", "hci1/\(Self.near1)=-45",
            "--rssi", "hci0/\(Self.pinned)=-85", "--rssi", "hci1/\(Self.pinned)=-45",
        ])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let heart = try await hub.subscribe("gatt2mqtt/heart/availability")
        let strap = try await hub.subscribe("gatt2mqtt/strap/availability")
        _ = try env.startBridge(devices: Self.devices, mqtt: "  reconnect_max: 1s", adapters: ["hci0", "hci1"], logLevel: "info")
        #expect(await collectUntil(heart, timeout: .seconds(20)) { $0.payloadString.contains("online") }.last?.payloadString == #"{"state":"online"}"#)
        #expect(await collectUntil(strap, timeout: .seconds(20)) { $0.payloadString.contains("online") }.last?.payloadString == #"{"state":"online"}"#)
        #expect(Self.connected(env, Self.near1, on: "hci1") && !Self.connected(env, Self.near1, on: "hci0"), "heart through hci1, which hears it best")
        #expect(Self.connected(env, Self.pinned, on: "hci0") && !Self.connected(env, Self.pinned, on: "hci1"), "strap through its pin")
        #expect(try await Self.ok(hub, "heart", "h1"))
        #expect(try await Self.ok(hub, "strap", "s1"))

        // hci1 goes off: heart's link drops and it comes back through hci0; strap is untouched.
        try env.control("SetAdapterPoweredOn", "hci1", "false")
        #expect(await collectUntil(heart, timeout: .seconds(10)) { $0.payloadString.contains("offline") }.last?.payloadString == #"{"state":"offline"}"#)
        #expect(await collectUntil(heart, timeout: .seconds(20)) { $0.payloadString.contains("online") }.last?.payloadString == #"{"state":"online"}"#,
                "\(env.bridgeLog().suffix(2000))")
        #expect(Self.connected(env, Self.near1, on: "hci0"))
        #expect(try await Self.ok(hub, "heart", "h2"))
        #expect(try await Self.ok(hub, "strap", "s2"))
        #expect(try RunEndToEndTests.writes(env, Self.near1, on: "2a39").count == 2 && RunEndToEndTests.writes(env, Self.pinned, on: "2a39").count == 2)
        await hub.disconnect()
    }
}
