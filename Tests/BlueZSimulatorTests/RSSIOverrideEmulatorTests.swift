import BlueZ
import BlueZSimulator
import DBus
import TestSupport
import Testing

/// ``BlueZSimulator/setRSSI(_:_:)`` and `org.gatt2mqtt.Simulator1.SetRSSI`: the RSSI one emulated
/// adapter receives a device at (two `gatt2mqtt simulate` processes = two hosts seeing the same
/// device; docs/bluez.md "The emulator").
@Suite(.serialized, .timeLimit(.minutes(1))) struct RSSIOverrideEmulatorTests {
    /// Advertisements every 40 ms at exactly the device's RSSI.
    static var steady: BlueZSimulator.Options {
        var options = Emulator.fast
        options.advertisingInterval = .milliseconds(40)
        options.rssiJitter = 0
        return options
    }

    /// `SetRSSI(address, rssi)` on the control object.
    static func setRSSI(_ c: DBusConnection, _ address: String, _ rssi: Int16) async throws {
        _ = try await c.call(destination: "org.bluez", path: BlueZSimulator.controlPath, interface: "org.gatt2mqtt.Simulator1",
                             method: "SetRSSI", arguments: [.string(address), .int16(rssi)])
    }

    /// The values in order with repeats collapsed.
    static func runs(_ values: [Int16]) -> [Int16] {
        values.reduce(into: []) { runs, v in if runs.last != v { runs.append(v) } }
    }

    @Test("a scanning client sees the overridden RSSI from the first sighting on, the advertised one again once cleared")
    func scanSeesTheOverride() async throws {
        try await withEmulator(Self.steady, devices: [GenericDevice.batteryHeartRate()]) { env in
            try env.simulator.setRSSI(hrAddress, -75)
            #expect(throws: BlueZSimulatorError.unknownDevice("C0:FF:EE:00:00:09")) { try env.simulator.setRSSI("C0:FF:EE:00:00:09", -75) }
            let scan = try await env.client.scan(try env.client.adapter())
            let first = await collect(scan.devices, count: 3)
            #expect(first.map(\.address) == [hrAddress, hrAddress, hrAddress])
            #expect(first.map(\.rssi) == [-75, -75, -75])

            try env.simulator.setRSSI(hrAddress, nil)
            let after = await collectUntil(scan.devices) { $0.rssi == -55 }
            #expect(after.last?.rssi == -55)
            #expect(Set(after.dropLast().map(\.rssi)).isSubset(of: [-75]))
            try await scan.stop()
        }
    }

    @Test("SetRSSI over D-Bus while discovering arrives as PropertiesChanged RSSI at the next advertisement; 0 goes back")
    func setRSSIOverDBus() async throws {
        try await withEmulator(Self.steady, devices: [GenericDevice.batteryHeartRate()]) { env in
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            let signals = try await DeviceSignals(c)
            let path = env.simulator.devicePath(hrAddress)
            try await AdvertisingEmulatorTests.startDiscovery(c, filter: ["Transport": .string("le")])
            #expect(await eventually { signals.rssi(path).count >= 2 })

            try await Self.setRSSI(c, hrAddress.lowercased(), -90)
            #expect(await eventually { signals.rssi(path).last == -90 })
            try await Self.setRSSI(c, hrAddress, 0)
            #expect(await eventually { signals.rssi(path).last == -55 })
            #expect(Self.runs(signals.rssi(path)) == [-55, -90, -55])

            await #expect(throws: DBusError.remote(name: "org.gatt2mqtt.Simulator.Error.UnknownDevice", message: "no device C0:FF:EE:00:00:09")) {
                try await Self.setRSSI(c, "C0:FF:EE:00:00:09", -60)
            }
            for bad: Int16 in [21, -128] {
                await #expect(throws: DBusError.remote(name: "org.gatt2mqtt.Simulator.Error.InvalidArguments",
                                                       message: "RSSI \(bad) is not in -127…20 dBm (0: the device's own)")) {
                    try await Self.setRSSI(c, hrAddress, bad)
                }
            }
        }
    }

    @Test("a discovery filter's RSSI threshold applies to the overridden RSSI (step by step)")
    func filterUsesTheOverride() async throws {
        var options = Self.steady
        options.advertisingInterval = nil
        try await withEmulator(options, devices: [GenericDevice.batteryHeartRate()]) { env in
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            try env.simulator.setRSSI(hrAddress, -80)
            try await AdvertisingEmulatorTests.startDiscovery(c, filter: ["RSSI": .int16(-70)])
            #expect(!env.simulator.isExported(hrAddress))
            #expect(env.simulator.advertise())
            #expect(!env.simulator.isExported(hrAddress))
            // Closer to this adapter: its next advertisement passes the filter and exports it.
            try env.simulator.setRSSI(hrAddress, -60)
            #expect(env.simulator.advertise())
            #expect(env.simulator.isExported(hrAddress))
            #expect(try await c.object("org.bluez", env.simulator.devicePath(hrAddress))
                .call("org.freedesktop.DBus.Properties", "Get", [.string("org.bluez.Device1"), .string("RSSI")])
                .body.first?.unwrapped == .int16(-60))
        }
    }
}
