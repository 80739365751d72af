import BlueZ
import BlueZPort
import BlueZSimulator
import BridgeCore
import DBus
import DeviceSimulators
import Foundation
import GoProCodec
import Reactor
import Synchronization
import TestSupport
import Testing

/// The BlueZ client on one event loop against the emulator on another (docs/bluez.md "On an
/// event loop"), through a real dbus-daemon. The delivering tasks prefer the client's loop, as
/// the bridge's do: notifications that arrive before the handler is installed are buffered and
/// handed over on the task that installs it.
@Suite(.serialized, .timeLimit(.minutes(1))) struct BlueZLoopTests {
    /// A bus, the emulator on `simLoop`, a client on `clientLoop`; all closed afterwards, then
    /// both loops must be left with no watch, timer or hook.
    static func withLoops(devices: [any SimulatedDevice],
                          _ body: (BlueZSimulator, BlueZClient, EventLoop, EventLoop) async throws -> Void) async throws
    {
        let simLoop = EventLoop(name: "t-bluez-sim")
        let clientLoop = EventLoop(name: "t-bluez-client")
        defer {
            simLoop.shutdown()
            clientLoop.shutdown()
        }
        let bus = try await PrivateBus.started()
        defer { bus.stop() }
        let sc = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: simLoop)
        let sim = BlueZSimulator(connection: sc, options: Emulator.fast)
        #expect(sim.loop === simLoop)
        try await sim.start()
        for d in devices { try sim.add(d) }
        let client = try await BlueZClient.connect(.address(bus.address), callTimeout: .seconds(5), loop: clientLoop)
        #expect(client.loop === clientLoop)
        do {
            try await body(sim, client, simLoop, clientLoop)
        } catch {
            client.close()
            sim.stop()
            sc.close()
            throw error
        }
        client.close()
        sim.stop()
        sc.close()
        let empty = EventLoop.Registrations(watches: 0, timers: 0, hooks: 0)
        #expect(await eventuallyAsync { await clientLoop.registrations() == empty })
        #expect(await eventuallyAsync { await simLoop.registrations().watches == 0 })
    }

    @Test func writeAnsweredThroughAcquireNotifyOnBothLoopsThenLinkLoss() async throws {
        let simLoop = Mutex<EventLoop?>(nil)
        let writesOnSimLoop = Mutex<[Bool]>([])
        let device = GenericDevice(
            address: "C0:FF:EE:00:00:31",
            advertisement: SimulatedAdvertisement(name: "LoopEcho", uuids: ["12345678-1234-5678-1234-56789abcdef0"]),
            services: [SimulatedService("12345678-1234-5678-1234-56789abcdef0", characteristics: [
                SimulatedCharacteristic("12345678-1234-5678-1234-56789abcdef1", flags: ["write", "write-without-response"]),
                SimulatedCharacteristic("12345678-1234-5678-1234-56789abcdef2", flags: ["notify"]),
            ])],
            onWrite: { (w: SimulatedWrite, d: GenericDevice) throws(SimulatedATTError) in
                writesOnSimLoop.withLock { $0.append(simLoop.withLock { $0 }?.inLoop ?? false) }
                d.notify("12345678-1234-5678-1234-56789abcdef2", w.value.reversed())
            })
        try await Self.withLoops(devices: [device]) { sim, client, sLoop, cLoop in
            simLoop.withLock { $0 = sLoop }
            let central = BlueZCentral(client: client, adapter: try client.adapter())
            let notifyID = CharacteristicID("12345678-1234-5678-1234-56789abcdef2")
            let writeID = CharacteristicID("12345678-1234-5678-1234-56789abcdef1")
            let link = try await central.connect(address: device.address, notify: [notifyID], timeout: .seconds(5))
            // AcquireNotify is offered, so the link subscribed through the socket.
            #expect(sim.isAcquired(device.address, characteristic: notifyID.uuid, write: false))
            let got = Mutex<[(GATTNotification, Bool)]>([])
            let delivering = Task(executorPreference: cLoop) { await link.deliverNotifications { n in got.withLock { $0.append((n, cLoop.inLoop)) } } }
            for i in 1...20 {
                try await link.write([UInt8(i), 0xAB], to: writeID, withResponse: i % 2 == 0)
            }
            #expect(await eventually { got.withLock { $0.count } == 20 })
            let values = got.withLock { $0.map(\.0.value) }
            #expect(values == (1...20).map { [0xAB, UInt8($0)] })
            #expect(got.withLock { $0.allSatisfy { $0.1 } })
            #expect(writesOnSimLoop.withLock { $0 }.count == 20)
            #expect(writesOnSimLoop.withLock { $0.allSatisfy { $0 } })
            #expect(sim.received(device.address).filter { $0.method == "WriteValue" }.count == 20)

            // Link loss: the delivery ends, the emulator's socket is released.
            try sim.dropLink(device.address)
            #expect(await eventually { !sim.isAcquired(device.address, characteristic: notifyID.uuid, write: false) })
            await delivering.value
            await #expect(throws: BLEError.self) { try await link.write([1], to: writeID, withResponse: true) }
        }
    }

    @Test func startNotifyValuesReachTheHandlerOnTheClientLoop() async throws {
        let hr = GenericDevice.batteryHeartRate(address: "C0:FF:EE:00:00:32")
        try await Self.withLoops(devices: [hr]) { sim, client, _, cLoop in
            let central = BlueZCentral(client: client, adapter: try client.adapter(), notifyMethod: .startNotify)
            let measurement = CharacteristicID("2A37", service: "180D")
            let link = try await central.connect(address: hr.address, notify: [measurement], timeout: .seconds(5))
            #expect(!sim.isAcquired(hr.address, characteristic: "2A37", write: false))
            #expect(sim.notifySessions(hr.address, characteristic: "2A37").count == 1)
            let got = Mutex<[([UInt8], Bool)]>([])
            let delivering = Task(executorPreference: cLoop) { await link.deliverNotifications { n in got.withLock { $0.append((n.value, cLoop.inLoop)) } } }
            // PropertiesChanged(Value) through the bus → the client's signal pump on its loop.
            for bpm in UInt8(60)..<UInt8(70) { #expect(hr.notify("2A37", [0x00, bpm])) }
            #expect(await eventually { got.withLock { $0.count } == 10 })
            #expect(got.withLock { $0.map(\.0) } == (60..<70).map { [0x00, UInt8($0)] })
            #expect(got.withLock { $0.allSatisfy(\.1) })
            await link.disconnect()
            await delivering.value
        }
    }

    @Test func simulatedGoProAnswersAKeepAliveOnTheLoop() async throws {
        let camera = SimulatedGoPro(address: "C0:FF:EE:00:01:31", encrypted: false)
        try await Self.withLoops(devices: [camera]) { sim, client, _, cLoop in
            let central = BlueZCentral(client: client, adapter: try client.adapter())
            let response = CharacteristicID(GoProCharacteristic.settingsResponse.uuid)
            let link = try await central.connect(address: camera.address, notify: [response], timeout: .seconds(5))
            #expect(sim.isAcquired(camera.address, characteristic: response.uuid, write: false))
            let got = Mutex<[([UInt8], Bool)]>([])
            let delivering = Task(executorPreference: cLoop) { await link.deliverNotifications { n in got.withLock { $0.append((n.value, cLoop.inLoop)) } } }
            // Keep-alive (setting 0x5B = 0x42) on GP-0074 → `02 5B 00` on GP-0075 (gopro.md §9).
            try await link.write([0x03, 0x5B, 0x01, 0x42], to: CharacteristicID(GoProCharacteristic.settings.uuid),
                                 withResponse: true)
            #expect(await eventually { got.withLock { $0.count } == 1 })
            #expect(got.withLock { $0.first?.0 } == [0x02, 0x5B, 0x00])
            #expect(got.withLock { $0.first?.1 } == true)
            await link.disconnect()
            await delivering.value
        }
    }
}
