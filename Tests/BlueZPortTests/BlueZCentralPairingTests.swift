import BlueZ
import BlueZPort
import BlueZSimulator
import BridgeCore
import TestSupport
import Testing

/// BlueZCentral pairing (spec/bluez.md behaviour 9, gopro.md §2): a device whose characteristics
/// are encryption-protected is paired by bluetoothd on the first access (docs/bluez.md "Automatic
/// security"); a connect with `pair: true` pairs it once (Just Works, headless agent) before
/// subscribing.
@Suite(.serialized, .timeLimit(.minutes(1))) struct BlueZCentralPairingTests {
    static let address = "C0:FF:EE:00:00:07"
    static let service = "0000fea6-0000-1000-8000-00805f9b34fb"
    static let command = CharacteristicID("b5f90072-aa8d-11e3-9046-0002a5d5c51b")
    static let response = CharacteristicID("b5f90073-aa8d-11e3-9046-0002a5d5c51b")

    /// A GoPro-like device: an encrypted write characteristic whose writes are echoed on an
    /// encrypted notify characteristic.
    static func encryptedDevice() -> GenericDevice {
        GenericDevice(
            address: address,
            advertisement: SimulatedAdvertisement(name: "GoPro 0007", rssi: -50, uuids: ["FEA6"]),
            services: [SimulatedService("FEA6", characteristics: [
                SimulatedCharacteristic(command.uuid, flags: ["write", "encrypt-write"]),
                SimulatedCharacteristic(response.uuid, flags: ["notify", "encrypt-notify"]),
            ])],
            onWrite: { (w: SimulatedWrite, d: GenericDevice) throws(SimulatedATTError) in
                d.notify(response.uuid, w.value)
            })
    }

    func pairCalls(_ env: Emulator) -> Int {
        env.simulator.received(Self.address).filter { $0.method == "Pair" }.count
    }

    /// bluetoothd raises the link's security by itself (docs/bluez.md "Automatic security"): a
    /// connect without `pair` subscribes and writes all the same, the device paired on the way
    /// with no `Pair` call.
    @Test func unpairedAccessPairsOnTheWayWithoutPair() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        try await withEmulator(options, devices: [Self.encryptedDevice()]) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let link = try await central.connect(address: Self.address, notify: [Self.response], pair: false, timeout: .seconds(5))
            #expect(!link.pairedOnConnect)
            try await link.write([0x01], to: Self.command, withResponse: true)
            var it = link.notifications.makeAsyncIterator()
            #expect(await it.next() == GATTNotification(characteristic: Self.response, value: [0x01]))
            #expect(pairCalls(env) == 0)
            let device = try #require(env.client.device(Self.address))
            #expect(await eventually { env.client.object(device.path)?["org.bluez.Device1"]?["Paired"]?.boolValue == true })
            await link.disconnect()
        }
    }

    @Test func pairOnFirstConnectOnlyThenWritesAndNotifiesWork() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        try await withEmulator(options, devices: [Self.encryptedDevice()]) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let link = try await central.connect(address: Self.address, notify: [Self.response], pair: true, timeout: .seconds(5))
            #expect(link.pairedOnConnect)
            #expect(pairCalls(env) == 1)
            let device = try #require(env.client.device(Self.address))
            #expect(await eventually { env.client.object(device.path)?["org.bluez.Device1"]?["Paired"]?.boolValue == true })
            try await link.write([0x42], to: Self.command, withResponse: true)
            var it = link.notifications.makeAsyncIterator()
            #expect(await it.next() == GATTNotification(characteristic: Self.response, value: [0x42]))
            await link.disconnect()

            // The bond is kept: the next connect does not pair again, and writes still work.
            let again = try await central.connect(address: Self.address, notify: [Self.response], pair: true, timeout: .seconds(5))
            #expect(!again.pairedOnConnect)
            #expect(pairCalls(env) == 1)
            try await again.write([0x43], to: Self.command, withResponse: true)
            await again.disconnect()
        }
    }
}
