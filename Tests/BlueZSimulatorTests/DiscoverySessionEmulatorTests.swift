import BlueZ
import BlueZSimulator
import DBus
import DeviceSimulators
import TestSupport
import Testing

/// Discovery sessions as bluetoothd 5.66 keeps them (`src/adapter.c`): one session and one filter
/// per D-Bus client; a client's `Pattern` hides the other devices from every client; powering
/// the adapter off drops sessions and filters (docs/bluez.md "One discovery per client").
@Suite(.serialized, .timeLimit(.minutes(1))) struct DiscoverySessionEmulatorTests {
    static let adapter: DBusObjectPath = "/org/bluez/hci0"
    static let thermo = "C0:FF:EE:00:00:04"

    static func call(_ c: DBusConnection, _ method: String, _ args: [DBusValue] = []) async throws {
        _ = try await c.object("org.bluez", adapter).call("org.bluez.Adapter1", method, args)
    }

    /// The D-Bus error a call fails with, as `name: message` ("ok": it succeeded).
    static func failure(_ c: DBusConnection, _ method: String, _ args: [DBusValue] = []) async -> String {
        do {
            try await call(c, method, args)
            return "ok"
        } catch let DBusError.remote(name, message) {
            return "\(name): \(message)"
        } catch {
            return "\(error)"
        }
    }

    static var devices: [any SimulatedDevice] {
        [GenericDevice.batteryHeartRate(), SimulatedThermometer(address: thermo)]
    }

    @Test("a second StartDiscovery from one client is InProgress; StopDiscovery without a session fails")
    func oneSessionPerClient() async throws {
        var options = Emulator.fast
        options.advertisingInterval = nil
        try await withEmulator(options, devices: Self.devices) { env in
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            #expect(await Self.failure(c, "StopDiscovery") == "org.bluez.Error.Failed: No discovery started")
            try await Self.call(c, "StartDiscovery")
            #expect(await Self.failure(c, "StartDiscovery") == "org.bluez.Error.InProgress: Operation already in progress")
            // Another client may discover at the same time.
            let other = try await env.bus.connect(loop: env.loop)
            defer { other.close() }
            try await Self.call(other, "StartDiscovery")
            try await Self.call(c, "StopDiscovery")
            try await Self.call(other, "StopDiscovery")
        }
    }

    @Test("SetDiscoveryFilter while discovering applies to the client's running session")
    func filterChangeNarrowsTheRunningSession() async throws {
        var options = Emulator.fast
        options.advertisingInterval = nil
        try await withEmulator(options, devices: Self.devices) { env in
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            let signals = try await DeviceSignals(c)
            try await Self.call(c, "SetDiscoveryFilter", [.properties(["Transport": .string("le")])])
            try await Self.call(c, "StartDiscovery")
            let hr = env.simulator.devicePath(hrAddress), thermo = env.simulator.devicePath(Self.thermo)
            #expect(env.simulator.isExported(hrAddress) && env.simulator.isExported(Self.thermo))
            env.simulator.advertise()
            #expect(await eventually { !signals.advertisements(hr).isEmpty && !signals.advertisements(thermo).isEmpty })
            // Narrowed to the thermometer: the heart-rate sensor's advertisements are no longer reported.
            try await Self.call(c, "SetDiscoveryFilter", [.properties(["Transport": .string("le"), "Pattern": .string(Self.thermo)])])
            let hrBefore = signals.advertisements(hr).count, thermoBefore = signals.advertisements(thermo).count
            for _ in 0 ..< 3 { env.simulator.advertise() }
            #expect(await eventually { signals.advertisements(thermo).count >= thermoBefore + 3 })
            #expect(signals.advertisements(hr).count == hrBefore)
            try await Self.call(c, "StopDiscovery")
        }
    }

    @Test("one client's Pattern hides the other devices from another client's unfiltered discovery (5.66 device_is_discoverable)")
    func aPatternHidesOtherDevicesFromEveryClient() async throws {
        var options = Emulator.fast
        options.advertisingInterval = nil
        try await withEmulator(options, devices: Self.devices) { env in
            let wide = try await env.bus.connect(loop: env.loop)
            defer { wide.close() }
            let narrow = try await env.bus.connect(loop: env.loop)
            defer { narrow.close() }
            let signals = try await DeviceSignals(wide)
            let hr = env.simulator.devicePath(hrAddress), thermo = env.simulator.devicePath(Self.thermo)
            try await Self.call(wide, "SetDiscoveryFilter", [.properties(["Transport": .string("le")])])
            try await Self.call(wide, "StartDiscovery")
            try await Self.call(narrow, "SetDiscoveryFilter", [.properties(["Pattern": .string(Self.thermo)])])
            try await Self.call(narrow, "StartDiscovery")
            let hrBefore = signals.advertisements(hr).count, thermoBefore = signals.advertisements(thermo).count
            for _ in 0 ..< 3 { env.simulator.advertise() }
            #expect(await eventually { signals.advertisements(thermo).count >= thermoBefore + 3 })
            #expect(signals.advertisements(hr).count == hrBefore, "the unfiltered client still saw the heart-rate sensor")
            // When the pattern client stops, the unfiltered one sees everything again.
            try await Self.call(narrow, "StopDiscovery")
            env.simulator.advertise()
            #expect(await eventually { signals.advertisements(hr).count > hrBefore })
            try await Self.call(wide, "StopDiscovery")
        }
    }

    @Test("Pattern is a prefix of the address as bluetoothd writes it (upper case, compared as given) or of the name")
    func patternIsCaseSensitive() async throws {
        var options = Emulator.fast
        options.advertisingInterval = nil
        try await withEmulator(options, devices: Self.devices) { env in
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            try await Self.call(c, "SetDiscoveryFilter", [.properties(["Pattern": .string("c0:ff:ee:00:00:04")])])
            try await Self.call(c, "StartDiscovery")
            #expect(!env.simulator.isExported(Self.thermo) && !env.simulator.isExported(hrAddress))
            try await Self.call(c, "SetDiscoveryFilter", [.properties(["Pattern": .string("Therm")])])
            env.simulator.advertise()
            #expect(await eventually { env.simulator.isExported(Self.thermo) })
            #expect(!env.simulator.isExported(hrAddress))
            try await Self.call(c, "StopDiscovery")
        }
    }

    @Test("powering off drops sessions and filters; SetDiscoveryFilter and RemoveDevice answer NotReady while off")
    func powerOffDropsSessionsAndFilters() async throws {
        var options = Emulator.fast
        options.advertisingInterval = nil
        options.removalDelay = .seconds(30)
        try await withEmulator(options, devices: Self.devices) { env in
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            try await Self.call(c, "SetDiscoveryFilter", [.properties(["Pattern": .string(Self.thermo)])])
            try await Self.call(c, "StartDiscovery")
            #expect(env.simulator.isExported(Self.thermo) && !env.simulator.isExported(hrAddress))
            env.simulator.setAdapterPowered(false)
            #expect(await Self.failure(c, "SetDiscoveryFilter", [.properties(["Pattern": .string("X")])])
                == "org.bluez.Error.NotReady: Resource Not Ready")
            // A device the adapter does not have is DoesNotExist first, a known one NotReady.
            #expect(await Self.failure(c, "RemoveDevice", [.objectPath(env.simulator.devicePath(hrAddress))])
                == "org.bluez.Error.DoesNotExist: Does Not Exist")
            #expect(await Self.failure(c, "RemoveDevice", [.objectPath(env.simulator.devicePath(Self.thermo))])
                == "org.bluez.Error.NotReady: Resource Not Ready")
            #expect(!env.simulator.advertise())  // nobody discovers
            env.simulator.setAdapterPowered(true)
            // The session ended with the power and the pattern went with it: an unfiltered discovery now.
            #expect(await Self.failure(c, "StopDiscovery") == "org.bluez.Error.Failed: No discovery started")
            try await Self.call(c, "StartDiscovery")
            #expect(env.simulator.isExported(hrAddress))
            try await Self.call(c, "StopDiscovery")
        }
    }
}
