import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import BridgeCore

/// A passive device (`profile: advertisement`) in the core, over fakes: the bridge's discovery
/// hands its advertisements to its session, which publishes the decoded state, availability and
/// RSSI, drops repeats, reports bad bytes, and goes offline after the silence on the bridge's clock.
@Suite struct PassiveDeviceTests {
    /// Service data 0xFCD2 as `[packet id, temperature in tenths of a degree (Int8)]`; empty bytes
    /// are an error, other service data not this format.
    struct TenthsDecoder: PassiveDecoder {
        func decode(_ ad: Advertisement) throws(PassiveDecodeError) -> PassiveReading? {
            guard let bytes = ad.serviceData["0000fcd2-0000-1000-8000-00805f9b34fb"] else { return nil }
            guard bytes.count == 2 else { throw PassiveDecodeError("expected 2 bytes, got \(bytes.count)") }
            return PassiveReading(values: ["temperature": .double(Double(Int8(bitPattern: bytes[1])) / 10)], packetID: UInt32(bytes[0]))
        }
    }

    struct TestPassiveProfile: DeviceProfile {
        let id: ProfileID = .advertisement
        func makeDriver(for device: DeviceConfig, context: DriverContext) throws -> any DeviceDriver { TestDriver() }
        func makeDecoder(for device: DeviceConfig, formats: [String: JSONValue]) throws -> (any PassiveDecoder)? { TenthsDecoder() }
        func homeAssistantModel(for device: DeviceConfig, hardware: JSONObject) -> HomeAssistantDiscovery.Model {
            .init(manufacturer: "Test", model: "Passive")
        }
        /// A sensor per field of the state.
        func homeAssistantEntities(for device: DeviceConfig, topics: Topics, state: JSONObject) -> [HomeAssistantDiscovery.Entity] {
            state.keys.filter { $0 != "rssi" && $0 != "last_seen" }.map { .init(.sensor, $0, $0, .number([$0])) }
        }
    }

    /// A central whose discovery the test feeds; connects always fail (nothing may connect).
    final class ScriptedScanner: BLECentral, BLEAdapterControl {
        let scans = Mutex<[AsyncStream<Advertisement>.Continuation]>([])
        let connects = Atomic<Int>(0)
        func connect(address: String, notify: [CharacteristicID], timeout: Duration) async throws(BLEError) -> any BLELink {
            connects.add(1, ordering: .relaxed)
            throw BLEError(.notFound, address)
        }
        func scan() async throws(BLEError) -> BLEScan {
            let (stream, c) = AsyncStream.makeStream(of: Advertisement.self)
            scans.withLock { $0.append(c) }
            return BLEScan(advertisements: stream, stop: { c.finish() })
        }
        func pair(address: String, timeout: Duration) async throws(BLEError) {}
        func forget(address: String) async throws(BLEError) {}
        /// Sends `ad` to every running discovery; false when none runs yet.
        func advertise(_ ad: Advertisement) -> Bool {
            let all = scans.withLock { $0 }
            for c in all { c.yield(ad) }
            return !all.isEmpty
        }
    }

    static let address = "A4:C1:38:00:00:01"

    static func temperature(_ m: OutboundMessage) -> Double? {
        (try? JSONValue(parsing: m.payload))?.objectValue?["temperature"]?.doubleValue
    }

    static func ad(_ bytes: [UInt8], address: String = address, rssi: Int = -60) -> Advertisement {
        Advertisement(address: address, rssi: rssi, serviceData: ["0000fcd2-0000-1000-8000-00805f9b34fb": bytes])
    }

    struct Harness {
        let mqtt = FakeMQTT()
        let central = ScriptedScanner()
        let clock: ManualClock?
        let bridge: Bridge

        let store: BridgeStore

