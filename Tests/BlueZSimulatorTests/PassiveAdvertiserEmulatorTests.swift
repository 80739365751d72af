import BlueZ
import BlueZSimulator
import DeviceSimulators
import Synchronization
import TestSupport
import Testing

/// The passive advertisers of `simulate --device bthome@…` (issue 23) in the emulator, through a
/// BlueZ client's scan: their changing data arrives while discovering, and a Connect to one
/// fails as bluetoothd's does for a device that never sends a connectable advertisement
/// (docs/bluez.md behaviour 13).
@Suite(.serialized, .timeLimit(.minutes(1))) struct PassiveAdvertiserEmulatorTests {
    static let address = "A4:C1:38:00:00:01"

    /// The emulator advertising every 50 ms.
    static var options: BlueZSimulator.Options {
        var o = Emulator.fast
        o.advertisingInterval = .milliseconds(50)
        return o
    }

    @Test(arguments: [SimulatedDeviceSpec.Kind.bthome, .atc, .pvvx, .ruuvi, .govee, .bthomeEncrypted, .xiaomi])
    func changingDataReachesAScan(_ kind: SimulatedDeviceSpec.Kind) async throws {
        let advertiser = SimulatedAdvertiser(address: Self.address, payload: try #require(kind.advertiserPayload))
        try await withEmulator(Self.options, devices: [advertiser]) { env in
            let scan = try await env.client.scan(try env.client.adapter(), filter: DiscoveryFilter(duplicateData: true))
            let seen = Mutex<[AdvertiserPayload.Data]>([])
            let reader = Task {
                for await d in scan.devices where d.address == Self.address {
                    let data = AdvertiserPayload.Data(manufacturerData: d.manufacturerData, serviceData: d.serviceData)
                    seen.withLock { if $0.last != data { $0.append(data) } }
                }
            }
            defer { reader.cancel() }
            let expected = { (f: SimulatedAdvertiser.Frame) in
                let d = advertiser.payload.encode(f)
                return AdvertiserPayload.Data(manufacturerData: d.manufacturerData,
                                              serviceData: Dictionary(uniqueKeysWithValues: d.serviceData.map { (SimUUID.full($0.key), $0.value) }))
            }
            let first = expected(advertiser.frame)
            #expect(await eventually { seen.withLock { $0.contains(first) } })
            // Two readings later, each frame's data reaches the scan.
            for _ in 0..<2 {
                let next = expected(advertiser.step())
                #expect(next != first)
                #expect(await eventually { seen.withLock { $0.last == next } }, "\(kind)")
            }
            try await scan.stop()
        }
    }

    /// Behaviour 13: while the adapter creates a connection (Connect to Connected), the
    /// discovery hears nothing; the advertiser's reports (RSSI and ServiceData each time, with
    /// DuplicateData) resume once the link is up. Step by step (`advertise()`).
    @Test func aConnectPausesTheReportsOfTheAdapter() async throws {
        var options = Emulator.fast
        options.advertisingInterval = nil
        options.rssiJitter = 0
        options.connectDelay = .milliseconds(400)
        let advertiser = SimulatedAdvertiser(address: Self.address, payload: .bthome)
        try await withEmulator(options, devices: [advertiser, GenericDevice.batteryHeartRate()]) { env in
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            let signals = try await DeviceSignals(c)
            let path = env.simulator.devicePath(Self.address)
            try await AdvertisingEmulatorTests.startDiscovery(c, filter: ["Transport": .string("le"), "DuplicateData": .boolean(true)])
            // The BTHome packet ids reported, in order.
            let packets = { signals.advertisements(path).compactMap { $0.changed["ServiceData"]?.propertiesValue?.values.first?.bytesValue?[2] } }
            #expect(env.simulator.advertise())
            #expect(await eventually { packets() == [0] })
            // Same data again: reported again, ServiceData included (DuplicateData).
            #expect(env.simulator.advertise())
            #expect(await eventually { packets() == [0, 0] })
            #expect(await eventually { env.client.device(hrAddress) != nil })
            let heart = try #require(env.client.device(hrAddress))
            let connecting = Task { try await env.client.connect(heart, timeout: .seconds(5)) }
            #expect(await eventually { env.simulator.received(hrAddress).contains { $0.method == "Connect" } })
            advertiser.step()
            #expect(env.simulator.advertise())  // packet 1, while the connection is created: not heard
            try await connecting.value
            advertiser.step()
            #expect(env.simulator.advertise())  // packet 2, the link is up: heard
            #expect(await eventually { packets().last == 2 })
            #expect(packets() == [0, 0, 2])
        }
    }

    @Test func connectToAnAdvertiserFailsAsForAnAbsentDevice() async throws {
        let advertiser = SimulatedAdvertiser(address: Self.address, payload: .bthome)
        try await withEmulator(Self.options, devices: [advertiser]) { env in
            let device = try await discover(env, Self.address)
            let started = ContinuousClock.now
            for _ in 0..<2 {
                await #expect(throws: BlueZError.connectionFailed("le-connection-abort-by-local (Connect on \(device.path))")) {
                    try await env.client.connect(device, timeout: .seconds(5))
                }
            }
            // absentConnectTimeout (300 ms here) each, not at once.
            #expect(ContinuousClock.now - started >= .milliseconds(600))
            #expect(env.simulator.received(Self.address).filter { $0.method == "Connect" }.count == 2)
        }
    }
}
