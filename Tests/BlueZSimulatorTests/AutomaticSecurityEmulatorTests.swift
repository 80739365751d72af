import BlueZ
import BlueZSimulator
import DBus
import Synchronization
import TestSupport
import Testing

/// bluetoothd's automatic security (docs/bluez.md "Automatic security"; 5.66 `src/shared/att.c`
/// `change_security`): an access to an encrypted characteristic of an unpaired device pairs Just
/// Works on the way and goes ahead; a refused pairing leaves the access unanswered (retried) until
/// the link drops.
@Suite(.serialized, .timeLimit(.minutes(1))) struct AutomaticSecurityEmulatorTests {
    static let address = "C0:FF:EE:00:00:0E"
    static let secret = "0000aa01-0000-1000-8000-00805f9b34fb"
    static let command = "0000aa02-0000-1000-8000-00805f9b34fb"
    static let events = "0000aa03-0000-1000-8000-00805f9b34fb"
    static let authenticated = "0000aa04-0000-1000-8000-00805f9b34fb"

    /// One encrypted characteristic per kind of access, and one that needs an authenticated link.
    static func device() -> GenericDevice {
        GenericDevice(
            address: address,
            advertisement: SimulatedAdvertisement(name: "Locked", rssi: -50, uuids: ["AA00"]),
            services: [SimulatedService("AA00", characteristics: [
                SimulatedCharacteristic(secret, flags: ["read", "encrypt-read"], value: [0x2A]),
                SimulatedCharacteristic(command, flags: ["write", "encrypt-write"]),
                SimulatedCharacteristic(events, flags: ["notify", "encrypt-notify"]),
                SimulatedCharacteristic(authenticated, flags: ["write", "encrypt-authenticated-write"]),
            ])])
    }

    static var options: BlueZSimulator.Options {
        var o = Emulator.fast
        o.removalDelay = .seconds(5)
        o.securityRetryInterval = .milliseconds(50)
        return o
    }

    func securityPairings(_ env: Emulator) -> [BlueZSimulator.Received] {
        env.simulator.received(Self.address).filter { $0.method == "SecurityPairing" }
    }

    @Test("an unpaired access to an encrypted characteristic pairs Just Works, goes ahead and leaves the device Paired and Bonded",
          arguments: ["read", "write", "startNotify", "acquireNotify"])
    func unpairedAccessPairsOnTheWay(access: String) async throws {
        let device = Self.device()
        try await withEmulator(Self.options, devices: [device]) { env in
            let watcher = try await env.bus.connect(loop: env.loop)
            defer { watcher.close() }
            let signals = try await DeviceSignals(watcher)
            let d = try await discover(env, Self.address)
            try await env.client.connect(d, timeout: .seconds(5))
            #expect(env.client.object(d.path)?["org.bluez.Device1"]?["Paired"]?.boolValue == false)
            switch access {
            case "read":
                #expect(try await env.client.read(try env.client.characteristic(Self.secret, on: d)) == [0x2A])
            case "write":
                try await env.client.write([0x01, 0x02], to: try env.client.characteristic(Self.command, on: d))
                #expect(device.writes.map(\.characteristic) == [Self.command] && device.writes.map(\.value) == [[0x01, 0x02]])
            default:
                let c = try env.client.characteristic(Self.events, on: d)
                let stream = try await env.client.notifications(c, using: access == "startNotify" ? .startNotify : .acquireNotify)
                #expect(device.notify(Self.events, [0x07]))
                #expect(await collect(stream, count: 1) == [[0x07]])
            }
            let uuid = [
                "read": Self.secret, "write": Self.command, "startNotify": Self.events, "acquireNotify": Self.events,
            ][access]!
            #expect(securityPairings(env).map(\.characteristic) == [uuid])
            #expect(securityPairings(env).map(\.delivered) == [true])
            #expect(!env.simulator.received(Self.address).contains { $0.method == "Pair" })
            #expect(await eventually { env.client.object(d.path)?["org.bluez.Device1"]?["Paired"]?.boolValue == true })
            #expect(env.client.object(d.path)?["org.bluez.Device1"]?["Bonded"]?.boolValue == true)
            // The signal a pairing gives: Paired and Bonded in one PropertiesChanged (the watcher's
            // own connection may receive it after the client's cache took it: waited for).
            #expect(await eventually { signals.all.contains { $0.path == d.path && $0.changed["Paired"] != nil } })
            let pairing = signals.all.filter { $0.path == d.path && $0.changed["Paired"] != nil }
            #expect(pairing.map(\.changed) == [["Paired": .boolean(true), "Bonded": .boolean(true)]])
            // Bonded: the next encrypted access needs no pairing.
            try await env.client.write([0x03], to: try env.client.characteristic(Self.command, on: d))
            #expect(securityPairings(env).count == 1)
        }
    }

    @Test func refusedPairingLeavesTheAccessUnansweredUntilTheLinkDrops() async throws {
        let device = Self.device()
        try await withEmulator(Self.options, devices: [device]) { env in
            try env.simulator.updateFaults(Self.address) { $0.refusePairing = true }
            let d = try await discover(env, Self.address)
            try await env.client.connect(d, timeout: .seconds(5))
            let c = try env.client.characteristic(Self.command, on: d)
            let outcome = Mutex<String?>(nil)
            let write = Task {
                do {
                    try await env.client.write([0x01], to: c, timeout: .seconds(30))
                    outcome.withLock { $0 = "ok" }
                } catch {
                    outcome.withLock { $0 = "\(error)" }
                }
            }
            // bluetoothd sends the request again and the kernel pairs again, refused each time.
            #expect(await eventually { securityPairings(env).count >= 3 })
            #expect(securityPairings(env).allSatisfy { !$0.delivered && $0.characteristic == Self.command })
            #expect(outcome.withLock { $0 } == nil, "the write was answered while the link was up")
            try env.simulator.dropLink(Self.address)
            await write.value
            let answer = try #require(outcome.withLock { $0 })
            #expect(answer.contains("Operation failed"), "\(answer)")
            #expect(device.writes.isEmpty)
            #expect(env.client.object(d.path)?["org.bluez.Device1"]?["Paired"]?.boolValue == false)
            #expect(env.simulator.received(Self.address).filter { $0.method == "WriteValue" }.map(\.delivered) == [false])

            // A Pair of a device that refuses pairing: SMP Pairing Failed → AuthenticationFailed.
            do {
                try await env.client.pair(d, timeout: .seconds(5))
                Issue.record("Pair of a device that refuses pairing succeeded")
            } catch {
                #expect("\(error)".contains("Authentication Failed"), "\(error)")
            }
            #expect(env.client.object(d.path)?["org.bluez.Device1"]?["Paired"]?.boolValue == false)
        }
    }

    @Test func anAuthenticatedCharacteristicPairsButStaysUnansweredUntilTheLinkDrops() async throws {
        let device = Self.device()
        try await withEmulator(Self.options, devices: [device]) { env in
            let d = try await discover(env, Self.address)
            try await env.client.connect(d, timeout: .seconds(5))
            let c = try env.client.characteristic(Self.authenticated, on: d)
            let write = Task { () -> String in
                do {
                    try await env.client.write([0x01], to: c, timeout: .seconds(30))
                    return "ok"
                } catch {
                    return "\(error)"
                }
            }
            // Just Works pairs (encrypted) first; raising it to authenticated then fails each time.
            #expect(await eventually { securityPairings(env).count >= 3 })
            #expect(securityPairings(env).map(\.delivered).prefix(3) == [true, false, false])
            #expect(env.client.object(d.path)?["org.bluez.Device1"]?["Paired"]?.boolValue == true)
            try env.simulator.dropLink(Self.address)
            #expect(await write.value.contains("Operation failed"))
            #expect(device.writes.isEmpty)
        }
    }
}