        init(address: String = PassiveDeviceTests.address, minInterval: Duration = .zero, discovery: Bool = false,
             store: BridgeStore? = nil, clusterNode: String? = nil, clock: ManualClock? = ManualClock()) throws {
            var config = Configuration()
            config.homeAssistant.enabled = discovery
            if let clusterNode {
                config.nodeID = clusterNode
                config.cluster.enabled = true
                config.cluster.claimSettle = .milliseconds(50)
                config.cluster.seenInterval = .milliseconds(50)
                config.cluster.lostAfter = .seconds(5)
            }
            var d = DeviceConfig(id: "porch", profile: .advertisement)
            d.address = address
            d.format = "tenths"
            d.minInterval = minInterval
            d.availabilityTimeout = DeviceConfig.passiveAvailabilityTimeout
            config.devices = [d]
            self.store = try store ?? BridgeStore.inMemory()
            bridge = try Bridge(configuration: config, store: self.store, mqtt: mqtt, central: central,
                                profiles: ProfileCatalog([TestPassiveProfile()]), tick: .milliseconds(10), clock: clock?.bridgeClock)
            self.clock = clock
        }

        var session: DeviceSession { bridge.session("porch")! }

        /// Advertises once the bridge's discovery runs.
        func advertise(_ ad: Advertisement) async throws {
            let sent = await eventually { central.advertise(ad) }
            try #require(sent, "the bridge's discovery never ran")
        }

        func states(_ n: Int) async throws -> [JSONObject] {
            try await mqtt.wait(for: "gatt2mqtt/porch", count: n).map { try #require(try JSONValue(parsing: $0.payload).objectValue) }
        }
    }

    @Test func advertisementsBecomeStateAndAvailability() async throws {
        let h = try Harness()
        try await h.running {
            try await h.advertise(Self.ad([1, 215]))  // -4.1 °C
            let state = try await h.states(1)[0]
            #expect(state["temperature"]?.doubleValue == -4.1)
            #expect(state["rssi"] == .int(-60))
            #expect(state["last_seen"] != nil)
            let retained = try #require(h.mqtt.messages("gatt2mqtt/porch").first)
            #expect(retained.retain && retained.qos == 1)
            let availability = try await h.mqtt.wait(for: "gatt2mqtt/porch/availability") { $0.contains { $0.text.contains("online") } }
            #expect(availability.last?.retain == true)
            // A repeat (same packet id) and the same value publish nothing; a new one does.
            try await h.advertise(Self.ad([1, 100]))
            try await h.advertise(Self.ad([2, 215]))
            try await h.advertise(Self.ad([3, 20]))
            let states = try await h.mqtt.wait(for: "gatt2mqtt/porch") { $0.contains { Self.temperature($0) == 2 } }
            #expect(!states.contains { Self.temperature($0) == 10 })
            // Never connected.
            #expect(h.central.connects.load(ordering: .relaxed) == 0)
            // The health topic says it is passive and heard (the frontend's "heard" pill), not "no link".
            let health = await h.session.health()
            #expect(health["passive"] == .bool(true) && health["available"] == .bool(true) && health["connected"] == .bool(false))
        }
    }

    @Test func badBytesAreReportedAndTheNextGoodOneIsPublished() async throws {
        let h = try Harness()
        try await h.running {
            try await h.advertise(Self.ad([1]))
            let events = try await h.mqtt.wait(for: "gatt2mqtt/bridge/event") { $0.contains { $0.text.contains("device_error") } }
            let event = try #require(events.first { $0.text.contains("device_error") }?.text)
            #expect(event.contains("porch") && event.contains("expected 2 bytes"))
            // A flood of bad bytes: counted, reported once per interval, no state.
            for _ in 0..<20 { try await h.advertise(Self.ad([9])) }
            try await h.advertise(Self.ad([4, 120]))
            #expect(try await h.states(1)[0]["temperature"]?.doubleValue == 12)
            #expect(h.mqtt.messages("gatt2mqtt/bridge/event").filter { $0.text.contains("device_error") }.count == 1)
        }
    }

