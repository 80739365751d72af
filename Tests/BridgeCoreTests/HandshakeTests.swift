import BinaryCoding
import BridgeConfig
import BridgeStore
import Synchronization
import TestSupport
import Testing
@testable import BridgeCore

/// The session's connect-time handshake contract (docs/architecture.md "On connect"), over
/// fakes: a start-up read whose value yields the next request (`.request`), that request's own
/// timeout, `internalRequestFailed`, and a driver that refuses commands after `.deviceError`.
@Suite struct HandshakeTests {
    /// Reads 2A19 on connect, then writes `[1, value]` expecting its echo within 100 ms; without
    /// the echo every command ends `auth_failed`. Commands: `{"command":"ping","value":N}`.
    struct HandshakeDriver: DeviceDriver {
        let notifyCharacteristics = [CharacteristicID("FFF2")]
        var refusal: CommandError?
        var failures: [String] = []

        mutating func startupRequests() throws(CommandError) -> [DeviceRequest] {
            [DeviceRequest(writes: [], read: CharacteristicID("2A19"))]
        }
        mutating func decodeRead(_ characteristic: CharacteristicID, _ value: [UInt8]) -> [DriverOutput] {
            [.request(DeviceRequest(writes: [.init(CharacteristicID("FFF1"), [1] + value)], expect: "hello", timeout: .milliseconds(100)))]
        }
        mutating func internalRequestFailed(_ request: DeviceRequest, _ error: CommandError) -> [DriverOutput] {
            let e = CommandError(.authFailed, "no hello: \(error.message)")
            refusal = e
            return [.deviceError(e)]
        }
        mutating func encode(_ command: JSONObject, mtu: Int) throws(CommandError) -> DeviceRequest {
            if let refusal { throw refusal }
            let v = UInt8(command["value"]?.intValue ?? 0)
            return DeviceRequest(writes: [.init(CharacteristicID("FFF1"), [1, v])], expect: "ping:\(v)")
        }
        mutating func receive(_ n: GATTNotification) -> [DriverOutput] {
            guard n.value.count == 2 else { return [] }
            return [.response(key: n.value == [1, 42] ? "hello" : "ping:\(n.value[1])", result: .success(nil))]
        }
        mutating func linkLost() { refusal = nil }
    }

    /// The bridge's clock: time moves only when a test advances it, so a loaded machine cannot
    /// make the 100 ms bound expire early or late.
    let clock = ManualClock()

    func bridge(_ device: FakeDevice, _ mqtt: FakeMQTT) throws -> Bridge {
        var config = Configuration()
        var d = DeviceConfig(id: "dev", profile: .custom)
        d.address = "C0:FF:EE:00:00:09"
        d.commandTimeout = .seconds(5)
        config.devices = [d]
        return try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: mqtt,
                          central: FakeCentral(["C0:FF:EE:00:00:09": device]), drivers: { _ in HandshakeDriver() }, tick: .milliseconds(10), clock: clock.bridgeClock)
    }

    func run(_ bridge: Bridge, _ body: () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await bridge.run() }
            defer { group.cancelAll() }
            try await body()
        }
    }

    /// The first terminal response (`ok`/`error`/`expired`), waiting up to 30 s (it comes within
    /// milliseconds; the deadline only bounds a failure, and a loaded machine stalled this wait
    /// past 3 s once).
    func terminal(_ mqtt: FakeMQTT) async throws -> JSONValue? {
        @Sendable func status(_ m: OutboundMessage) -> JSONValue? { (try? JSONValue(parsing: m.payload))?["status"] }
        let isTerminal: @Sendable (OutboundMessage) -> Bool = { ["ok", "error", "expired"].contains(status($0)?.stringValue ?? "") }
        let r = try? await mqtt.wait(for: "gatt2mqtt/dev/response", timeout: .seconds(30), "a terminal response") { $0.contains(where: isTerminal) }
        return try r?.first(where: isTerminal).map { try JSONValue(parsing: $0.payload) }
    }

    @Test func theReadValueLeadsToTheNextStepBeforeCommands() async throws {
        let device = FakeDevice(), mqtt = FakeMQTT()
        let b = try bridge(device, mqtt)
        try await run(b) {
            b.handle(InboundMessage(topic: "gatt2mqtt/dev/set", payload: Array(#"{"command":"ping","value":7,"transaction":"p"}"#.utf8)))
            let r = try await terminal(mqtt)
            #expect(r?["status"] == "ok", "\(String(describing: r))")
            #expect(device.writes == [[1, 42], [1, 7]])  // the handshake's write (from the read's 42) first
            #expect(device.state.withLock { $0.reads } == 1)
        }
    }

    @Test func aSilentStepTimesOutOnItsOwnBoundAndCommandsFail() async throws {
        let device = FakeDevice(), mqtt = FakeMQTT()
        device.setAnswering(false)
        let b = try bridge(device, mqtt)
        try await run(b) {
            b.handle(InboundMessage(topic: "gatt2mqtt/dev/set", payload: Array(#"{"command":"ping","value":7,"transaction":"p"}"#.utf8)))
            // The hello is written; 1 ms short of its bound nothing has ended, at the bound the
            // step fails (not at the 5 s command timeout).
            #expect(await device.writeLog.wait(timeout: .seconds(30)) { $0 == [[1, 42]] } != nil)
            let session = try #require(b.session("dev"))
            clock.advance(by: .milliseconds(99))
            session.tick()
            await session.settled()
            #expect(mqtt.messages("gatt2mqtt/dev/response").allSatisfy { !$0.text.contains("auth_failed") })
            clock.advance(by: .milliseconds(1))
            session.tick()
            let r = try await terminal(mqtt)
            #expect(r?["status"] == "error" && r?["error"]?["code"] == "auth_failed", "\(String(describing: r))")
            #expect(r?["error"]?["message"]?.stringValue?.hasPrefix("no hello: no answer from dev within 0.1") == true, "\(String(describing: r))")
            let events = mqtt.messages("gatt2mqtt/bridge/event").map(\.text).filter { $0.contains("device_error") }
            #expect(events.count == 1 && events[0].contains(#""code":"auth_failed""#), "\(events)")
            #expect(device.writes == [[1, 42]])  // the command was never written
        }
    }
}
