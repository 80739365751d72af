import BlueZ
import BlueZPort
import BlueZSimulator
import BridgeCore
import TestSupport
import Testing

/// BridgeCore's BLECentral/BLELink over the client and the emulator.
@Suite(.serialized, .timeLimit(.minutes(1))) struct BlueZCentralTests {
    /// `.automatic` subscribes 2A37 (notify) with AcquireNotify, `.startNotify` the classic way.
    @Test(arguments: [NotifyMethod.automatic, .startNotify])
    func connectNotifyReadWriteAndLinkLoss(method: NotifyMethod) async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        try await withEmulator(options, devices: [GenericDevice.batteryHeartRate()]) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter(), notifyMethod: method)
            // Unknown to BlueZ yet: the central discovers it first.
            let link = try await central.connect(address: hrAddress, notify: [CharacteristicID("2A37", service: "180D")],
                                                 timeout: .seconds(5))
            #expect(link.mtu == 247)
            #expect(try await link.read(CharacteristicID("2A19")) == [85])
            try await link.write([0x01], to: CharacteristicID("2A39"), withResponse: true)
            var it = link.notifications.makeAsyncIterator()
            let first = await it.next()
            let expected = GATTNotification(characteristic: CharacteristicID("2A37", service: "180D"), value: [0x08, 0, 0, 0])
            #expect(first == expected)
            #expect(env.simulator.isAcquired(hrAddress, characteristic: "2A37", write: false) == (method == .automatic))
            #expect(env.simulator.notifySessions(hrAddress, characteristic: "2A37").count == (method == .automatic ? 0 : 1))
            do {
                _ = try await link.read(CharacteristicID("2A99"))
                Issue.record("read of a missing characteristic succeeded")
            } catch {
                #expect((error as? BLEError)?.kind == BLEError.Kind.notFound)
            }
            try env.simulator.dropLink(hrAddress)
            let end = await it.next()
            #expect(end == nil)  // the stream finishes on link loss
            do {
                try await link.write([0x01], to: CharacteristicID("2A39"), withResponse: true)
                Issue.record("write after link loss succeeded")
            } catch {
                #expect((error as? BLEError)?.kind == BLEError.Kind.notConnected)
            }
            // Reconnect through the central: the characteristics are found again.
            let again = try await central.connect(address: hrAddress, notify: [], timeout: .seconds(5))
            #expect(try await again.read(CharacteristicID("2A19")) == [85])
            await again.disconnect()
            #expect(!env.client.connectionState(try #require(env.client.device(hrAddress))).connected)
        }
    }

    /// A zero-length notification through an AcquireNotify socket reads exactly like end-of-file
    /// (as on the real stack, docs/bluez.md "The real stack"): the link subscribes again and the
    /// next notification still arrives (the link is not deaf, and stays up).
    @Test func zeroLengthNotificationThroughTheSocketDoesNotDeafenTheLink() async throws {
        let device = GenericDevice.batteryHeartRate()
        try await withEmulator(Emulator.fast, devices: [device]) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let id = CharacteristicID("2A37", service: "180D")
            let link = try await central.connect(address: hrAddress, notify: [id], timeout: .seconds(5))
            var it = link.notifications.makeAsyncIterator()
            #expect(env.simulator.isAcquired(hrAddress, characteristic: "2A37", write: false))
            #expect(device.notify("2A37", []))  // the client reads 0 bytes: "end-of-file"
            // The device keeps notifying; one of its values must reach the link (after it
            // subscribed again), or the suite's time limit fails the test.
            let sender = Task {
                while !Task.isCancelled {
                    _ = device.notify("2A37", [0x00, 77])
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
            let next = await it.next()
            sender.cancel()
            #expect(next == GATTNotification(characteristic: id, value: [0x00, 77]), "no notification after the zero-length one")
            #expect(env.client.connectionState(try #require(env.client.device(hrAddress))).connected)
            await link.disconnect()
        }
    }

    @Test func absentDeviceIsNotFound() async throws {
        try await withEmulator { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            do {
                _ = try await central.connect(address: "C0:FF:EE:99:99:99", notify: [], timeout: .milliseconds(300))
                Issue.record("connect to an unknown device succeeded")
            } catch {
                #expect((error as? BLEError)?.kind == BLEError.Kind.timeout)
            }
            // The discovery started for it was stopped again.
            #expect(await eventually {
                env.client.object("/org/bluez/hci0")?["org.bluez.Adapter1"]?["Discovering"]?.boolValue == false
            })
        }
    }
}