    @Test func silenceMakesItOfflineOnTheBridgesClock() async throws {
        let h = try Harness()
        try await h.running {
            try await h.advertise(Self.ad([1, 100]))
            _ = try await h.states(1)
            _ = try await h.mqtt.wait(for: "gatt2mqtt/porch/availability") { $0.contains { $0.text.contains("online") } }
            h.clock!.advance(by: .seconds(899))
            h.session.tick()
            await h.session.settled()
            #expect(!h.mqtt.messages("gatt2mqtt/porch/availability").contains { $0.text.contains("offline") })
            h.clock!.advance(by: .seconds(1))
            h.session.tick()
            await h.session.settled()
            #expect(h.mqtt.messages("gatt2mqtt/porch/availability").last?.text.contains("offline") == true)
            // Back: online again.
            try await h.advertise(Self.ad([2, 100]))
            _ = try await h.mqtt.wait(for: "gatt2mqtt/porch/availability") { $0.last?.text.contains("online") == true }
        }
    }

    @Test func minIntervalHoldsUntilTheTick() async throws {
        let h = try Harness(minInterval: .seconds(60))
        try await h.running {
            try await h.advertise(Self.ad([1, 100]))
            _ = try await h.states(1)
            try await h.advertise(Self.ad([2, 110]))
            try await h.advertise(Self.ad([3, 120]))
            await h.session.settled()
            #expect(h.mqtt.messages("gatt2mqtt/porch").count == 1)
            h.clock!.advance(by: .seconds(60))
            h.session.tick()
            let states = try await h.states(2)
            #expect(states[1]["temperature"]?.doubleValue == 12)
        }
    }

    @Test func anAddressPatternMatchesRotatingAddresses() async throws {
        let h = try Harness(address: "A4:C1:38:*")
        try await h.running {
            try await h.advertise(Self.ad([1, 100], address: "11:22:33:44:55:66"))  // not it
            try await h.advertise(Self.ad([2, 115], address: "A4:C1:38:12:34:56"))
            #expect(try await h.states(1)[0]["temperature"]?.doubleValue == 11.5)
        }
    }

    /// Home Assistant discovery follows the fields the sensor sent: a new field republishes the
    /// device's config messages, and a restart publishes the stored fields at once.
    @Test func discoveryFollowsTheFieldsSeenAcrossARestart() async throws {
        let topic = "homeassistant/sensor/gatt2mqtt_porch/temperature/config"
        let store = try BridgeStore.inMemory()
        let h = try Harness(discovery: true, store: store)
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/bridge/state")
            _ = try await h.mqtt.wait(for: "homeassistant/sensor/gatt2mqtt_porch/rssi/config")
            #expect(h.mqtt.messages(topic).isEmpty)  // not sent yet
            try await h.advertise(Self.ad([1, 100]))
            let config = try await h.mqtt.wait(for: topic)
            #expect(config[0].retain && config[0].text.contains("value_json"))
        }
        let again = try Harness(discovery: true, store: store)
        try await again.running {
            _ = try await again.mqtt.wait(for: topic)  // from the stored state, before any advertisement
        }
    }

