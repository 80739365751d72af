import BlueZ
import BlueZSimulator
import DBus
import Foundation
import Reactor
import Synchronization
import TestSupport
import Testing

/// A device whose advertisement can change while it is in range (the protocol only reads it).
final class ChangingAdvertiser: SimulatedDevice {
    let address: String
    private let current: Mutex<SimulatedAdvertisement>
    let services: [SimulatedService] = []
    let mtu = 23

    init(address: String, _ advertisement: SimulatedAdvertisement) {
        self.address = address
        current = Mutex(advertisement)
    }

    var advertisement: SimulatedAdvertisement { current.withLock { $0 } }
    func change(_ body: (inout SimulatedAdvertisement) -> Void) { current.withLock { body(&$0) } }
    func handleWrite(_ value: [UInt8], to characteristic: String, withResponse: Bool) throws(SimulatedATTError) {}
    func handleRead(_ characteristic: String, current: [UInt8]) throws(SimulatedATTError) -> [UInt8] { current }
    func linkChanged(_ link: SimulatedLink?) {}
}

/// `PropertiesChanged(org.bluez.Device1, …)` signals as an independent client sees them.
final class DeviceSignals: Sendable {
    struct Change: Sendable {
        var path: DBusObjectPath
        var changed: [String: DBusValue]
        var invalidated: [String]
    }

    private final class Log: Sendable { let changes = Mutex<[Change]>([]) }
    private let log = Log()
    private let task: Task<Void, Never>

