import BlueZ
import BlueZPort
import BlueZSimulator
import BridgeCore
import DBus
import DeviceSimulators
import TestSupport
import Testing

/// Several adapters on one emulated bluetoothd (issue 14; docs/bluez.md "Several adapters"): one
/// Device1 per adapter and device, a radio (range, RSSI) per adapter, one link per peripheral,
/// power per adapter; and the client and BlueZCentral pointed at hci1.
@Suite(.serialized, .timeLimit(.minutes(1))) struct MultiAdapterEmulatorTests {
    static let adapter1 = "org.bluez.Adapter1"

    /// ``Emulator/fast`` with hci0 and hci1.
    static var twoAdapters: BlueZSimulator.Options {
        var options = Emulator.fast
        options.adapters = ["hci0", "hci1"]
        return options
    }

    /// Calls `org.gatt2mqtt.Simulator1.<method>` on the control object.
    static func control(_ c: DBusConnection, _ method: String, _ arguments: [DBusValue]) async throws {
        _ = try await c.call(destination: "org.bluez", path: BlueZSimulator.controlPath, interface: "org.gatt2mqtt.Simulator1",
                             method: method, arguments: arguments)
    }

    static let unknownAdapter = DBusError.remote(name: "org.gatt2mqtt.Simulator.Error.UnknownAdapter", message: "no adapter hci7")

    func discovering(_ env: Emulator, _ adapter: BlueZAdapter) -> Bool {
        env.client.object(adapter.path)?[Self.adapter1]?["Discovering"]?.boolValue == true
    }

    @Test("a client sees both adapters, each with its own address, and the device under each")
    func bothAdaptersAndTheDeviceUnderEach() async throws {
        try await withEmulator(Self.twoAdapters, devices: [GenericDevice.batteryHeartRate()]) { env in
            let adapters = env.client.adapters
            #expect(adapters.map(\.name) == ["hci0", "hci1"])
            #expect(adapters.map { env.client.object($0.path)?[Self.adapter1]?["Address"]?.stringValue }
                == ["00:1A:7D:DA:71:13", "00:1A:7D:DA:71:14"])
            #expect(adapters.allSatisfy { env.client.isPowered($0) })
            for adapter in adapters {
                let device = try await discover(env, hrAddress, on: adapter)
                #expect(device.path == DBusObjectPath("/org/bluez/\(adapter.name)/dev_C0_FF_EE_00_00_01"))
                #expect(device.path == env.simulator.devicePath(hrAddress, adapter: adapter.name))
                #expect(env.client.object(device.path)?["org.bluez.Device1"]?["Adapter"]?.unwrapped == .objectPath(adapter.path))
            }
        }
    }

    @Test("each adapter receives the device at its own RSSI while both discover; SetRSSIOn changes one adapter's")
    func perAdapterRSSI() async throws {
        var options = RSSIOverrideEmulatorTests.steady
        options.adapters = ["hci0", "hci1"]
        try await withEmulator(options, devices: [GenericDevice.batteryHeartRate()]) { env in
            try env.simulator.setRSSI(hrAddress, -80, adapter: "hci1")
            #expect(throws: BlueZSimulatorError.unknownAdapter("hci7")) { try env.simulator.setRSSI(hrAddress, -80, adapter: "hci7") }
            let hci0 = try env.client.adapter(named: "hci0"), hci1 = try env.client.adapter(named: "hci1")
            let scan0 = try await env.client.scan(hci0), scan1 = try await env.client.scan(hci1)
            let seen0 = await collect(scan0.devices, count: 3), seen1 = await collect(scan1.devices, count: 3)
            #expect(seen0.map(\.rssi) == [-55, -55, -55])
            #expect(seen1.map(\.rssi) == [-80, -80, -80])
            #expect(seen0.allSatisfy { $0.path.parent == hci0.path } && seen1.allSatisfy { $0.path.parent == hci1.path })

            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            try await Self.control(c, "SetRSSIOn", [.string("hci0"), .string(hrAddress.lowercased()), .int16(-40)])
            let after0 = await collectUntil(scan0.devices) { $0.rssi == -40 }
            #expect(after0.last?.rssi == -40)
            #expect(await collect(scan1.devices, count: 3).map(\.rssi) == [-80, -80, -80])
            await #expect(throws: Self.unknownAdapter) {
                try await Self.control(c, "SetRSSIOn", [.string("hci7"), .string(hrAddress), .int16(-40)])
            }
            try await scan0.stop()
            try await scan1.stop()
        }
    }

    @Test("connected through hci1 (write, notify), the device neither advertises to hci0 nor connects there; then it connects through hci0")
    func oneLinkAtATime() async throws {
        var options = Self.twoAdapters
        options.advertisingInterval = nil
        options.removalDelay = .seconds(20)
        // Advertises to hci0 all along; its address sorts after the echo device's, so in one round
        // of advertisements the echo device's would go out first.
        let marker = "C0:FF:EE:00:00:09"
        try await withEmulator(options, devices: [echoDevice(), GenericDevice.batteryHeartRate(address: marker)]) { env in
            let hci0 = try env.client.adapter(named: "hci0"), hci1 = try env.client.adapter(named: "hci1")
            let on0 = try await discover(env, echoAddress, on: hci0)
            let on1 = try await discover(env, echoAddress, on: hci1)

            try await env.client.connect(on1, timeout: .seconds(5))
            #expect(env.simulator.linkAdapter(echoAddress) == "hci1")
            let n = try env.client.characteristic(echoNotify, on: on1)
            let w = try env.client.characteristic(echoWrite, on: on1)
            #expect(n.path.isDescendant(of: on1.path))
            let notes = try await env.client.notifications(n)
            try await env.client.write([1, 2, 3], to: w)
            #expect(await collect(notes, count: 1) == [[3, 2, 1]])
            #expect(env.client.connectionState(on0) == ConnectionState(connected: false, servicesResolved: false))

            // hci0 discovers (with a filter: every advertisement is reported) and hears the marker only.
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            let signals = try await DeviceSignals(c)
            let scanner = c.object("org.bluez", hci0.path)
            _ = try await scanner.call(Self.adapter1, "SetDiscoveryFilter", [.properties(["Transport": .string("le")])])
            _ = try await scanner.call(Self.adapter1, "StartDiscovery")
            #expect(env.simulator.advertise())
            let markerPath = env.simulator.devicePath(marker, adapter: "hci0")
            #expect(await eventually { signals.advertisements(markerPath).count >= 2 })  // StartDiscovery's, then the round's
            #expect(signals.advertisements(on0.path).isEmpty)

            // Connect through hci0 fails as for an absent device; the link through hci1 stays.
            let t0 = ContinuousClock.now
            await #expect(throws: BlueZError.connectionFailed("le-connection-abort-by-local (Connect on \(on0.path))")) {
                try await env.client.connect(on0, timeout: .seconds(5))
            }
            #expect(ContinuousClock.now - t0 >= .milliseconds(250))
            #expect(env.client.connectionState(on1) == ConnectionState(connected: true, servicesResolved: true))

            // The link goes: the device advertises to hci0 again and connects there.
            try await env.client.disconnect(on1)
            #expect(env.simulator.linkAdapter(echoAddress) == nil)
            #expect(env.simulator.advertise())
            #expect(await eventually { !signals.advertisements(on0.path).isEmpty })
            try await env.client.connect(on0, timeout: .seconds(5))
            #expect(env.simulator.linkAdapter(echoAddress) == "hci0")
            try await env.client.write([4], to: try env.client.characteristic(echoWrite, on: on0))
            #expect(env.simulator.received(echoAddress).last?.value == [4])
            #expect(env.client.connectionState(on1) == ConnectionState(connected: false, servicesResolved: false))
            try await env.client.disconnect(on0)
        }
    }

    @Test("powering hci1 off drops its link and stops its discovery; hci0's link and discovery carry on")
    func poweringOneAdapterOff() async throws {
        var options = Self.twoAdapters
        options.removalDelay = .seconds(20)
        try await withEmulator(options, devices: [echoDevice(), GenericDevice.batteryHeartRate()]) { env in
            let hci0 = try env.client.adapter(named: "hci0"), hci1 = try env.client.adapter(named: "hci1")
            let echo = try await discover(env, echoAddress, on: hci0)
            let hr = try await discover(env, hrAddress, on: hci1)
            try await env.client.connect(echo, timeout: .seconds(5))
            try await env.client.connect(hr, timeout: .seconds(5))
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            for a in [hci0, hci1] { _ = try await c.object("org.bluez", a.path).call(Self.adapter1, "StartDiscovery") }
            #expect(await eventually { discovering(env, hci0) && discovering(env, hci1) })

            try await Self.control(c, "SetAdapterPoweredOn", [.string("hci1"), .boolean(false)])
            #expect(await eventually { !env.client.isPowered(hci1) && !discovering(env, hci1) && !env.client.connectionState(hr).connected })
            #expect(env.client.isPowered(hci0) && discovering(env, hci0))
            #expect(env.client.connectionState(echo) == ConnectionState(connected: true, servicesResolved: true))
            try await env.client.write([7], to: try env.client.characteristic(echoWrite, on: echo))
            await #expect(throws: DBusError.remote(name: "org.bluez.Error.NotReady", message: "Resource Not Ready")) {
                _ = try await c.object("org.bluez", hci1.path).call(Self.adapter1, "StartDiscovery")
            }
            await #expect(throws: Self.unknownAdapter) {
                try await Self.control(c, "SetAdapterPoweredOn", [.string("hci7"), .boolean(false)])
            }

            // Back on (the Swift API): hci1 connects again.
            try env.simulator.setAdapterPowered(true, adapter: "hci1")
            #expect(await eventually { env.client.isPowered(hci1) })
            try await env.client.connect(hr, timeout: .seconds(5))
            #expect(env.simulator.linkAdapter(hrAddress) == "hci1")
        }
    }

    @Test("SetInRangeOn takes a device out of one adapter's range: a connect through it fails as for an absent device, through the other it works")
    func inRangeOfOneAdapter() async throws {
        var options = Self.twoAdapters
        options.removalDelay = .seconds(20)
        try await withEmulator(options, devices: [GenericDevice.batteryHeartRate()]) { env in
            let on0 = try await discover(env, hrAddress, on: try env.client.adapter(named: "hci0"))
            let on1 = try await discover(env, hrAddress, on: try env.client.adapter(named: "hci1"))
            let c = try await env.bus.connect(loop: env.loop)
            defer { c.close() }
            try await Self.control(c, "SetInRangeOn", [.string("hci1"), .string(hrAddress), .boolean(false)])
            await #expect(throws: BlueZError.connectionFailed("le-connection-abort-by-local (Connect on \(on1.path))")) {
                try await env.client.connect(on1, timeout: .seconds(5))
            }
            try await env.client.connect(on0, timeout: .seconds(5))
            #expect(env.simulator.linkAdapter(hrAddress) == "hci0")
            // Out of hci0's range as well (the Swift API): the link drops.
            try env.simulator.setInRange(hrAddress, false, adapter: "hci0")
            #expect(await eventually { !env.client.connectionState(on0).connected })
            #expect(env.simulator.linkAdapter(hrAddress) == nil)
            await #expect(throws: Self.unknownAdapter) {
                try await Self.control(c, "SetInRangeOn", [.string("hci7"), .string(hrAddress), .boolean(true)])
            }
        }
    }

    @Test("a BlueZCentral on hci1 connects, writes and is notified there; hci0's central on the same client cannot reach the device meanwhile, afterwards it can")
    func centralOnHCI1() async throws {
        var options = Self.twoAdapters
        options.removalDelay = .seconds(5)
        try await withEmulator(options, devices: [echoDevice()]) { env in
            let central1 = BlueZCentral(client: env.client, adapter: try env.client.adapter(named: "hci1"))
            let central0 = BlueZCentral(client: env.client, adapter: try env.client.adapter(named: "hci0"))
            let notify = CharacteristicID(echoNotify), write = CharacteristicID(echoWrite)
            let link = try await central1.connect(address: echoAddress, notify: [notify], timeout: .seconds(5))
            #expect(env.simulator.linkAdapter(echoAddress) == "hci1")
            try await link.write([1, 2], to: write, withResponse: true)
            var it = link.notifications.makeAsyncIterator()
            #expect(await it.next() == GATTNotification(characteristic: notify, value: [2, 1]))
            #expect(env.simulator.isAcquired(echoAddress, characteristic: echoNotify, write: false, adapter: "hci1"))
            do {
                _ = try await central0.connect(address: echoAddress, notify: [], timeout: .milliseconds(500))
                Issue.record("hci0 reached a device linked through hci1")
            } catch {
                #expect((error as? BLEError)?.kind == BLEError.Kind.timeout)
            }
            await link.disconnect()
            let link0 = try await central0.connect(address: echoAddress, notify: [], timeout: .seconds(5))
            #expect(env.simulator.linkAdapter(echoAddress) == "hci0")
            try await link0.write([3], to: write, withResponse: true)
            #expect(env.simulator.received(echoAddress).last?.value == [3])
            await link0.disconnect()
        }
    }

    @Test("a GoPro pairs through hci1 (the agent registered at /org/bluez): the bond is hci1's")
    func goProPairsThroughHCI1() async throws {
        var options = Self.twoAdapters
        options.removalDelay = .seconds(5)
        try await withEmulator(options) { env in
            let camera = SimulatedGoPro(address: "C0:FF:EE:00:00:31")
            try camera.add(to: env.simulator)
            let hci1 = try env.client.adapter(named: "hci1")
            let central = BlueZCentral(client: env.client, adapter: hci1)
            let response = CharacteristicID("b5f90075-aa8d-11e3-9046-0002a5d5c51b")
            let link = try await central.connect(address: camera.address, notify: [response], pair: true, timeout: .seconds(5))
            #expect(link.pairedOnConnect)
            // Keep-alive (setting 0x5B = 0x42) on the encrypted GP-0074; the camera answers on GP-0075.
            try await link.write([0x03, 0x5B, 0x01, 0x42], to: CharacteristicID("b5f90074-aa8d-11e3-9046-0002a5d5c51b"), withResponse: true)
            var it = link.notifications.makeAsyncIterator()
            #expect(await it.next() == GATTNotification(characteristic: response, value: [0x02, 0x5B, 0x00]))
            #expect(camera.receivedMessages.contains([0x5B, 0x01, 0x42]))
            let bonded = try #require(env.client.device(camera.address, adapter: hci1))
            #expect(await eventually { env.client.isPaired(bonded) })
            await link.disconnect()
        }
    }
}