    /// `device/add` with `profile: advertisement` adds a passive device at once (no link to wait
    /// for), persisted like other runtime devices; its advertisements then reach its state.
    @Test func deviceAddTakesAPassiveDeviceAtOnce() async throws {
        let h = try Harness()
        try await h.running {
            let answer = try await BridgeRequestTests.request(h.bridge, h.mqtt, "device/add",
                #"{"id":"cellar","address":"A4:C1:38:00:00:02","profile":"advertisement","format":"tenths","bindkey":"00112233445566778899aabbccddeeff","timeout":0.001}"#)
            #expect(answer["status"] == "ok")
            #expect(answer["data"]?["device"]?["bindkey"] == .string(Configuration.redacted))
            let stored = try h.store.runtimeDevices()
            #expect(stored.map(\.id) == ["cellar"] && stored[0].config.contains("00112233445566778899aabbccddeeff"))
            try await h.advertise(Self.ad([1, 50], address: "A4:C1:38:00:00:02"))
            let state = try await h.mqtt.wait(for: "gatt2mqtt/cellar")
            #expect(Self.temperature(state[0]) == 5)
        }
    }

    /// The discovery for passive devices is started again when it ends.
    @Test func theDiscoveryIsRestartedWhenItEnds() async throws {
        let h = try Harness()
        try await h.running {
            try await h.advertise(Self.ad([1, 10]))
            _ = try await h.states(1)
            for c in h.central.scans.withLock({ $0 }) { c.finish() }
            // Within PassiveDevices.restartAfter (1 s on the bridge's clock) a new discovery runs.
            #expect(await eventually { h.clock!.advance(by: .milliseconds(100)); return h.central.scans.withLock { $0.count } >= 2 })
            h.central.scans.withLock { $0.removeFirst() }
            try await h.advertise(Self.ad([2, 20]))
            #expect(try await h.states(2)[1]["temperature"]?.doubleValue == 2)
        }
    }

    /// Several bridges (docs/scale-out.md): every node hears the sensor, only the owner by the
    /// cluster's claims publishes; when the owner dies (its Will), this node claims the sensor
    /// and publishes from then on. The other node is played by the test through the retained
    /// cluster topics.
    @Test func inAClusterOnlyTheOwnerPublishes() async throws {
        let h = try Harness(clusterNode: "b", clock: nil)
        func inject(_ topic: String, _ json: String) {
            h.bridge.handle(InboundMessage(topic: "gatt2mqtt/bridge/" + topic, payload: Array(json.utf8), retain: true))
        }
        inject("nodes/a/state", #"{"state":"online","node":"a"}"#)
        inject("owners/porch", #"{"node":"a","epoch":1}"#)
        inject("nodes/a/seen", #"{"node":"a","devices":{"A4:C1:38:00:00:01":{"rssi":-40,"age_ms":0,"connected":false}}}"#)
        try await h.running {
            // This node hears it (its report says so) but does not publish: a owns it.
            let heard = await eventually {
                _ = h.central.advertise(Self.ad([1, 100]))
                return h.mqtt.messages("gatt2mqtt/bridge/nodes/b/seen").contains { $0.text.contains(Self.address) }
            }
            try #require(heard)
            _ = h.central.advertise(Self.ad([2, 110]))
            await h.session.settled()
            #expect(h.mqtt.messages("gatt2mqtt/porch").isEmpty)
            #expect(h.mqtt.messages("gatt2mqtt/porch/availability").isEmpty)
            // a dies: b claims the sensor and publishes its next reading. The sensor advertises
            // on meanwhile, as a real one does: b counts a sighting only for lost_after (5 s),
            // and the test process can stall longer than that while the suite runs in parallel.
            inject("nodes/a/state", #"{"state":"offline","node":"a"}"#)
            let claimed = await eventually {
                _ = h.central.advertise(Self.ad([3, 120]))
                return h.mqtt.messages("gatt2mqtt/bridge/owners/porch").contains { $0.text.contains(#""node":"b""#) }
            }
            try #require(claimed, "\(h.mqtt.messages("gatt2mqtt/bridge/nodes/b/seen").suffix(3).map(\.text))")
            let published = await eventually {
                _ = h.central.advertise(Self.ad([3, 120]))
                return !h.mqtt.messages("gatt2mqtt/porch").isEmpty
            }
            #expect(published)
            #expect(h.mqtt.messages("gatt2mqtt/porch").allSatisfy { Self.temperature($0) == 12 })
        }
    }
}

extension PassiveDeviceTests.Harness {
    func running(_ body: () async throws -> Void) async throws { try await bridge.running(body) }
}
