import DBus
import Foundation
import Mosquitto
import Testing

extension RealStackTests {
    /// Issue 20 item 5 (docs/bluez.md "Pairing agent"): once the bridge has paired its GoPro, a nearby
    /// device of nobody's, acting as a central, connects to the host and asks to pair with it —
    /// refused; the GoPro's pairing works (bonded on the camera's side: no second pairing when
    /// it reconnects). The host's adapter
    /// is made connectable by an LE advertisement this test registers, as any other program on
    /// the host might.
    @Test func anotherCentralCannotPairWithTheHostOnceTheBridgePairedTheGoPro() async throws {
        let stack = try RealStack(devices: ["gopro@\(Self.gopro)"])
        defer { stack.stop() }
        let bus = try await DBusConnection.connect(.system, loop: stack.loop)
        defer { bus.close() }
        let advertisement: DBusObjectPath = "/gatt2mqtt/test/advertisement"
        try bus.export(advertisement, interfaces: [DBusInterface("org.bluez.LEAdvertisement1",
                                                                 methods: [DBusMethod("Release") { _ in [] }],
                                                                 properties: [DBusProperty("Type", .string("peripheral")),
                                                                              DBusProperty("LocalName", .string("host"))])])
        _ = try await bus.call(destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.LEAdvertisingManager1",
                               method: "RegisterAdvertisement", arguments: [.objectPath(advertisement), .properties([:])])

        let hub = try await stack.broker.client(loop: stack.loop)
        let events = try await hub.subscribe("gatt2mqtt/bridge/event")
        let availability = try await hub.subscribe("gatt2mqtt/camera/availability")
        try stack.startBridge(devices: Self.cameraYAML, logLevel: "debug")
        let paired = await firstMessage(events) { $0.contains("device_paired") }
        #expect(paired != nil, "no device_paired event; bridge log:\n\(stack.bridgeLog.suffix(3000))")
        let online = await firstMessage(availability) { $0 == #"{"state":"online"}"# }
        #expect(online != nil, "camera never online; bridge log:\n\(stack.bridgeLog.suffix(3000))")

        // Now the bridge's agent is registered (and, the only one, bluetoothd's default agent):
        // the intruder asks. (The control call blocks on the radio's socket: off this task;
        // `control` only reads the stack's socket path.)
        nonisolated(unsafe) let radio = stack
        let answer = try await Task.detached { try radio.control(#"{"op":"pair_host","target":"F0:F0:F0:F0:F0:01"}"#) }.value
        let result = try #require(try JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any], "\(answer)")
        #expect(result["connected"] as? Bool == true, "the intruder never reached the host: \(answer)")
        #expect(result["paired"] as? Bool == false, "a device of nobody's paired with the host: \(answer)")
        let intruderPaired = try? RealStack.gdbus(["--object-path", "/org/bluez/hci0/dev_C0_FF_EE_00_00_66", "--method",
                                                   "org.freedesktop.DBus.Properties.Get", "org.bluez.Device1", "Paired"])
        #expect(intruderPaired == nil || intruderPaired == "(<false>,)", "bluetoothd: intruder Paired \(intruderPaired ?? "")")
        let pairable = try? RealStack.gdbus(["--object-path", "/org/bluez/hci0", "--method",
                                             "org.freedesktop.DBus.Properties.Get", "org.bluez.Adapter1", "Pairable"])
        #expect(stack.pairCalls == 1)

        // The camera's bond: a reconnect encrypts without pairing again.
        let camera = try stack.peripheral(Self.gopro)
        let bonds = camera["bonds"] as? [Any] ?? []
        _ = try stack.control(#"{"op":"drop","address":"\#(Self.gopro)"}"#)
        let offline = await firstMessage(availability) { $0 == #"{"state":"offline"}"# }
        let again = await firstMessage(availability) { $0 == #"{"state":"online"}"# }
        #expect(offline != nil && again != nil, "camera not back online; bridge log:\n\(stack.bridgeLog.suffix(3000))")
        let afterwards = try stack.peripheral(Self.gopro)
        print("real stack, pairing agent: intruder \(answer); hci0 Pairable \(pairable ?? "?"); camera bonds \(bonds.count), "
            + "pairings \(afterwards["pairings"] ?? "?"), Pair calls \(stack.pairCalls)")
        #expect(stack.pairCalls == 1, "the camera was paired again after a reconnect: \(stack.pairCalls) Pair calls")
        await hub.disconnect()
    }
}