    init(_ connection: DBusConnection) async throws {
        let stream = try await connection.signals(matching: DBusMatchRule(
            interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", arguments: [0: "org.bluez.Device1"]))
        let log = log
        task = Task {
            do {
                for try await m in stream {
                    guard let path = m.path, let changed = try? m.decode(1, as: [String: DBusValue].self),
                          let invalidated = try? m.decode(2, as: [String].self) else { continue }
                    log.changes.withLock { $0.append(Change(path: path, changed: changed.mapValues(\.unwrapped), invalidated: invalidated)) }
                }
            } catch {}
        }
    }

    var all: [Change] { log.changes.withLock { $0 } }
    /// The changes of `path` that carry an RSSI, in order.
    func advertisements(_ path: DBusObjectPath) -> [Change] { all.filter { $0.path == path && $0.changed["RSSI"] != nil } }
    func rssi(_ path: DBusObjectPath) -> [Int16] {
        all.filter { $0.path == path }.compactMap { c in if case let .int16(r)? = c.changed["RSSI"] { r } else { nil } }
    }
    deinit { task.cancel() }
}

extension DBusValue {
    var unwrapped: DBusValue { if case let .variant(v) = self { v.unwrapped } else { self } }
}

/// Behaviour 10 (spec/bluez.md): while discovering, advertisements keep arriving as
/// PropertiesChanged on the device; docs/bluez.md "While discovering".
@Suite(.serialized, .timeLimit(.minutes(1))) struct AdvertisingEmulatorTests {
    static let adapter: DBusObjectPath = "/org/bluez/hci0"

    /// A raw client (no BlueZ cache): filter, StartDiscovery, StopDiscovery.
    static func startDiscovery(_ c: DBusConnection, filter: [String: DBusValue]) async throws {
        let a = c.object("org.bluez", adapter)
        _ = try await a.call("org.bluez.Adapter1", "SetDiscoveryFilter", [.properties(filter)])
        _ = try await a.call("org.bluez.Adapter1", "StartDiscovery")
    }

    static func stopDiscovery(_ c: DBusConnection) async throws {
        _ = try await c.object("org.bluez", adapter).call("org.bluez.Adapter1", "StopDiscovery")
    }

    @Test("a discovering client keeps getting RSSI updates around the advertised RSSI, on the timer, until discovery stops")
    func periodicUpdatesWhileDiscovering() async throws {
        var options = Emulator.fast
        options.advertisingInterval = .milliseconds(40)
        options.rssiJitter = 3
        try await withEmulator(options, devices: [GenericDevice.batteryHeartRate()]) { env in
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            let signals = try await DeviceSignals(c)
            let path = env.simulator.devicePath(hrAddress)
            try await Self.startDiscovery(c, filter: ["Transport": .string("le")])
            #expect(await eventually { signals.rssi(path).count >= 5 })
            let values = signals.rssi(path)
            #expect(values.allSatisfy { (-58 ... -52).contains($0) }, "\(values)")
            #expect(Set(values).count > 1, "jitter: \(values)")
            // Unchanged advertising data is not repeated (DuplicateData false).
            #expect(signals.all.allSatisfy { $0.changed["ManufacturerData"] == nil && $0.changed["ServiceData"] == nil })

            try await Self.stopDiscovery(c)
            #expect(await eventually { signals.all.contains { $0.path == path && $0.invalidated == ["RSSI"] } })
            // The advertiser is gone: nothing to report, so nothing runs.
            #expect(!env.simulator.advertise())
        }
    }

    @Test("filters, the RSSI delta threshold, changed and duplicate advertising data, connected devices (step by step)")
    func reportedAsBluetoothdReportsThem() async throws {
        var options = Emulator.fast
        options.advertisingInterval = nil
        options.rssiJitter = 0
        options.removalDelay = .seconds(20)
        let far = ChangingAdvertiser(address: "C0:FF:EE:00:00:0A",
                                     SimulatedAdvertisement(name: "Far", rssi: -80, uuids: ["180F"], manufacturerData: [0x0001: [1]]))
        let near = ChangingAdvertiser(address: "C0:FF:EE:00:00:0B",
                                      SimulatedAdvertisement(name: "Near", rssi: -40, uuids: ["180F"], manufacturerData: [0x0001: [1]]))
        try await withEmulator(options, devices: [far, near]) { env in
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            let signals = try await DeviceSignals(c)
            let farPath = env.simulator.devicePath(far.address), nearPath = env.simulator.devicePath(near.address)
            // Each step waits for the exact number of signals it causes before the next one.

            // RSSI threshold -60: the far device is neither exported nor reported.
            try await Self.startDiscovery(c, filter: ["RSSI": .int16(-60)])
            #expect(env.simulator.isExported(near.address) && !env.simulator.isExported(far.address))
            #expect(env.simulator.advertise())
            #expect(await eventually { signals.rssi(nearPath) == [-40] })
            #expect(!env.simulator.isExported(far.address))
            // The far device comes closer: its next advertisement passes and exports it.
            far.change { $0.rssi = -50 }
            #expect(env.simulator.advertise())
            #expect(await eventually { signals.rssi(nearPath).count == 2 })
            #expect(env.simulator.isExported(far.address) && signals.rssi(farPath).isEmpty)

            // Changed manufacturer data goes out once, with the RSSI, in one signal.
            near.change { $0.manufacturerData = [0x0001: [2]] }
            #expect(env.simulator.advertise())
            #expect(env.simulator.advertise())
            #expect(await eventually { signals.rssi(nearPath).count == 4 })
            let changed = signals.advertisements(nearPath)
            #expect(changed[2].changed["ManufacturerData"] == .dictionary(key: .uint16, value: .variant,
                                                                           [DBusDictEntry(.uint16(1), .variant(.bytes([2])))]))
            #expect(changed[3].changed["ManufacturerData"] == nil)
            try await Self.stopDiscovery(c)

            // Without any filter bluetoothd reports RSSI only when it moved 8 dBm or more.
            try await Self.startDiscovery(c, filter: [:])  // StartDiscovery itself reports -40
            #expect(env.simulator.advertise())
            near.change { $0.rssi = -45 }
            #expect(env.simulator.advertise())
            near.change { $0.rssi = -52 }
            #expect(env.simulator.advertise())
            #expect(await eventually { signals.rssi(nearPath).count == 6 })
            #expect(signals.rssi(nearPath).suffix(2) == [-40, -52])
            try await Self.stopDiscovery(c)

            // DuplicateData: unchanged manufacturer data is reported with every advertisement.
            try await Self.startDiscovery(c, filter: ["DuplicateData": .boolean(true)])  // reports -52
            #expect(env.simulator.advertise())
            #expect(env.simulator.advertise())
            #expect(await eventually { signals.rssi(nearPath).count == 9 })
            #expect(signals.advertisements(nearPath).suffix(2).allSatisfy { $0.changed["ManufacturerData"] != nil })

            // A connected device stops advertising; the others go on.
            let farSeen = signals.rssi(farPath).count
            _ = try await c.object("org.bluez", farPath).call("org.bluez.Device1", "Connect")
            #expect(env.simulator.advertise())
            #expect(await eventually { signals.rssi(nearPath).count == 10 })
            #expect(signals.rssi(farPath).count == farSeen)
            try await Self.stopDiscovery(c)
            #expect(!env.simulator.advertise())
        }
    }

    @Test("SetDiscoveryFilter refuses RSSI with Pathloss; Adapter1 has Roles (bleak picks adapters by it)")
    func filterAndAdapterProperties() async throws {
        try await withEmulator { env in
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            let a = c.object("org.bluez", Self.adapter)
            await #expect(throws: DBusError.self) {
                _ = try await a.call("org.bluez.Adapter1", "SetDiscoveryFilter",
                                     [.properties(["RSSI": .int16(-60), "Pathloss": .uint16(10)])])
            }
            let roles = try await a.call("org.freedesktop.DBus.Properties", "Get",
                                         [.string("org.bluez.Adapter1"), .string("Roles")])
            #expect(roles.body.first?.unwrapped == .strings(["central", "peripheral"]))
        }
    }

    @Test("Pair connects a disconnected device first, as bluetoothd does; the link stays up")
    func pairConnects() async throws {
        try await withEmulator(devices: [GenericDevice.batteryHeartRate()]) { env in
            let device = try await discover(env, hrAddress)
            try await env.client.pair(device)
            #expect(await eventually {
                let p = env.client.object(device.path)?["org.bluez.Device1"]
                return p?["Paired"]?.boolValue == true && p?["Connected"]?.boolValue == true
                    && p?["ServicesResolved"]?.boolValue == true
            })
        }
    }
}
