import BlueZ
import BlueZSimulator
import DBus
import Foundation
import Reactor
import Synchronization
import TestSupport

/// The BlueZ tests' world (BlueZTests, BlueZSimulatorTests, BlueZPortTests).
///
/// One test's world: a private bus, the emulator on its own connection and event loop, a
/// client on another connection and loop (``loop``: for more clients of the test).
public struct Emulator: Sendable {
    public let bus: PrivateBus
    public let simulatorConnection: DBusConnection
    public let simulator: BlueZSimulator
    public let client: BlueZClient
    public let loop: EventLoop

    /// Fast timings so the suite stays under a minute. Devices are removed after bluetoothd's
    /// own 30 s (`TemporaryTimeout`): a test that discovers a device, stops the scan and then
    /// connects or looks at it must not race the removal when the machine stalls (a loaded CI
    /// run paused a test process for 16 s between the two). Tests of the removal itself use
    /// ``quickRemoval``.
    public static let fast = BlueZSimulator.Options(
        connectDelay: .milliseconds(20), resolveDelay: .milliseconds(60), disconnectDelay: .milliseconds(80),
        absentConnectTimeout: .milliseconds(300), removalDelay: .seconds(30))

    /// ``fast`` with devices removed 300 ms after nothing keeps them: for the tests that watch
    /// a device vanish (or wait, with ``removalDelayPassed(_:marker:)``, for one not to).
    public static let quickRemoval: BlueZSimulator.Options = {
        var o = fast
        o.removalDelay = .milliseconds(300)
        return o
    }()
}

/// Runs `body` in a fresh world; everything is stopped afterwards (the daemon by its pid).
public func withEmulator(_ options: BlueZSimulator.Options = Emulator.fast, devices: [any SimulatedDevice] = [],
                  _ body: (Emulator) async throws -> Void) async throws
{
    try await withEventLoop(name: "t-bluez-sim") { simulatorLoop in
        try await withEventLoop(name: "t-bluez-client") { loop in
            let bus = try await PrivateBus.started()
            defer { bus.stop() }
            let sc = try await bus.connect(loop: simulatorLoop)
            defer { sc.close() }
            let sim = BlueZSimulator(connection: sc, options: options)
            try await sim.start()
            defer { sim.stop() }
            for d in devices { try sim.add(d) }
            let client = try await BlueZClient.connect(.address(bus.address), callTimeout: .seconds(5), loop: loop)
            defer { client.close() }
            try await body(Emulator(bus: bus, simulatorConnection: sc, simulator: sim, client: client, loop: loop))
        }
    }
}

/// The simulated heart-rate sensor's address in these tests.
public let hrAddress = "C0:FF:EE:00:00:01"
/// ``echoDevice(address:mtu:)``'s default address and its characteristics: write (with and
/// without response), read + notify (the echo), read, write only.
public let echoAddress = "C0:FF:EE:00:00:02"
public let echoWrite = "12345678-1234-5678-1234-56789abcdef1"
public let echoNotify = "12345678-1234-5678-1234-56789abcdef2"
public let echoRead = "12345678-1234-5678-1234-56789abcdef3"
public let echoWriteOnly = "12345678-1234-5678-1234-56789abcdef4"

/// The stable code of a BlueZ error, or the error's text.
public func blueZCode(_ e: any Error) -> String { (e as? BlueZError)?.code ?? "\(e)" }

/// A device with a characteristic for every write kind, whose write handler notifies the bytes
/// reversed on the notify characteristic.
public func echoDevice(address: String = "C0:FF:EE:00:00:02", mtu: Int = 23) -> GenericDevice {
    GenericDevice(
        address: address,
        advertisement: SimulatedAdvertisement(name: "Echo", rssi: -70, uuids: ["12345678-1234-5678-1234-56789abcdef0"]),
        services: [SimulatedService("12345678-1234-5678-1234-56789abcdef0", characteristics: [
            SimulatedCharacteristic("12345678-1234-5678-1234-56789abcdef1", flags: ["write", "write-without-response"]),
            SimulatedCharacteristic("12345678-1234-5678-1234-56789abcdef2", flags: ["read", "notify"], value: [0xAA]),
            SimulatedCharacteristic("12345678-1234-5678-1234-56789abcdef3", flags: ["read"], value: [1, 2, 3]),
            SimulatedCharacteristic("12345678-1234-5678-1234-56789abcdef4", flags: ["write"]),
        ])],
        mtu: mtu,
        onWrite: { (w: SimulatedWrite, d: GenericDevice) throws(SimulatedATTError) in
            if w.value == [0xEE] { throw SimulatedATTError(0x80) }
            d.notify("12345678-1234-5678-1234-56789abcdef2", w.value.reversed())
        })
}

/// Scans on `adapter` (nil: the first) until `address` shows up under it, then stops the scan.
public func discover(_ env: Emulator, _ address: String, on adapter: BlueZAdapter? = nil) async throws -> BlueZDevice {
    let adapter = try adapter ?? env.client.adapter()
    let scan = try await env.client.scan(adapter)
    let device = try await env.client.waitForDevice(address, adapter: adapter, timeout: .seconds(30))
    try await scan.stop()
    return device
}

/// The removal delay has passed for every device whose removal was scheduled before now: the
/// event an absence check ("this device did *not* vanish") waits for instead of sleeping.
/// `marker` (an unconnected, unpaired device in range, e.g. ``echoDevice()``) is discovered in a
/// scan of its own and that scan stopped, so its removal is scheduled after every earlier one,
/// with the same delay (behaviour 4); once BlueZ has removed it, an earlier-scheduled removal
/// that was going to happen has happened.
public func removalDelayPassed(_ env: Emulator, marker: String) async throws -> Bool {
    _ = try await discover(env, marker)
    return await eventually(timeout: .seconds(10)) { !env.simulator.isExported(marker) }
}
