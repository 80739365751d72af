import BlueZ
@testable import BlueZPort
import BlueZSimulator
import BridgeCore
import DBus
import DeviceSimulators
import Synchronization
import TestSupport
import Testing

/// BlueZCentral as BridgeCore's `BLEAdapterControl` against the emulator: user scans, connects
/// sharing the client's one discovery session with them, pair and forget (docs/bluez.md "One
/// discovery per client").
@Suite(.serialized, .timeLimit(.minutes(1))) struct BlueZCentralAdapterControlTests {
    static let gopro = "C0:FF:EE:00:00:01"
    static let rokid = "C0:FF:EE:00:00:02"
    static let heart = "C0:FF:EE:00:00:03"
    static let thermo = "C0:FF:EE:00:00:04"
    static let adapterPath: DBusObjectPath = "/org/bluez/hci0"

    static func full(_ short: String) -> String { "0000\(short.lowercased())-0000-1000-8000-00805f9b34fb" }

    /// The four kinds, without their timers.
    static func peripherals() -> [SimulatedPeripheral] {
        let none = SimulatedDeviceTimings(goproSleepAfter: nil, goproBatteryDrain: nil, rokidBatteryInterval: nil,
                                          heartRateInterval: nil, thermoInterval: nil)
        return [SimulatedDeviceSpec(kind: .gopro, address: gopro), SimulatedDeviceSpec(kind: .rokid, address: rokid),
                SimulatedDeviceSpec(kind: .hr, address: heart), SimulatedDeviceSpec(kind: .thermo, address: thermo)]
            .map { SimulatedPeripheral($0, timings: none) }
    }

    /// Advertisements every 50 ms, devices kept 5 s after discovery stops.
    static var options: BlueZSimulator.Options {
        var o = Emulator.fast
        o.advertisingInterval = .milliseconds(50)
        o.removalDelay = .seconds(5)
        return o
    }

    /// Every advertisement a scan reports, collected by a task until the stream ends.
    final class Sightings: Sendable {
        final class Log: Sendable {
            let items = Mutex<[Advertisement]>([])
            let ended = Mutex(false)
        }
        let log = Log()
        let task: Task<Void, Never>
        init(_ scan: BLEScan) {
            let log = log
            task = Task {
                for await a in scan.advertisements { log.items.withLock { $0.append(a) } }
                log.ended.withLock { $0 = true }
            }
        }
        func of(_ address: String) -> [Advertisement] { log.items.withLock { $0.filter { $0.address == address } } }
        var hasEnded: Bool { log.ended.withLock { $0 } }
    }

    func discovering(_ env: Emulator) -> Bool {
        env.client.object(Self.adapterPath)?["org.bluez.Adapter1"]?["Discovering"]?.boolValue == true
    }

    func lookUps(_ central: BlueZCentral) -> [String: Int] { central.discovery.state.withLock { $0.lookups } }
    func applied(_ central: BlueZCentral) -> SharedDiscovery.Mode { central.discovery.state.withLock { $0.applied } }

    @Test func scanReportsEveryKindsAdvertisement() async throws {
        try await withEmulator(Self.options, devices: Self.peripherals().map(\.device)) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let control = try #require(central.adapterControl)
            let scan = try await control.scan()
            let seen = Sightings(scan)
            // Each device is reported, and keeps being reported (an advertisement every 50 ms).
            #expect(await eventually {
                [Self.gopro, Self.rokid, Self.heart, Self.thermo].allSatisfy { seen.of($0).count >= 3 }
            })

            let gopro = try #require(seen.of(Self.gopro).last)
            #expect(gopro.name == "GoPro 1234")
            #expect((-53 ... -47).contains(gopro.rssi ?? 0), "\(gopro)")
            #expect(gopro.serviceUUIDs == [Self.full("FEA6")])
            // Company 0x02F2: schema 2, awake, model 62 (HERO12 Black), command and control, ID hash, offload 0.
            #expect(gopro.manufacturerData == [0x02F2: [0x02, 0x01, 62, 0x01, 0x00, 0xC0, 0xFF, 0xEE, 0x00, 0x00, 0x01, 0x00]])
            #expect(gopro.serviceData == [Self.full("FEA6"): [0xEE, 0x00, 0x00, 0x01] + Array("1234".utf8)])
            #expect(!gopro.connected && !gopro.paired)

            let rokid = try #require(seen.of(Self.rokid).last)
            #expect(rokid.name == "Rokid Glasses")
            #expect((-61 ... -55).contains(rokid.rssi ?? 0))
            #expect(rokid.serviceUUIDs == [Self.full("9100")])
            #expect(rokid.serviceData == [Self.full("9A01"): Array("SIM0001".utf8)])
            #expect(rokid.manufacturerData.isEmpty)

            let heart = try #require(seen.of(Self.heart).last)
            #expect(heart.name == "Sim HR")
            #expect((-58 ... -52).contains(heart.rssi ?? 0))
            #expect(heart.serviceUUIDs == [Self.full("180D"), Self.full("180F")])
            #expect(heart.manufacturerData == [0xFFFF: [0x01, 0x02]])

            let thermo = try #require(seen.of(Self.thermo).last)
            #expect(thermo.name == "Thermometer")
            #expect((-65 ... -59).contains(thermo.rssi ?? 0))
            #expect(thermo.serviceUUIDs == [Self.full("181A")])
            #expect(thermo.manufacturerData.isEmpty && thermo.serviceData.isEmpty)

            await scan.stop()
            #expect(await eventually { seen.hasEnded && !discovering(env) })
            #expect(applied(central) == .off)
            await scan.stop()  // idempotent
        }
    }

    @Test func connectingToAnUnknownDeviceDuringAUserScanWaitsInItAndTheScanKeepsReporting() async throws {
        try await withEmulator(Self.options, devices: Self.peripherals().map(\.device)) { env in
            try env.simulator.setInRange(Self.thermo, false)
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let scan = try await central.scan()
            let seen = Sightings(scan)
            #expect(await eventually { seen.of(Self.heart).count >= 2 })
            // BlueZ does not know the thermometer: the connect looks it up — in the running scan,
            // without a second StartDiscovery (which bluetoothd would refuse) or a narrower filter.
            let connecting = Task { try await central.connect(address: Self.thermo, notify: [CharacteristicID("2A6E")], timeout: .seconds(5)) }
            #expect(await eventually { lookUps(central) == [Self.thermo: 1] })
            #expect(applied(central) == .all)
            try env.simulator.setInRange(Self.thermo, true)
            let link = try await connecting.value
            #expect(try await link.read(CharacteristicID("2A6E")) == [0x66, 0x08])  // 21.50 °C
            #expect(await eventually { !seen.of(Self.thermo).isEmpty })  // the user scan saw it appear too
            // The look-up is over; the user scan goes on, unfiltered.
            #expect(lookUps(central).isEmpty && applied(central) == .all)
            let heartSoFar = seen.of(Self.heart).count, goproSoFar = seen.of(Self.gopro).count
            #expect(await eventually { seen.of(Self.heart).count >= heartSoFar + 3 && seen.of(Self.gopro).count >= goproSoFar + 3 })
            #expect(discovering(env) && !seen.hasEnded)
            await link.disconnect()
            await scan.stop()
            #expect(await eventually { !discovering(env) && seen.hasEnded })
        }
    }

    @Test func stoppingTheUserScanDuringALookUpNarrowsTheDiscoveryInsteadOfEndingIt() async throws {
        try await withEmulator(Self.options, devices: Self.peripherals().map(\.device)) { env in
            try env.simulator.setInRange(Self.thermo, false)
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let scan = try await central.scan()
            let seen = Sightings(scan)
            let connecting = Task { try await central.connect(address: Self.thermo, notify: [], timeout: .seconds(5)) }
            #expect(await eventually { lookUps(central) == [Self.thermo: 1] })
            await scan.stop()
            #expect(await eventually { seen.hasEnded })
            // Still discovering, now for the looked-up address only.
            #expect(applied(central) == .address(Self.thermo))
            #expect(env.simulator.advertise())  // somebody discovers
            try env.simulator.setInRange(Self.thermo, true)
            let link = try await connecting.value
            #expect(try await link.read(CharacteristicID("2A19")) == [92])
            // Nobody needs discovery any more.
            #expect(applied(central) == .off)
            #expect(await eventually { !discovering(env) })
            await link.disconnect()
        }
    }

    @Test func aLookUpEndingDuringAUserScanAndAScanStartedDuringALookUpLeaveEachOtherAlone() async throws {
        try await withEmulator(Self.options, devices: Self.peripherals().map(\.device)) { env in
            try env.simulator.setInRange(Self.thermo, false)
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            // The look-up starts its own discovery, filtered by the address.
            let connecting = Task { try await central.connect(address: Self.thermo, notify: [], timeout: .seconds(5)) }
            #expect(await eventually { applied(central) == .address(Self.thermo) })
            #expect(!env.simulator.isExported(Self.heart))
            // A user scan joins it: the filter widens (never narrows the scan), no second StartDiscovery.
            let scan = try await central.scan()
            let seen = Sightings(scan)
            #expect(applied(central) == .all)
            #expect(await eventually { seen.of(Self.heart).count >= 2 })
            try env.simulator.setInRange(Self.thermo, true)
            let link = try await connecting.value
            let soFar = seen.of(Self.heart).count
            #expect(await eventually { seen.of(Self.heart).count >= soFar + 2 })
            #expect(applied(central) == .all && discovering(env))
            await link.disconnect()
            await scan.stop()
            #expect(await eventually { !discovering(env) })
        }
    }

    @Test func aScanWhoseConsumerGoesAwayEndsTheDiscovery() async throws {
        try await withEmulator(Self.options, devices: Self.peripherals().map(\.device)) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let scan = try await central.scan()
            let consumer = Task { for await _ in scan.advertisements {} }
            #expect(await eventually { discovering(env) })
            consumer.cancel()
            #expect(await eventually { applied(central) == .off && !discovering(env) })
        }
    }

    @Test func aUserScanSurvivesAnAdapterPowerCycle() async throws {
        try await withEmulator(Self.options, devices: Self.peripherals().map(\.device)) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let scan = try await central.scan()
            let seen = Sightings(scan)
            #expect(await eventually { seen.of(Self.heart).count >= 2 })
            // bluetoothd drops every discovery session when the adapter goes off (5.66 adapter_stop).
            try await env.client.setPowered(try env.client.adapter(), false)
            #expect(await eventually { applied(central) == .off })
            try await env.client.setPowered(try env.client.adapter(), true)
            #expect(await eventually { applied(central) == .all && discovering(env) })
            let soFar = seen.of(Self.heart).count
            #expect(await eventually { seen.of(Self.heart).count >= soFar + 2 })
            #expect(!seen.hasEnded)
            await scan.stop()
            #expect(await eventually { !discovering(env) })
        }
    }

    @Test func pairLooksUpPairsAndIsIdempotent() async throws {
        try await withEmulator(Self.options, devices: Self.peripherals().map(\.device)) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let pairCalls = { env.simulator.received(Self.gopro).filter { $0.method == "Pair" }.count }
            #expect(env.client.device(Self.gopro) == nil)
            try await central.pair(address: Self.gopro.lowercased(), timeout: .seconds(5))
            let device = try #require(env.client.device(Self.gopro))
            #expect(env.client.isPaired(device))
            #expect(env.client.object(device.path)?["org.bluez.Device1"]?["Bonded"]?.boolValue == true)
            #expect(pairCalls() == 1)
            #expect(applied(central) == .off)  // the look-up's discovery is over
            // Already paired: success, no second Pair.
            try await central.pair(address: Self.gopro, timeout: .seconds(5))
            #expect(pairCalls() == 1)
            // The encrypted characteristics now answer (Pair connected the camera).
            let link = try await central.connect(address: Self.gopro, notify: [CharacteristicID(GoProUUID.gp73)], timeout: .seconds(5))
            try await link.write([0x01, 0x3C], to: CharacteristicID(GoProUUID.gp72), withResponse: true)
            await link.disconnect()
        }
    }

    @Test func pairTakesAlreadyExistsAsSuccessAndMapsOtherErrors() async throws {
        try await withEmulator(Self.options, devices: Self.peripherals().map(\.device)) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            try env.simulator.updateFaults(Self.heart) {
                $0.errors["Pair"] = BlueZSimulator.InjectedError(name: "org.bluez.Error.AlreadyExists", message: "Already Exists")
            }
            try await central.pair(address: Self.heart, timeout: .seconds(5))
            try env.simulator.updateFaults(Self.heart) {
                $0.errors["Pair"] = BlueZSimulator.InjectedError(name: "org.bluez.Error.AuthenticationFailed", message: "Authentication Failed")
            }
            do throws(BLEError) {
                try await central.pair(address: Self.heart, timeout: .seconds(5))
                Issue.record("pairing succeeded despite AuthenticationFailed")
            } catch {
                // BlueZ's authentication errors are not_authorized, a refusal for the bridge.
                #expect(error.kind == .notPermitted && error.message.contains("Authentication Failed"), "\(error)")
            }
            // A device that is not around: the look-up times out.
            try env.simulator.setInRange(Self.thermo, false)
            do throws(BLEError) {
                try await central.pair(address: Self.thermo, timeout: .milliseconds(300))
                Issue.record("pairing an absent device succeeded")
            } catch {
                #expect(error.kind == .timeout, "\(error)")
            }
            #expect(await eventually { applied(central) == .off && lookUps(central).isEmpty })
        }
    }

    @Test func forgetRemovesTheDeviceAndItsBondAndAnUnknownAddressIsFine() async throws {
        try await withEmulator(Self.options, devices: Self.peripherals().map(\.device)) { env in
            let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
            let link = try await central.connect(address: Self.gopro, notify: [CharacteristicID(GoProUUID.gp73)], pair: true,
                                                 timeout: .seconds(5))
            #expect(link.pairedOnConnect)
            var notifications = link.notifications.makeAsyncIterator()
            try await central.forget(address: Self.gopro)
            // Gone from BlueZ (and from the cache) when forget returns; the link ended with it.
            #expect(env.client.device(Self.gopro) == nil)
            #expect(!env.simulator.isExported(Self.gopro))
            #expect(await notifications.next() == nil)
            // Unknown addresses (never seen, or already forgotten) are fine.
            try await central.forget(address: Self.gopro)
            try await central.forget(address: "C0:FF:EE:00:00:99")
            // The bond went with it: the next pairing pairs again.
            try await central.pair(address: Self.gopro, timeout: .seconds(5))
            #expect(env.simulator.received(Self.gopro).filter { $0.method == "Pair" }.count == 2)
        }
    }
}

/// GoPro characteristic UUIDs the tests use (spec gopro.md §1).
enum GoProUUID {
    static let gp72 = "b5f90072-aa8d-11e3-9046-0002a5d5c51b"
    static let gp73 = "b5f90073-aa8d-11e3-9046-0002a5d5c51b"
}
