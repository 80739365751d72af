import AdvertisementCodec
import BinaryCoding
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

/// A passive device (`profile: advertisement`) over the emulator and BlueZCentral: the bridge's
/// discovery hears an emulated sensor whose service data changes over time, and its readings
/// reach the bridge's MQTT side through the advertisement profile and a test format; beside it a
/// GoPro still connects and answers.
@Suite(.serialized, .timeLimit(.minutes(2))) struct PassiveBridgeTests {
    static let sensorAddress = "A4:C1:38:00:00:41"
    static let cameraAddress = "C0:FF:EE:00:00:42"

    /// Service data 0xFFF0 `[packet id, temperature °C]`.
    struct CounterFormat: AdvertisementFormat {
        let name = "test_counter"
        var takesKey: Bool { false }
        func matches(_ packet: AdvertisementPacket) -> Bool { packet.serviceData(0xFFF0) != nil }
        func decode(_ packet: AdvertisementPacket, key: [UInt8]?) throws(AdvertisementError) -> Reading? {
            guard let b = packet.serviceData(0xFFF0) else { return nil }
            guard b.count == 2 else { throw .malformed("expected 2 bytes") }
            return Reading(values: ["temperature": .int(Int64(Int8(bitPattern: b[1])))], packetID: UInt32(b[0]))
        }
    }

    /// An emulated sensor that only advertises, whose advertisement the test changes.
    final class Sensor: SimulatedDevice {
        let address: String
        let current: Mutex<SimulatedAdvertisement>
        init(address: String, _ bytes: [UInt8]) {
            self.address = address
            current = Mutex(SimulatedAdvertisement(name: "Test sensor", rssi: -70, serviceData: ["FFF0": bytes]))
        }
        var advertisement: SimulatedAdvertisement { current.withLock { $0 } }
        var services: [SimulatedService] { [] }
        var mtu: Int { 23 }
        func handleWrite(_ value: [UInt8], to characteristic: String, withResponse: Bool) throws(SimulatedATTError) {}
        func handleRead(_ characteristic: String, current: [UInt8]) throws(SimulatedATTError) -> [UInt8] { current }
        func linkChanged(_ link: SimulatedLink?) {}
        func set(_ bytes: [UInt8]) { current.withLock { $0 = SimulatedAdvertisement(name: "Test sensor", rssi: -70, serviceData: ["FFF0": bytes]) } }
    }

    static let profiles = ProfileCatalog([
        GoProProfile(),
        AdvertisementProfile(resolver: AdvertisementFormatResolver(builtinNames: ["test_counter"],
                                                                   builtin: { $0 == "test_counter" ? CounterFormat() : nil }, parse: nil)),
    ])

    func withBridge(_ env: Emulator, devices: [DeviceConfig], _ body: (BridgeRecorder, Bridge) async throws -> Void) async throws {
        var config = Configuration()
        config.mqtt.reconnectMin = .milliseconds(20)
        config.mqtt.reconnectMax = .milliseconds(40)
        config.homeAssistant.enabled = false
        config.devices = devices
        let mqtt = BridgeRecorder()
        let central = BlueZCentral(client: env.client, adapter: try env.client.adapter())
        let bridge = try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: mqtt, central: central,
                                profiles: Self.profiles, tick: .milliseconds(10))
        let run = Task { await bridge.run() }
        defer { run.cancel() }
        do { try await body(mqtt, bridge) } catch {
            run.cancel()
            await run.value
            throw error
        }
        run.cancel()
        await run.value
    }

    var sensorConfig: DeviceConfig {
        var d = DeviceConfig(id: "porch", profile: .advertisement)
        d.address = Self.sensorAddress
        d.format = "test_counter"
        d.availabilityTimeout = DeviceConfig.passiveAvailabilityTimeout
        return d
    }

    func temperatures(_ mqtt: BridgeRecorder) -> [Int] {
        mqtt.messages("gatt2mqtt/porch").compactMap { (try? JSONValue(parsing: $0.payload))?["temperature"]?.intValue }
    }

    @Test func changingServiceDataReachesMQTT() async throws {
        var options = Emulator.fast
        options.advertisingInterval = .milliseconds(50)
        let sensor = Sensor(address: Self.sensorAddress, [1, 20])
        try await withEmulator(options, devices: [sensor]) { env in
            try await withBridge(env, devices: [sensorConfig]) { mqtt, _ in
                #expect(await eventually(timeout: .seconds(10)) { temperatures(mqtt).contains(20) })
                #expect(mqtt.messages("gatt2mqtt/porch/availability").last?.text.contains("online") == true)
                sensor.set([2, 21])
                #expect(await eventually(timeout: .seconds(10)) { temperatures(mqtt).contains(21) })
                sensor.set([3, 0xFB])  // -5 °C
                #expect(await eventually(timeout: .seconds(10)) { temperatures(mqtt).contains(-5) })
                // Each reading once, in order (a state published for a moved RSSI repeats the last one).
                #expect(temperatures(mqtt).reduce(into: [Int]()) { if $0.last != $1 { $0.append($1) } } == [20, 21, -5])
                // Bad bytes are reported, not fatal; the next good reading is published.
                sensor.set([4])
                #expect(await eventually(timeout: .seconds(10)) { mqtt.events("device_error") >= 1 })
                sensor.set([5, 30])
                #expect(await eventually(timeout: .seconds(10)) { temperatures(mqtt).last == 30 })
                // Never connected.
                #expect(!env.simulator.received(Self.sensorAddress).contains { $0.method == "Connect" })
            }
        }
    }

    @Test func aGoProStillConnectsAndAnswersBesideAPassiveDevice() async throws {
        var options = Emulator.fast
        options.advertisingInterval = .milliseconds(50)
        options.removalDelay = .seconds(5)
        let sensor = Sensor(address: Self.sensorAddress, [1, 20])
        let camera = SimulatedGoPro(address: Self.cameraAddress)
        try await withEmulator(options, devices: [sensor]) { env in
            try camera.add(to: env.simulator)
            var cam = DeviceConfig(id: "camera", profile: .gopro)
            cam.address = Self.cameraAddress
            try await withBridge(env, devices: [sensorConfig, cam]) { mqtt, bridge in
                #expect(await eventually(timeout: .seconds(10)) { temperatures(mqtt).contains(20) })
                #expect(await eventually(timeout: .seconds(10)) {
                    mqtt.messages("gatt2mqtt/camera/availability").last?.text.contains("online") == true
                })
                bridge.handle(InboundMessage(topic: "gatt2mqtt/camera/set", payload: Array(#"{"command":"set_shutter","value":false,"transaction":"g1"}"#.utf8)))
                #expect(await eventually(timeout: .seconds(10)) {
                    mqtt.messages("gatt2mqtt/camera/response").contains { $0.text.contains("\"g1\"") && $0.text.contains("\"ok\"") }
                })
                // The discovery kept running through the connect: the sensor is still heard.
                sensor.set([2, 22])
                #expect(await eventually(timeout: .seconds(10)) { temperatures(mqtt).contains(22) })
            }
        }
    }
}
