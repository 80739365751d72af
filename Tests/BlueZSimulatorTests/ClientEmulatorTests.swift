import BlueZ
import BlueZSimulator
import DBus
import Foundation
import TestSupport
import Testing

/// The client against the emulator, each test on its own private bus (spec/bluez.md behaviours).
@Suite(.serialized, .timeLimit(.minutes(1))) struct ClientEmulatorTests {
    @Test func scanFindsDeviceWithAdvertisingDataThenItVanishes() async throws {
        try await withEmulator(Emulator.quickRemoval, devices: [GenericDevice.batteryHeartRate()]) { env in
            let adapter = try env.client.adapter(named: "hci0")
            #expect(adapter.path == "/org/bluez/hci0")
            #expect(throws: BlueZError.self) { try env.client.adapter(named: "hci9") }
            #expect(env.client.isPowered(adapter))
            #expect(env.client.device(hrAddress) == nil)  // not discovered yet

            let scan = try await env.client.scan(adapter, filter: DiscoveryFilter(uuids: ["180D"]))
            let seen = await collect(scan.devices, count: 1)
            let d = try #require(seen.first)
            #expect(d.address == hrAddress)
            #expect(d.name == "Sim HR")
            #expect(d.rssi == -55)
            #expect(d.uuids.contains("0000180d-0000-1000-8000-00805f9b34fb"))
            #expect(d.manufacturerData == [0xFFFF: [0x01, 0x02]])
            #expect(d.serviceData == ["0000180f-0000-1000-8000-00805f9b34fb": [85]])
            #expect(env.client.object(adapter.path)?["org.bluez.Adapter1"]?["Discovering"]?.boolValue == true)

            try await scan.stop()
            let path = d.path
            #expect(await eventually { env.client.object(adapter.path)?["org.bluez.Adapter1"]?["Discovering"]?.boolValue == false })
            // Unpaired devices vanish after discovery stops (behaviour 4; 300 ms here).
            #expect(await eventually { env.client.object(path) == nil })
            #expect(!env.simulator.isExported(hrAddress))
        }
    }

    @Test func filterHidesNonMatchingDevices() async throws {
        try await withEmulator(devices: [GenericDevice.batteryHeartRate(), echoDevice()]) { env in
            let scan = try await env.client.scan(try env.client.adapter(), filter: DiscoveryFilter(pattern: "Echo"))
            // StartDiscovery's reply comes after the devices it found (bluetoothd and the emulator
            // report them at once); stopping ends the stream with all of them in it.
            try await scan.stop()
            let seen = await collectToEnd(scan.devices)
            #expect(seen?.isEmpty == false && seen?.allSatisfy { $0.address == echoAddress } == true, "\(seen?.map(\.address) ?? [])")
        }
    }

    @Test func connectWaitsForServicesResolvedAndReads() async throws {
        try await withEmulator(Emulator.quickRemoval, devices: [GenericDevice.batteryHeartRate(), echoDevice()]) { env in
            let device = try await discover(env, hrAddress)
            #expect(throws: BlueZError.self) { try env.client.characteristic("2A19", on: device) }
            try await env.client.connect(device, timeout: .seconds(5))
            #expect(env.client.connectionState(device) == ConnectionState(connected: true, servicesResolved: true))
            let battery = try env.client.characteristic("2A19", service: "180F", on: device)
            #expect(battery.flags == ["read", "notify"])
            #expect(battery.mtu == 247)
            #expect(try await env.client.read(battery) == [85])
            #expect(throws: BlueZError.notFound("no characteristic 2A19 on \(hrAddress)")) {
                try env.client.characteristic("2A19", service: "180D", on: device)
            }
            // Connected devices do not vanish after discovery stopped.
            #expect(try await removalDelayPassed(env, marker: echoAddress))
            #expect(env.simulator.isExported(hrAddress))
            try await env.client.disconnect(device)
            #expect(env.client.connectionState(device) == ConnectionState(connected: false, servicesResolved: false))
        }
    }

    @Test func gattCallsBeforeServicesResolvedFailAsOn566() async throws {
        var options = Emulator.fast
        options.resolveDelay = .milliseconds(400)
        try await withEmulator(options, devices: [GenericDevice.batteryHeartRate()]) { env in
            let device = try await discover(env, hrAddress)
            try await env.client.connect(device)
            let battery = try env.client.characteristic("2A19", on: device)
            try await env.client.disconnect(device)
            // Raw Connect returns before ServicesResolved; the cached GATT objects exist but fail.
            _ = try await env.client.connection.call(destination: "org.bluez", path: device.path, interface: "org.bluez.Device1",
                                                  method: "Connect")
            #expect(env.client.connectionState(device).servicesResolved == false)
            do {
                _ = try await env.client.read(battery)
                Issue.record("read before ServicesResolved succeeded")
            } catch {
                #expect(error as? BlueZError == .notConnected("Not connected (ReadValue on \(battery.path))"))
            }
            await #expect(throws: BlueZError.self) { _ = try await env.client.notifications(battery) }
            try await env.client.connect(device)
            #expect(try await env.client.read(battery) == [85])
        }
    }

    @Test func writeRequestAndCommand() async throws {
        try await withEmulator(devices: [echoDevice(mtu: 23)]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let w = try env.client.characteristic(echoWrite, on: device)
            #expect(w.mtu == 23)
            try await env.client.write([1, 2, 3], to: w, type: .request)
            try await env.client.write([4, 5], to: w, type: .command)
            // 45 bytes as commands: split to MTU - 3 = 20.
            let long = Array(0..<45).map(UInt8.init)
            try await env.client.write(long, to: w, type: .command)
            // Unsplit, BlueZ refuses a command longer than MTU - 3 (behaviour 7).
            await #expect(throws: BlueZError.failed(name: "org.bluez.Error.Failed",
                                                    message: "Failed to initiate write (WriteValue on \(w.path))")) {
                try await env.client.write(long, to: w, type: .command, split: false)
            }
            // Not writable: NotPermitted; ATT error from the device: att(0x80).
            let r = try env.client.characteristic(echoRead, on: device)
            await #expect(throws: BlueZError.notPermitted("Write not permitted (WriteValue on \(r.path))")) {
                try await env.client.write([1], to: r)
            }
            await #expect(throws: BlueZError.att(0x80)) { try await env.client.write([0xEE], to: w) }
            // A command to a characteristic without write-without-response is dropped silently.
            let wo = try env.client.characteristic(echoWriteOnly, on: device)
            try await env.client.write([9], to: wo, type: .command)

            let writes = env.simulator.received(echoAddress).filter { $0.method == "WriteValue" }
            let chunks: [[UInt8]] = [Array(long[0..<20]), Array(long[20..<40]), Array(long[40..<45])]
            let expectedValues: [[UInt8]] = [[1, 2, 3], [4, 5]] + chunks + [long, [1], [0xEE], [9]]
            #expect(writes.map(\.value) == expectedValues)
            #expect(writes.map(\.writeType) == ["request", "command", "command", "command", "command", "command", "request",
                                                "request", "command"])
            #expect(writes.map(\.delivered) == [true, true, true, true, true, false, false, true, false])
        }
    }

    @Test func notificationsWithoutReadEchoes() async throws {
        let device0 = echoDevice()
        try await withEmulator(devices: [device0]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let n = try env.client.characteristic(echoNotify, on: device)
            let w = try env.client.characteristic(echoWrite, on: device)
            let stream = try await env.client.notifications(n, using: .startNotify)
            #expect(await eventually { env.client.object(n.path)?["org.bluez.GattCharacteristic1"]?["Notifying"]?.boolValue == true })
            // Two reads (each emits PropertiesChanged(Value)), then a write that makes the device notify.
            #expect(try await env.client.read(n) == [0xAA])
            #expect(try await env.client.read(n) == [0xAA])
            try await env.client.write([1, 2, 3], to: w)
            #expect(device0.notify(echoNotify, [0xAA]))  // same bytes as the read: still a notification
            let got = await collect(stream, count: 3, timeout: .seconds(1))
            #expect(got == [[3, 2, 1], [0xAA]])
            // A second StartNotify from the same connection is a no-op; StopNotify ends it.
            let again = try await env.client.notifications(n, using: .startNotify)
            _ = again
            #expect(env.simulator.notifySessions(echoAddress, characteristic: echoNotify).count == 1)
            try await env.client.stopNotifications(n)
            #expect(env.simulator.notifySessions(echoAddress, characteristic: echoNotify).isEmpty)
            #expect(!device0.notify(echoNotify, [1]))
        }
    }

    @Test func notifySessionsBelongToTheCallingConnection() async throws {
        let hr = GenericDevice.batteryHeartRate()
        try await withEmulator(devices: [hr]) { env in
            let device = try await discover(env, hrAddress)
            try await env.client.connect(device)
            let other = try await BlueZClient.connect(.address(env.bus.address), loop: env.loop)
            let m = try other.characteristic("2A37", on: device)
            let stream = try await other.notifications(m, using: .startNotify)
            #expect(env.simulator.notifySessions(hrAddress, characteristic: "2A37").count == 1)
            // The heart-rate control point makes the device notify.
            let cp = try other.characteristic("2A39", on: device)
            try await other.write([0x01], to: cp)
            #expect(await collect(stream, count: 1) == [[0x08, 0, 0, 0]])
            other.close()
            #expect(await eventually { env.simulator.notifySessions(hrAddress, characteristic: "2A37").isEmpty })
            #expect(await eventually {
                env.client.object(m.path)?["org.bluez.GattCharacteristic1"]?["Notifying"]?.boolValue == false
            })
        }
    }

    @Test(arguments: [BlueZSimulator.Version.v5_66, .v5_81])
    func concurrentConnectIsInProgress(version: BlueZSimulator.Version) async throws {
        var options = Emulator.fast
        options.version = version
        options.connectDelay = .milliseconds(300)
        try await withEmulator(options, devices: [GenericDevice.batteryHeartRate()]) { env in
            let device = try await discover(env, hrAddress)
            async let first: Void = env.client.connect(device)
            // Wait for the first Connect to reach the emulator (a fixed sleep flaked under load).
            #expect(await eventually { env.simulator.received(hrAddress).contains { $0.method == "Connect" } })
            do {
                try await env.client.connect(device)
                Issue.record("second Connect succeeded")
            } catch {
                #expect(blueZCode(error) == "in_progress")
            }
            try await first
            #expect(env.client.connectionState(device).servicesResolved)
        }
    }

    @Test func absentRefusingAndCancelledConnects() async throws {
        try await withEmulator(devices: [GenericDevice.batteryHeartRate()]) { env in
            let device = try await discover(env, hrAddress)
            try env.simulator.setInRange(hrAddress, false)
            let t0 = ContinuousClock.now
            await #expect(throws: BlueZError.connectionFailed("le-connection-abort-by-local (Connect on \(device.path))")) {
                try await env.client.connect(device)
            }
            #expect(ContinuousClock.now - t0 >= .milliseconds(250))
            try env.simulator.setInRange(hrAddress, true)
            try env.simulator.updateFaults(hrAddress) { $0.refuseConnections = true }
            do {
                try await env.client.connect(device)
                Issue.record("refused connect succeeded")
            } catch {
                #expect(blueZCode(error) == "connection_failed")
            }
            // A Disconnect while connecting cancels the attempt.
            try env.simulator.updateFaults(hrAddress) { $0 = .init(); $0.silent = true }
            let connects = env.simulator.received(hrAddress).filter { $0.method == "Connect" }.count
            async let attempt: Void = env.client.connect(device)
            // The attempt is under way once the emulator has the call.
            #expect(await eventually { env.simulator.received(hrAddress).filter { $0.method == "Connect" }.count > connects })
            _ = try await env.client.connection.call(destination: "org.bluez", path: device.path,
                                                  interface: "org.bluez.Device1", method: "Disconnect")
            do {
                try await attempt
                Issue.record("cancelled connect succeeded")
            } catch {
                #expect(blueZCode(error) == "cancelled")
            }
            // Injected errors answer instead of the method.
            try env.simulator.updateFaults(hrAddress) {
                $0 = .init()
                $0.errors["Connect"] = .init(name: "org.bluez.Error.NotReady", message: "Resource Not Ready")
            }
            await #expect(throws: BlueZError.notReady("Resource Not Ready (Connect on \(device.path))")) {
                try await env.client.connect(device)
            }
        }
    }

    @Test func linkDropDuringWriteRequest() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        try await withEmulator(options, devices: [echoDevice()]) { env in
            let device = try await discover(env, echoAddress)
            try await env.client.connect(device)
            let states = env.client.connectionStates(device)
            let n = try env.client.characteristic(echoNotify, on: device)
            let notes = try await env.client.notifications(n)
            let w = try env.client.characteristic(echoWrite, on: device)
            try env.simulator.updateFaults(echoAddress) { $0.dropLinkOnWrite = 2 }
            try await env.client.write([1], to: w)
            await #expect(throws: BlueZError.failed(name: "org.bluez.Error.Failed",
                                                    message: "Operation failed (WriteValue on \(w.path))")) {
                try await env.client.write([2], to: w)
            }
            // Then ServicesResolved=false and Connected=false arrive; the notification stream ends.
            let seen = await collect(states, count: 3)
            #expect(seen == [ConnectionState(connected: true, servicesResolved: true),
                             ConnectionState(connected: true, servicesResolved: false),
                             ConnectionState(connected: false, servicesResolved: false)]
                    || seen.last == ConnectionState(connected: false, servicesResolved: false))
            #expect(seen.last == ConnectionState(connected: false, servicesResolved: false))
            let rest = await collect(notes, count: 5, timeout: .seconds(1))
            #expect(rest == [[1]])
            // Calls now fail as not connected.
            do {
                try await env.client.write([3], to: w)
                Issue.record("write after link loss succeeded")
            } catch {
                #expect(blueZCode(error) == "not_connected")
            }
        }
    }

    @Test func reconnectReResolvesCharacteristics() async throws {
        let hr = GenericDevice.batteryHeartRate()
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        try await withEmulator(options, devices: [hr]) { env in
            let device = try await discover(env, hrAddress)
            try await env.client.connect(device)
            let before = try env.client.characteristic("2A37", on: device)
            let s1 = try await env.client.notifications(before)
            try env.simulator.dropLink(hrAddress)
            #expect(await eventually { !env.client.connectionState(device).connected })
            #expect(await collectToEnd(s1) == [], "the old characteristic's stream ends with the link, empty")
            #expect(throws: BlueZError.self) { try env.client.characteristic("2A37", on: device) }
            try await env.client.connect(device)
            let after = try env.client.characteristic("2A37", on: device)
            #expect(after.uuid == before.uuid)
            let s2 = try await env.client.notifications(after)
            #expect(hr.notify("2A37", [0x00, 72]))
            #expect(await collect(s2, count: 1) == [[0x00, 72]])
            #expect(env.simulator.received(hrAddress).filter { $0.method == "Connect" }.count == 2)
        }
    }

    @Test func adoptedConnectionNeedsNoScanAndNoConnect() async throws {
        try await withEmulator { env in
            try env.simulator.add(GenericDevice.batteryHeartRate(), alreadyConnected: true)
            let device = try await env.client.waitForDevice(hrAddress, timeout: .seconds(20))
            try await env.client.connect(device)
            #expect(try await env.client.read(try env.client.characteristic("2A19", on: device)) == [85])
            #expect(!env.simulator.received(hrAddress).contains { $0.method == "Connect" })
        }
    }

    @Test func powerOffStopsDiscoveryAndDropsLinks() async throws {
        try await withEmulator(devices: [GenericDevice.batteryHeartRate()]) { env in
            let adapter = try env.client.adapter()
            let device = try await discover(env, hrAddress)
            try await env.client.connect(device)
            try await env.client.setPowered(adapter, false)
            #expect(!env.client.isPowered(adapter))
            #expect(await eventually { !env.client.connectionState(device).connected })
            await #expect(throws: BlueZError.self) { _ = try await env.client.scan(adapter) }
            do {
                try await env.client.connect(device)
                Issue.record("connect with the adapter off succeeded")
            } catch {
                #expect(blueZCode(error) == "not_ready")
            }
            try await env.client.setPowered(adapter, true)
            try await env.client.connect(device)
        }
    }

    @Test func pairTrustRemove() async throws {
        try await withEmulator(Emulator.quickRemoval, devices: [GenericDevice.batteryHeartRate(), echoDevice()]) { env in
            let device = try await discover(env, hrAddress)
            try await env.client.registerPairingAgent()
            // What the agent answers: PairingAgentTests.
            await #expect(throws: BlueZError.self) { try await env.client.registerAgent(path: "/gatt2mqtt/agent") }
            try await env.client.pair(device)
            await #expect(throws: BlueZError.self) { try await env.client.pair(device) }
            try await env.client.setTrusted(device, true)
            #expect(await eventually {
                let p = env.client.object(device.path)?["org.bluez.Device1"]
                return p?["Paired"]?.boolValue == true && p?["Trusted"]?.boolValue == true
            })
            // Paired devices do not vanish after discovery stopped.
            #expect(try await removalDelayPassed(env, marker: echoAddress))
            #expect(env.client.object(device.path) != nil)
            try await env.client.remove(device)
            #expect(await eventually { env.client.object(device.path) == nil })
        }
    }

    /// As bluetoothd 5.66 does it (seen on the real stack): once services are resolved, `UUIDs`
    /// lists the GATT primary services, GAP and GATT included, and a scan that sees the device
    /// again reports those, not only what it advertises.
    @Test func resolvedServicesBecomeTheDevicesUUIDs() async throws {
        try await withEmulator(devices: [GenericDevice.batteryHeartRate()]) { env in
            let device = try await discover(env, hrAddress)
            let advertised = try #require(try env.client.object(device.path)?["org.bluez.Device1"]?["UUIDs"]?.decode(as: [String].self))
            #expect(!advertised.contains("00001800-0000-1000-8000-00805f9b34fb"))
            try await env.client.connect(device, timeout: .seconds(5))
            let resolved = ["00001800-0000-1000-8000-00805f9b34fb", "00001801-0000-1000-8000-00805f9b34fb",
                            "0000180d-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb"]
            #expect(try env.client.object(device.path)?["org.bluez.Device1"]?["UUIDs"]?.decode(as: [String].self) == resolved)
            try await env.client.disconnect(device)
            let scan = try await env.client.scan(try env.client.adapter())
            let again = await collect(scan.devices, count: 1)
            #expect(again.first?.uuids == resolved, "\(again)")
            try await scan.stop()
        }
    }

    /// As bluetoothd 5.66 does it (seen on the real stack, docs/bluez.md "The real stack"):
    /// RemoveDevice of a connected device disconnects it first, after the disconnect timer,
    /// with ServicesResolved and then Connected going false, and only then removes its objects.
    @Test func removeOfAConnectedDeviceDisconnectsItFirst() async throws {
        var options = Emulator.fast
        options.disconnectDelay = .milliseconds(300)
        try await withEmulator(options, devices: [GenericDevice.batteryHeartRate()]) { env in
            let device = try await discover(env, hrAddress)
            try await env.client.connect(device, timeout: .seconds(5))
            let watcher = try await env.bus.connect(loop: env.loop)
            defer { watcher.close() }
            let signals = try await DeviceSignals(watcher)
            let started = ContinuousClock.now
            try await env.client.remove(device)
            #expect(ContinuousClock.now - started >= .milliseconds(300), "removed before the disconnect timer")
            #expect(await eventually { env.client.object(device.path) == nil })
            #expect(await eventually { signals.all.filter { $0.path == device.path }.count >= 2 })
            let changes = signals.all.filter { $0.path == device.path }.flatMap { $0.changed.keys.sorted() }
            #expect(changes == ["ServicesResolved", "Connected"], "\(changes)")
        }
    }

    @Test func independentClientSeesTheEmulator() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(20)
        try await withEmulator(options, devices: [GenericDevice.batteryHeartRate()]) { env in
            let a = env.bus.address
            let objects = try await tool("/usr/bin/gdbus", ["call", "--address", a, "--dest", "org.bluez", "--object-path", "/",
                                                         "--method", "org.freedesktop.DBus.ObjectManager.GetManagedObjects"])
            #expect(objects.contains("'/org/bluez/hci0'"))
            #expect(objects.contains("'org.bluez.Adapter1'"))
            _ = try await tool("/usr/bin/dbus-send", ["--bus=\(a)", "--print-reply", "--dest=org.bluez", "/org/bluez/hci0",
                                                   "org.bluez.Adapter1.StartDiscovery"])
            let dev = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
            #expect(await eventually { env.simulator.isExported(hrAddress) })
            _ = try await tool("/usr/bin/gdbus", ["call", "--address", a, "--dest", "org.bluez", "--object-path", dev,
                                               "--method", "org.bluez.Device1.Connect"])
            #expect(await eventuallyAsync {
                (try? await tool("/usr/bin/gdbus", ["call", "--address", a, "--dest", "org.bluez", "--object-path", dev,
                                                 "--method", "org.freedesktop.DBus.Properties.Get",
                                                 "org.bluez.Device1", "ServicesResolved"]))?.contains("true") == true
            })
            let chars = try await tool("/usr/bin/gdbus", ["call", "--address", a, "--dest", "org.bluez", "--object-path", "/",
                                                       "--method", "org.freedesktop.DBus.ObjectManager.GetManagedObjects"])
            let battery = try #require(chars.split(separator: "'").first {
                $0.hasPrefix(dev + "/service") && $0.contains("/char") && chars.contains("'00002a19-0000-1000-8000-00805f9b34fb'")
            })
            _ = battery
            let device = try #require(env.client.device(hrAddress))
            let path = try env.client.characteristic("2A19", on: device).path
            let value = try await tool("/usr/bin/gdbus", ["call", "--address", a, "--dest", "org.bluez", "--object-path", path.rawValue,
                                                       "--method", "org.bluez.GattCharacteristic1.ReadValue", "{}"])
            #expect(value.contains("[byte 0x55]"))
        }
    }

    @Test func controlInterfaceOverDBus() async throws {
        try await withEmulator(devices: [GenericDevice.batteryHeartRate()]) { env in
            let base = ["call", "--address", env.bus.address, "--dest", "org.bluez", "--object-path", "/org/gatt2mqtt/Simulator",
                        "--method"]
            let device = try await discover(env, hrAddress)
            _ = try await tool("/usr/bin/gdbus", base + ["org.gatt2mqtt.Simulator1.SetFaults", hrAddress,
                                                         "{'RefuseConnections': <true>}"])
            do {
                try await env.client.connect(device)
                Issue.record("refused connect succeeded")
            } catch {
                #expect(blueZCode(error) == "connection_failed")
            }
            _ = try await tool("/usr/bin/gdbus", base + ["org.gatt2mqtt.Simulator1.SetFaults", hrAddress,
                                                         "{'RefuseConnections': <false>}"])
            _ = try await tool("/usr/bin/gdbus", base + ["org.gatt2mqtt.Simulator1.InjectError", hrAddress, "ReadValue",
                                                         "org.bluez.Error.NotPermitted", "Not paired"])
            try await env.client.connect(device)
            let m = try env.client.characteristic("2A37", on: device)
            let stream = try await env.client.notifications(m, using: .startNotify)
            let sent = try await tool("/usr/bin/gdbus", base + ["org.gatt2mqtt.Simulator1.Notify", hrAddress, "2A37", "[byte 0x00, 0x50]"])
            #expect(sent.contains("true"))
            #expect(await collect(stream, count: 1) == [[0x00, 0x50]])
            await #expect(throws: BlueZError.notPermitted("Not paired (ReadValue on \(try env.client.characteristic("2A19", on: device).path))")) {
                _ = try await env.client.read(try env.client.characteristic("2A19", on: device))
            }
            let received = try await tool("/usr/bin/gdbus", base + ["org.gatt2mqtt.Simulator1.Received", hrAddress])
            #expect(received.contains("'Method': <'StartNotify'>"))
            await #expect(throws: (any Error).self) {
                _ = try await tool("/usr/bin/gdbus", base + ["org.gatt2mqtt.Simulator1.DropLink", "00:00:00:00:00:00"])
            }
            _ = try await tool("/usr/bin/gdbus", base + ["org.gatt2mqtt.Simulator1.DropLink", hrAddress])
            #expect(await eventually { !env.client.connectionState(device).connected })
        }
    }

    @Test func disconnectWindowRSSIInvalidationAndAConnectedDeviceStays() async throws {
        var options = Emulator.quickRemoval
        options.disconnectDelay = .milliseconds(400)
        try await withEmulator(options, devices: [GenericDevice.batteryHeartRate(), echoDevice()]) { env in
            let adapter = try env.client.adapter()
            let scan = try await env.client.scan(adapter)
            let device = try await env.client.waitForDevice(hrAddress, timeout: .seconds(20))
            #expect(await eventually { env.client.object(device.path)?["org.bluez.Device1"]?["RSSI"] != nil })
            try await env.client.connect(device)
            try await scan.stop()
            // RSSI is invalidated when discovery stops (behaviour 4); the connected device stays.
            #expect(await eventually { env.client.object(device.path)?["org.bluez.Device1"]?["RSSI"] == nil })
            let m = try env.client.characteristic("2A37", on: device)
            // Disconnect takes a while; StartNotify meanwhile fails NotConnected (behaviour 5).
            async let gone: Void = env.client.disconnect(device)
            #expect(await eventually { env.simulator.received(hrAddress).contains { $0.method == "Disconnect" } })
            await #expect(throws: BlueZError.notConnected("Not Connected (StartNotify on \(m.path))")) {
                _ = try await env.client.notifications(m, using: .startNotify)
            }
            try await gone
            // Unpaired and disconnected with no discovery: a device a client connected is no
            // longer temporary (bluetoothd 5.66, seen on the real stack), so it stays, GATT objects
            // included, past removalDelay (300 ms here); RemoveDevice removes it, children first.
            #expect(try await removalDelayPassed(env, marker: echoAddress))
            #expect(env.client.object(device.path) != nil && env.client.object(m.path) != nil)
            let removals = env.client.connectionStates(device)
            try await env.client.remove(device)
            #expect(await eventually { env.client.object(device.path) == nil })
            #expect(env.client.object(m.path) == nil)
            #expect(await collect(removals, count: 5, timeout: .seconds(0.2)).count <= 1)
        }
    }

    @Test func silentDeviceAndReplyDelayTimeOut() async throws {
        try await withEmulator(devices: [GenericDevice.batteryHeartRate()]) { env in
            let device = try await discover(env, hrAddress)
            try await env.client.connect(device)
            let battery = try env.client.characteristic("2A19", on: device)
            try env.simulator.updateFaults(hrAddress) { $0.replyDelay = .milliseconds(300) }
            let t0 = ContinuousClock.now
            #expect(try await env.client.read(battery) == [85])
            #expect(ContinuousClock.now - t0 >= .milliseconds(280))
            await #expect(throws: BlueZError.self) { _ = try await env.client.read(battery, timeout: .milliseconds(100)) }
            try env.simulator.updateFaults(hrAddress) { $0 = .init(); $0.silent = true }
            do {
                _ = try await env.client.read(battery, timeout: .milliseconds(200))
                Issue.record("read from a silent device succeeded")
            } catch {
                #expect(blueZCode(error) == "timeout")
            }
            // The silent device's pending call fails once the link drops.
            let reads = env.simulator.received(hrAddress).filter { $0.method == "ReadValue" }.count
            async let pending = env.client.read(battery, timeout: .seconds(5))
            #expect(await eventually { env.simulator.received(hrAddress).filter { $0.method == "ReadValue" }.count > reads })
            try env.simulator.dropLink(hrAddress)
            do {
                _ = try await pending
                Issue.record("read survived link loss")
            } catch {
                #expect(error as? BlueZError == .failed(name: "org.bluez.Error.Failed", message: "Operation failed (ReadValue on \(battery.path))"))
            }
        }
    }
}
