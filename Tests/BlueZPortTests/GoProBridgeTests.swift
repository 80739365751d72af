import BlueZ
import BlueZPort
import BlueZSimulator
import BridgeConfig
import BridgeCore
import BridgeStore
import DeviceProfiles
import DeviceSimulators
import Synchronization
import TestSupport
import Testing

/// What the bridge published.
final class BridgeRecorder: MQTTPort {
    let sent = Mutex<[OutboundMessage]>([])
    func send(_ message: OutboundMessage) { sent.withLock { $0.append(message) } }
    func events(_ type: String) -> Int {
        sent.withLock { $0.filter { $0.topic == "gatt2mqtt/bridge/event" && $0.text.contains("\"\(type)\"") }.count }
    }
    func messages(_ topic: String) -> [OutboundMessage] { sent.withLock { $0.filter { $0.topic == topic } } }
}

/// Runs a bridge core over BlueZCentral with one device until `body` returns.
func withBridge(_ env: Emulator, device: DeviceConfig, store: BridgeStore, driver: @escaping @Sendable () -> any DeviceDriver,
                _ body: (BridgeRecorder) async throws -> Void) async throws {
    try await withBridge(env, device: device, store: store, driver: driver) { mqtt, _ in try await body(mqtt) }
}

/// The same, handing `body` the bridge too (to submit commands with `handle`).
func withBridge(_ env: Emulator, device: DeviceConfig, store: BridgeStore, driver: @escaping @Sendable () -> any DeviceDriver,
                _ body: (BridgeRecorder, Bridge) async throws -> Void) async throws {
    var config = Configuration()
    config.mqtt.reconnectMin = .milliseconds(20)
    config.mqtt.reconnectMax = .milliseconds(40)
    config.devices = [device]
    let mqtt = BridgeRecorder()
    let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
    let bridge = try Bridge(configuration: config, store: store, mqtt: mqtt, central: central,
                            drivers: { _ in driver() }, tick: .milliseconds(10))
    let run = Task { await bridge.run() }
    do {
        try await body(mqtt, bridge)
    } catch {
        run.cancel()
        await run.value
        throw error
    }
    run.cancel()
    await run.value
}

/// The bridge core with the GoPro profile over BlueZCentral and the emulator, against the
/// simulated camera (encrypted characteristics, sleep timer): pairing on the first connect,
/// Pairing Finish, the registry's `paired`, and the keep-alive keeping the camera awake
/// (gopro.md §2, §9). Intervals are shortened; the behaviour is the real one.
@Suite(.serialized, .timeLimit(.minutes(1))) struct GoProBridgeTests {
    static let address = "C0:FF:EE:00:00:31"

    /// Runs a bridge with the camera until `body` returns.
    func withBridge(_ env: Emulator, keepAlive: Duration, store: BridgeStore,
                    _ body: (BridgeRecorder) async throws -> Void) async throws {
        var d = DeviceConfig(id: "camera", profile: .gopro)
        d.address = Self.address
        try await BlueZPortTests.withBridge(env, device: d, store: store, driver: { GoProDriver(keepAliveInterval: keepAlive) }, body)
    }

    func pairCalls(_ env: Emulator) -> Int { env.simulator.received(Self.address).filter { $0.method == "Pair" }.count }

    @Test func firstConnectPairsFinishesPairingAndKeepAliveKeepsTheCameraAwake() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        try await withEmulator(options) { env in
            // 3 s of idle time covers connect, pairing and subscriptions on a loaded machine (a
            // CI run on a busy one saw the camera fall asleep with 1.2 s).
            let camera = SimulatedGoPro(address: Self.address, sleepAfter: .seconds(3))
            try camera.add(to: env.simulator)
            let store = try BridgeStore.inMemory()
            try await withBridge(env, keepAlive: .milliseconds(100), store: store) { mqtt in
                #expect(await eventually { camera.pairingFinishedBy == "gatt2mqtt" })
                #expect(pairCalls(env) == 1)
                #expect(await eventually { (try? store.devices().first?.paired) == true })
                #expect(mqtt.events("device_paired") == 1)
                // Pairing Finish (03 01) went out before the registrations (§2 step 5).
                let first = try #require(camera.receivedMessages.first)
                #expect(Array(first.prefix(2)) == [0x03, 0x01])
                // Well past the 3 s sleep timer (60 keep-alives 100 ms apart: at least 6 s), and
                // the keep-alives kept it awake.
                #expect(await eventually { camera.receivedMessages.filter { $0 == [0x5B, 0x01, 0x42] }.count >= 60 })
                #expect(camera.sleepCount == 0)
                #expect(mqtt.events("device_connected") == 1)
                // Get Hardware Info (0x3C) after the registrations: the state's `hardware`, and the
                // camera's Home Assistant device republished with its model and serial number.
                #expect(camera.receivedMessages.contains([0x3C]))
                #expect((try? store.states()["camera"]?["hardware"]?["serial_number"]) == "C3501324501234")
                let battery = mqtt.messages("homeassistant/sensor/gatt2mqtt_camera/battery/config")
                #expect(battery.count == 2 && battery.last?.text.contains(#""model":"HERO12 Black""#) == true
                    && battery.last?.text.contains(#""serial_number":"C3501324501234""#) == true, "\(battery.map(\.text))")
            }
        }
    }

    @Test func aCameraThatSleepsIsWokenByTheReconnectWithoutPairingAgain() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        try await withEmulator(options) { env in
            // The camera's idle timer runs on a clock the test moves: it sleeps only once the
            // first connect (pairing, Pairing Finish, registrations) is done, however loaded the
            // machine is.
            let clock = ManualClock()
            let camera = SimulatedGoPro(address: Self.address, sleepAfter: .milliseconds(250), clock: clock)
            try camera.add(to: env.simulator)
            let store = try BridgeStore.inMemory()
            // A keep-alive slower than the camera's timer: it sleeps, the bridge reconnects.
            try await withBridge(env, keepAlive: .seconds(5), store: store) { mqtt in
                #expect(await eventually(timeout: .seconds(10)) { mqtt.events("device_paired") == 1 && camera.receivedMessages.contains([0x3C]) })
                #expect(await eventually(timeout: .seconds(10)) {
                    clock.advance(by: .milliseconds(50))
                    return camera.sleepCount >= 1
                })
                #expect(await eventually(timeout: .seconds(10)) { mqtt.events("device_connected") >= 2 })
                #expect(mqtt.events("device_disconnected") >= 1)
                #expect(pairCalls(env) == 1)  // the bond is kept: no second pairing
                #expect(mqtt.events("device_paired") == 1)
                #expect(camera.receivedMessages.filter { $0.prefix(2) == [0x03, 0x01] }.count == 1)
            }
        }
    }
}
