import BlueZ
import BlueZPort
import BlueZSimulator
import BridgeCore
import DBus
import Reactor
import TestSupport
import Testing

/// bluetoothd restarting under a running client (spec/bluez.md, "What users hit in the field"):
/// its objects vanish without InterfacesRemoved and a new owner of `org.bluez` appears.
@Suite(.serialized, .timeLimit(.minutes(1))) struct BluetoothdRestartTests {
    @Test(arguments: [NotifyMethod.automatic, .startNotify])
    func linksEndAndTheClientFollowsTheNewDaemon(method: NotifyMethod) async throws {
        let bus = try await PrivateBus.started()
        defer { bus.stop() }
        let simulatorLoop = EventLoop(name: "t-bluetoothd")
        let loop = EventLoop(name: "t-bluez-client")
        defer {  // after the connections below are closed
            simulatorLoop.shutdown()
            loop.shutdown()
        }
        let first = try await bus.connect(loop: simulatorLoop)
        var firstClosed = false
        defer { if !firstClosed { first.close() } }
        let old = BlueZSimulator(connection: first, options: Emulator.fast)
        try await old.start()
        try old.add(GenericDevice.batteryHeartRate())
        let client = try await BlueZClient.connect(.address(bus.address), callTimeout: .seconds(5), loop: loop)
        defer { client.close() }
        let central = BlueZCentral(client: client, adapter: try client.adapter(), notifyMethod: method)
        let link = try await central.connect(address: hrAddress, notify: [CharacteristicID("2A37", service: "180D")],
                                             timeout: .seconds(5))
        var it = link.notifications.makeAsyncIterator()
        try await link.write([0x01], to: CharacteristicID("2A39"), withResponse: true)
        #expect(await it.next() != nil)  // a measurement follows the control-point write

        // bluetoothd dies: its connection closes and with it the name.
        old.stop()
        first.close()
        firstClosed = true
        while await it.next() != nil {}  // the link ends (a few notifications may still be queued)
        #expect(await eventually { client.device(hrAddress) == nil && client.objects.isEmpty })

        // A new bluetoothd: the client reads its objects, and the device is reached again.
        let second = try await bus.connect(loop: simulatorLoop)
        defer { second.close() }
        let new = BlueZSimulator(connection: second, options: Emulator.fast)
        try await new.start()
        defer { new.stop() }
        try new.add(GenericDevice.batteryHeartRate())
        #expect(await eventually { (try? client.adapter()) != nil })
        let again = try await central.connect(address: hrAddress, notify: [CharacteristicID("2A37", service: "180D")],
                                              timeout: .seconds(5))
        var it2 = again.notifications.makeAsyncIterator()
        #expect(try await again.read(CharacteristicID("2A19")) == [85])
        try await again.write([0x01], to: CharacteristicID("2A39"), withResponse: true)
        #expect(await it2.next() != nil)
        await again.disconnect()
    }
}
