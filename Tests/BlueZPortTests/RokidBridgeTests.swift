import BinaryCoding
import BlueZSimulator
import BridgeConfig
import BridgeCore
import BridgeStore
import CapsCodec
import DeviceProfiles
import DeviceSimulators
import TestSupport
import Testing

/// Periodic battery notifies of the simulated glasses (rokid-caps.md `Dev_BatteryChanged`)
/// merged into the device state by the bridge core over BlueZCentral and the emulator.
@Suite(.serialized, .timeLimit(.minutes(1))) struct RokidBridgeTests {
    static let address = "C0:FF:EE:00:00:32"

    @Test func periodicBatteryNotifiesReachTheState() async throws {
        var options = Emulator.fast
        options.removalDelay = .seconds(5)
        let glasses = SimulatedRokid(address: Self.address, batteryInterval: .milliseconds(100))
        try await withEmulator(options, devices: [glasses]) { env in
            var d = DeviceConfig(id: "glasses", profile: .rokid)
            d.address = Self.address
            let store = try BridgeStore.inMemory()
            try await withBridge(env, device: d, store: store, driver: { RokidDriver(now: { 0 }) }) { mqtt in
                // Once authenticated, the driver reads the level (Dev_GetGlassInfo: 90) and the
                // glasses notify 89, 88, … every 100 ms; each lands in state. (The first periodic
                // notify can come before the Dev_GetGlassInfo answer: then the level read is 89.)
                func batteries() -> [Int] {
                    mqtt.messages("gatt2mqtt/glasses").compactMap { try? JSONValue(parsing: $0.payload)["battery"]?.intValue }
                }
                #expect(await eventually { Set(batteries()).count >= 3 })
                let seen = batteries()
                #expect(seen.first == 90 || seen.first == 89, "\(seen)")
                #expect(seen == seen.sorted(by: >), "\(seen)")  // draining, 1 % per notify
                #expect(seen.contains(89) && seen.contains(88), "\(seen)")
                // The store has what was published last (it is written first: wait for a quiet moment between notifies).
                #expect(await eventually { (try? store.states()["glasses"]?["battery"]?.intValue) == batteries().last })
                // The notifies are also events.
                #expect(mqtt.messages("gatt2mqtt/glasses/event").contains { $0.text.contains("Dev_BatteryChanged") })
            }
        }
    }

    var glassesConfig: DeviceConfig {
        var d = DeviceConfig(id: "glasses", profile: .rokid)
        d.address = Self.address
        return d
    }

    func send(_ bridge: Bridge, _ json: String) {
        bridge.handle(InboundMessage(topic: "gatt2mqtt/glasses/set", payload: Array(json.utf8)))
    }

    /// The terminal response for `transaction`, waiting up to `seconds`.
    func terminal(_ mqtt: BridgeRecorder, _ transaction: String, within seconds: Double = 5) async -> JSONValue? {
        func find() -> JSONValue? {
            mqtt.messages("gatt2mqtt/glasses/response").lazy.compactMap { try? JSONValue(parsing: $0.payload) }
                .first { $0["transaction"]?.stringValue == transaction && ["ok", "error", "expired"].contains($0["status"]?.stringValue ?? "") }
        }
        _ = await eventually(timeout: .milliseconds(Int64(seconds * 1000))) { find() != nil }
        return find()
    }

    func reads9301(_ env: Emulator) -> Int {
        env.simulator.received(Self.address).filter { $0.method == "ReadValue" && $0.characteristic?.hasPrefix("00009301") == true }.count
    }

    func authFailedEvents(_ mqtt: BridgeRecorder) -> [JSONValue] {
        mqtt.messages("gatt2mqtt/bridge/event").compactMap { try? JSONValue(parsing: $0.payload) }
            .filter { $0["type"] == "device_error" && $0["code"] == "auth_failed" }
    }

    /// §5.2: the bridge reads 0x9301, sends its record in AUTH_REQ, and the glasses (which check
    /// it) answer commands; after a reconnect it reads 0x9301 again.
    @Test func authRequestCarriesTheRecordFrom9301OnEveryConnect() async throws {
        let glasses = SimulatedRokid(address: Self.address)
        try await withEmulator(Emulator.fast, devices: [glasses]) { env in
            try await withBridge(env, device: glassesConfig, store: try BridgeStore.inMemory(), driver: { RokidDriver(now: { 0 }) }) { mqtt, bridge in
                send(bridge, #"{"command":"set_brightness","value":8,"transaction":"b1"}"#)
                #expect(await terminal(mqtt, "b1")?["status"] == "ok")
                let auths = glasses.receivedPackets.compactMap { if case let .authRequest(a) = $0 { a.serviceRecord } else { nil } }
                #expect(auths == [glasses.serviceRecord])
                #expect(reads9301(env) == 1)
                try env.simulator.dropLink(Self.address)
                #expect(await eventually { mqtt.events("device_connected") >= 2 })
                send(bridge, #"{"command":"set_volume","value":3,"transaction":"v1"}"#)
                #expect(await terminal(mqtt, "v1")?["status"] == "ok")
                #expect(reads9301(env) == 2)
                #expect(authFailedEvents(mqtt).isEmpty)
            }
        }
    }

    /// Glasses that get a record that is not theirs answer AUTH_RESP −4 and ignore REQUESTs: a
    /// command queued before the refusal and one sent after it both end `auth_failed` at once,
    /// and a `device_error` event says why.
    @Test func refusedAuthenticationEndsCommandsWithAuthFailed() async throws {
        let glasses = SimulatedRokid(address: Self.address, auth: .refuse)
        try await withEmulator(Emulator.fast, devices: [glasses]) { env in
            let driver: @Sendable () -> any DeviceDriver = { WrongRecordDriver(base: RokidDriver(now: { 0 }), record: "not-the-glasses-record") }
            try await withBridge(env, device: glassesConfig, store: try BridgeStore.inMemory(), driver: driver) { mqtt, bridge in
                send(bridge, #"{"command":"set_brightness","value":8,"transaction":"early"}"#)
                let early = await terminal(mqtt, "early")
                #expect(early?["status"] == "error" && early?["error"]?["code"] == "auth_failed", "\(String(describing: early))")
                #expect(early?["error"]?["message"]?.stringValue?.contains("AUTH_RESP retCode -4 (service record mismatch)") == true)
                let events = authFailedEvents(mqtt)
                #expect(events.count == 1 && events.first?["device"] == "glasses")
                #expect(events.first?["message"]?.stringValue?.contains("retCode -4") == true, "\(events)")
                send(bridge, #"{"command":"get_glass_info","transaction":"late"}"#)
                let late = await terminal(mqtt, "late", within: 1)
                #expect(late?["error"]?["code"] == "auth_failed", "\(String(describing: late))")
                #expect(!glasses.isAuthenticated)
                #expect(!glasses.receivedPackets.contains { $0.type == .request })  // never written
            }
        }
    }

    /// Glasses that stay silent on a wrong record: commands end `auth_failed` once the AUTH_REQ
    /// bound passes (300 ms here), not after a command timeout.
    @Test func silentGlassesEndCommandsWithAuthFailedAfterTheBound() async throws {
        let glasses = SimulatedRokid(address: Self.address, auth: .silent)
        try await withEmulator(Emulator.fast, devices: [glasses]) { env in
            let driver: @Sendable () -> any DeviceDriver = { WrongRecordDriver(base: RokidDriver(now: { 0 }, authTimeout: .milliseconds(300)), record: "stale") }
            try await withBridge(env, device: glassesConfig, store: try BridgeStore.inMemory(), driver: driver) { mqtt, bridge in
                send(bridge, #"{"command":"set_volume","value":2,"transaction":"s1"}"#)
                let r = await terminal(mqtt, "s1")
                #expect(r?["error"]?["code"] == "auth_failed", "\(String(describing: r))")
                #expect(r?["error"]?["message"]?.stringValue?.contains("no AUTH_RESP within 300 ms") == true)
                #expect(authFailedEvents(mqtt).count == 1)
                #expect(glasses.receivedPackets.contains { if case let .authRequest(a) = $0 { a.serviceRecord == "stale" } else { false } })
            }
        }
    }

    /// Glasses without 0x9301: a `device_error` naming it, and `auth_failed` for commands.
    @Test func missing9301EndsCommandsWithAuthFailed() async throws {
        let glasses = GenericDevice(address: Self.address, advertisement: SimulatedAdvertisement(name: "Rokid Glasses", uuids: ["9100"]),
                                    services: [SimulatedService("9100", characteristics: [
                                        SimulatedCharacteristic("9201", flags: ["write"]),
                                        SimulatedCharacteristic("9202", flags: ["notify"]),
                                    ])])
        try await withEmulator(Emulator.fast, devices: [glasses]) { env in
            try await withBridge(env, device: glassesConfig, store: try BridgeStore.inMemory(), driver: { RokidDriver(now: { 0 }) }) { mqtt, bridge in
                send(bridge, #"{"command":"get_glass_info","transaction":"g1"}"#)
                let r = await terminal(mqtt, "g1")
                #expect(r?["error"]?["code"] == "auth_failed", "\(String(describing: r))")
                #expect(r?["error"]?["message"]?.stringValue?.contains("0x9301 (service record) could not be read") == true, "\(String(describing: r))")
                #expect(authFailedEvents(mqtt).count == 1)
            }
        }
    }
}

/// ``RokidDriver`` reading a record other than the glasses' own from 0x9301 (a stale or foreign
/// record): AUTH_REQ then carries `record`.
struct WrongRecordDriver: DeviceDriver {
    var base: RokidDriver
    let record: String

    var notifyCharacteristics: [CharacteristicID] { base.notifyCharacteristics }
    mutating func startupRequests() throws(CommandError) -> [DeviceRequest] { try base.startupRequests() }
    mutating func encode(_ command: JSONObject, mtu: Int) throws(CommandError) -> DeviceRequest { try base.encode(command, mtu: mtu) }
    mutating func decodeRead(_ characteristic: CharacteristicID, _ value: [UInt8]) -> [DriverOutput] {
        guard var info = try? CXRConnectionInfo(decoding: value) else { return base.decodeRead(characteristic, value) }
        info.serviceRecord = record
        return base.decodeRead(characteristic, (try? info.encoded()) ?? value)
    }
    mutating func internalRequestFailed(_ request: DeviceRequest, _ error: CommandError) -> [DriverOutput] {
        base.internalRequestFailed(request, error)
    }
    mutating func receive(_ notification: GATTNotification) -> [DriverOutput] { base.receive(notification) }
    mutating func linkLost() { base.linkLost() }
}
