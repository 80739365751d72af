import BlueZ
import BlueZSimulator
import DBus
import Foundation
import TestSupport
import Testing

/// AcquireWrite / AcquireNotify between the client and the emulator (bluez
/// doc/org.bluez.GattCharacteristic.rst; spec/bluez.md "Objects a client sees").
@Suite(.serialized, .timeLimit(.minutes(1))) struct AcquireTests {
    static let char1 = "org.bluez.GattCharacteristic1"

    func property(_ env: Emulator, _ c: BlueZCharacteristic, _ name: String) -> Bool? {
        env.client.object(c.path)?[Self.char1]?[name]?.boolValue
    }

    @Test func acquiredPropertiesExistOnlyWhereOffered() async throws {
        try await withEmulator(devices: [echoDevice()]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let n = try env.client.characteristic(echoNotify, on: device)
            let w = try env.client.characteristic(echoWrite, on: device)
            let r = try env.client.characteristic(echoRead, on: device)
            let wo = try env.client.characteristic(echoWriteOnly, on: device)
            #expect(property(env, n, "NotifyAcquired") == false)
            #expect(property(env, n, "WriteAcquired") == nil)
            #expect(property(env, w, "WriteAcquired") == false)
            #expect(property(env, w, "NotifyAcquired") == nil)
            #expect(property(env, r, "NotifyAcquired") == nil)
            #expect(property(env, wo, "WriteAcquired") == nil)
            #expect(env.client.offersAcquireNotify(n))
            #expect(!env.client.offersAcquireNotify(r))
            // Not offered → NotSupported, as bluetoothd.
            await #expect(throws: BlueZError.notSupported("Operation is not supported (AcquireWrite on \(wo.path))")) {
                _ = try await env.client.acquireWrite(wo)
            }
            await #expect(throws: BlueZError.notSupported("Operation is not supported (AcquireNotify on \(r.path))")) {
                _ = try await env.client.acquireNotify(r)
            }
        }
    }

    @Test func acquireNotifyDeliversThroughTheSocketUntilReleased() async throws {
        let device0 = echoDevice()
        try await withEmulator(devices: [device0]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let n = try env.client.characteristic(echoNotify, on: device)
            let w = try env.client.characteristic(echoWrite, on: device)
            let acquired = try await env.client.acquireNotify(n)
            #expect(acquired.mtu == 23)
            #expect(await eventually { property(env, n, "NotifyAcquired") == true && property(env, n, "Notifying") == true })
            #expect(env.simulator.isAcquired(echoAddress, characteristic: echoNotify, write: false))
            // Reads still answer, but their PropertiesChanged echo never enters the socket.
            #expect(try await env.client.read(n) == [0xAA])
            try await env.client.write([1, 2, 3], to: w)
            #expect(device0.notify(echoNotify, [0x55]))
            // (An iterator, not `collect`: cancelling the iterating task ends the stream, which releases.)
            var it = acquired.values.makeAsyncIterator()
            #expect(await it.next() == [3, 2, 1])
            #expect(await it.next() == [0x55])
            // Exclusivity: a second AcquireNotify and any StartNotify are NotPermitted.
            await #expect(throws: BlueZError.notPermitted("Notify acquired (AcquireNotify on \(n.path))")) {
                _ = try await env.client.acquireNotify(n)
            }
            let other = try await BlueZClient.connect(.address(env.bus.address), loop: env.loop)
            defer { other.close() }
            await #expect(throws: BlueZError.notPermitted("Notify acquired (StartNotify on \(n.path))")) {
                _ = try await other.notifications(try other.characteristic(echoNotify, on: device), using: .startNotify)
            }
            // Closing our end is the release.
            acquired.release()
            #expect(await eventually { property(env, n, "NotifyAcquired") == false && property(env, n, "Notifying") == false })
            #expect(!env.simulator.isAcquired(echoAddress, characteristic: echoNotify, write: false))
            #expect(await it.next() == nil)
            #expect(!device0.notify(echoNotify, [0x01]))  // nobody subscribed any more
        }
    }

    @Test func startNotifySessionMakesAcquireNotifyInProgressAndAutomaticFallsBack() async throws {
        let device0 = echoDevice()
        try await withEmulator(devices: [device0]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let other = try await BlueZClient.connect(.address(env.bus.address), loop: env.loop)
            defer { other.close() }
            let theirs = try await other.notifications(try other.characteristic(echoNotify, on: device), using: .startNotify)
            let n = try env.client.characteristic(echoNotify, on: device)
            await #expect(throws: BlueZError.inProgress("In Progress (AcquireNotify on \(n.path))")) {
                _ = try await env.client.acquireNotify(n)
            }
            // .automatic: AcquireNotify answered InProgress → StartNotify.
            let mine = try await env.client.notifications(n)
            #expect(env.simulator.notifySessions(echoAddress, characteristic: echoNotify).count == 2)
            #expect(device0.notify(echoNotify, [0x42]))
            #expect(await collect(mine, count: 1) == [[0x42]])
            #expect(await collect(theirs, count: 1) == [[0x42]])
            #expect(env.simulator.received(echoAddress).filter { $0.method == "AcquireNotify" }.count == 2)
        }
    }

    @Test func automaticNotificationsUseAcquireNotifyAndStopReleases() async throws {
        let device0 = echoDevice()
        try await withEmulator(devices: [device0]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let n = try env.client.characteristic(echoNotify, on: device)
            let stream = try await env.client.notifications(n)
            #expect(env.simulator.isAcquired(echoAddress, characteristic: echoNotify, write: false))
            #expect(env.simulator.notifySessions(echoAddress, characteristic: echoNotify).isEmpty)
            #expect(device0.notify(echoNotify, [7]))
            var it = stream.makeAsyncIterator()
            #expect(await it.next() == [7])
            try await env.client.stopNotifications(n)
            #expect(await eventually { !env.simulator.isAcquired(echoAddress, characteristic: echoNotify, write: false) })
            #expect(await it.next() == nil)
            // Forced StartNotify on the same characteristic.
            let classic = try await env.client.notifications(n, using: .startNotify)
            #expect(env.simulator.notifySessions(echoAddress, characteristic: echoNotify).count == 1)
            #expect(!env.simulator.isAcquired(echoAddress, characteristic: echoNotify, write: false))
            #expect(device0.notify(echoNotify, [8]))
            #expect(await collect(classic, count: 1) == [[8]])
        }
    }

    @Test func acquireWriteHandsPacketsToTheDeviceAsCommands() async throws {
        let device0 = echoDevice()
        try await withEmulator(devices: [device0]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let w = try env.client.characteristic(echoWrite, on: device)
            let writer = try await env.client.acquireWrite(w)
            #expect(writer.mtu == 23)
            #expect(writer.maximumLength == 20)
            #expect(await eventually { property(env, w, "WriteAcquired") == true })
            try writer.write([1, 2, 3])
            try writer.write(Array(repeating: 9, count: 20))
            #expect(throws: BlueZError.valueTooLong(length: 21, maximum: 20)) { try writer.write(Array(repeating: 9, count: 21)) }
            #expect(await eventually { device0.writes.count == 2 })
            #expect(device0.writes.map(\.value) == [[1, 2, 3], Array(repeating: 9, count: 20)])
            #expect(device0.writes.allSatisfy { !$0.withResponse && $0.characteristic == echoWrite })
            let records = env.simulator.received(echoAddress).filter { $0.method == "WriteValue" }
            #expect(records.map(\.writeType) == ["command", "command"])
            #expect(records.allSatisfy { $0.sender == "socket" && $0.delivered })
            await #expect(throws: BlueZError.notPermitted("Write acquired (AcquireWrite on \(w.path))")) {
                _ = try await env.client.acquireWrite(w)
            }
            writer.release()
            #expect(await eventually { property(env, w, "WriteAcquired") == false })
            #expect(throws: BlueZError.self) { try writer.write([1]) }
            // Released: it can be acquired again.
            let again = try await env.client.acquireWrite(w)
            try again.write([4])
            #expect(await eventually { device0.writes.last?.value == [4] })
        }
    }

    @Test func linkLossClosesAcquiredSockets() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        let device0 = echoDevice()
        try await withEmulator(options, devices: [device0]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let n = try env.client.characteristic(echoNotify, on: device)
            let w = try env.client.characteristic(echoWrite, on: device)
            let acquired = try await env.client.acquireNotify(n)
            let writer = try await env.client.acquireWrite(w)
            try env.simulator.dropLink(echoAddress)
            // The notify socket reads EOF: the stream finishes.
            let finished = Collected<Bool>()
            let reader = Task {
                for await _ in acquired.values {}
                finished.items.withLock { $0.append(true) }
            }
            defer { reader.cancel() }
            #expect(await eventually { !finished.items.withLock { $0.isEmpty } })
            #expect(await eventually { (try? writer.write([1])) == nil })
            do {
                try writer.write([1])
                Issue.record("write on a closed socket succeeded")
            } catch {
                #expect(blueZCode(error) == "not_connected")
            }
            #expect(await eventually {
                property(env, n, "NotifyAcquired") == false && property(env, w, "WriteAcquired") == false
            })
            #expect(!env.simulator.isAcquired(echoAddress, characteristic: echoNotify, write: false))
            #expect(!env.simulator.isAcquired(echoAddress, characteristic: echoWrite, write: true))
            // After reconnecting, acquiring works again.
            try await env.client.connect(device)
            let n2 = try env.client.characteristic(echoNotify, on: device)
            let again = try await env.client.acquireNotify(n2)
            #expect(device0.notify(echoNotify, [3]))
            #expect(await collect(again.values, count: 1) == [[3]])
        }
    }

    @Test func clientCloseReleasesItsSockets() async throws {
        try await withEmulator(devices: [echoDevice()]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let other = try await BlueZClient.connect(.address(env.bus.address), loop: env.loop)
            let n = try other.characteristic(echoNotify, on: device)
            // Kept alive on purpose: dropping the stream would release the socket by itself.
            let stream = try await other.notifications(n)
            #expect(env.simulator.isAcquired(echoAddress, characteristic: echoNotify, write: false))
            other.close()
            #expect(await eventually { !env.simulator.isAcquired(echoAddress, characteristic: echoNotify, write: false) })
            var it = stream.makeAsyncIterator()
            #expect(await it.next() == nil)
        }
    }

    @Test func gdbusAcquireNotifyAndReadValueReplyShapes() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(20)
        try await withEmulator(options, devices: [echoDevice()]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let n = try env.client.characteristic(echoNotify, on: device)
            let base = ["call", "--address", env.bus.address, "--dest", "org.bluez", "--object-path", n.path.rawValue, "--method"]
            let acquired = try await tool("/usr/bin/gdbus", base + ["org.bluez.GattCharacteristic1.AcquireNotify", "{}"])
            // GLib prints the fd as an index into the message's fd list, then the MTU.
            #expect(acquired.trimmingCharacters(in: .whitespacesAndNewlines) == "(handle 0, uint16 23)")
            // gdbus exited: its end of the socket closed, which releases the characteristic.
            #expect(await eventually { !env.simulator.isAcquired(echoAddress, characteristic: echoNotify, write: false) })
            #expect(await eventually { property(env, n, "NotifyAcquired") == false })
            let value = try await tool("/usr/bin/gdbus", base + ["org.bluez.GattCharacteristic1.ReadValue", "{}"])
            #expect(value.trimmingCharacters(in: .whitespacesAndNewlines) == "([byte 0xaa],)")
            let introspection = try await tool("/usr/bin/gdbus", ["introspect", "--address", env.bus.address, "--dest", "org.bluez",
                                                                 "--object-path", n.path.rawValue])
            #expect(introspection.contains("AcquireNotify(in  a{sv} options,"))
            #expect(introspection.contains("out h fd,"))
            #expect(introspection.contains("readonly b NotifyAcquired = false;"))
        }
    }
}
