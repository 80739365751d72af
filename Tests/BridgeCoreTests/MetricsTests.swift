import BinaryCoding
import BridgeConfig
import CoreMetrics
import Foundation
import MetricsTestKit
import TestSupport
import Testing
@testable import BridgeCore

/// The bridge's metrics (docs/metrics.md) over the fakes, with swift-metrics' test factory bound
/// to the bridge as it is made (task-local: no global bootstrap, tests stay independent).
@Suite struct MetricsTests {
    typealias Harness = BridgeTests.Harness

    static func harness(_ metrics: TestMetrics, deadline: Duration = .seconds(60), present: Bool = true) throws -> Harness {
        try withMetricsFactory(metrics) { () throws in try Harness(deadline: deadline, present: present) }
    }

    /// Waits (up to 3 s) until the messages on `topic` satisfy `predicate`.
    static func until(_ h: Harness, _ topic: String, _ predicate: @escaping @Sendable ([OutboundMessage]) -> Bool) async throws {
        _ = try await h.mqtt.wait(for: topic, until: predicate)
    }

    static func online(_ messages: [OutboundMessage]) -> Int { messages.filter { $0.text.contains("online") }.count }

    static func commands(_ m: TestMetrics, _ command: String, _ status: String) -> Int64? {
        try? m.expectCounter(BridgeMetrics.Name.commands, [("device", "dev"), ("command", command), ("status", status)]).totalValue
    }

    static func device(_ m: TestMetrics, counter label: String) -> Int64? {
        try? m.expectCounter(label, [("device", "dev")]).totalValue
    }

    static func gauge(_ m: TestMetrics, _ label: String) -> Double? {
        try? m.expectGauge(label, [("device", "dev")]).lastValue
    }

    @Test func commandCountedWithItsLatency() async throws {
        let m = TestMetrics()
        let h = try Self.harness(m)
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            #expect(Self.gauge(m, BridgeMetrics.Name.linkUp) == 1)
            let before = ContinuousClock.now
            h.set(#"{"command":"ping","value":7}"#)
            _ = try await h.responses(1)
            let elapsed = ContinuousClock.now - before
            #expect(Self.commands(m, "ping", "ok") == 1)
            #expect(Self.commands(m, "ping", "error") == 0)
            let latency = try m.expectTimer(BridgeMetrics.Name.commandDuration, [("device", "dev"), ("command", "ping")]).values
            #expect(latency.count == 1)
            #expect(latency[0] > 0 && Duration.nanoseconds(latency[0]) <= elapsed, "\(latency) vs \(elapsed)")
            #expect(Self.device(m, counter: BridgeMetrics.Name.notifications) == 1)  // the answer
            #expect(try m.expectTimer(BridgeMetrics.Name.connectDuration, [("device", "dev")]).values.count == 1)
            // The outbox entry (sent), then the answer with the new state: two timed commits.
            #expect(try m.expectTimer(BridgeMetrics.Name.sqliteCommitDuration).values.count == 2)
            #expect(Self.gauge(m, BridgeMetrics.Name.queueDepth) == 0)
            #expect(Self.device(m, counter: BridgeMetrics.Name.reconnects) == 0)
        }
        #expect(Self.gauge(m, BridgeMetrics.Name.linkUp) == 0, "the link closed at stop")
    }

    /// Refused commands count under `command="invalid"` (a client cannot make series with made-up
    /// names); errors by code; bytes the driver cannot decode are decode errors.
    @Test func refusedCommandsAndGarbage() async throws {
        let m = TestMetrics()
        let h = try Self.harness(m)
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            h.set(#"{"command":"zap_everything","value":1}"#)
            h.set(#"{"command":"ping","value":999}"#)
            h.set("{not json")
            _ = try await h.responses(3)
            h.device.notify([9, 9, 9])
            try await Self.until(h, "gatt2mqtt/bridge/event") { $0.contains { $0.text.contains("device_error") } }
            #expect(Self.commands(m, "invalid", "error") == 3)
            #expect(!m.counters.contains { $0.dimensions.contains { $0.1.contains("zap") } })
            for code in ["unknown_command", "invalid_value", "invalid_json"] {
                #expect(try m.expectCounter(BridgeMetrics.Name.commandErrors, [("device", "dev"), ("code", code)]).totalValue == 1, "\(code)")
            }
            #expect(Self.device(m, counter: BridgeMetrics.Name.decodeErrors) == 1)
            #expect(Self.device(m, counter: BridgeMetrics.Name.notifications) == 1)
        }
    }

    /// An away device: failed connects counted, the command waits in the queue (depth 1) and
    /// expires; once the device is back the link is up; a lost link comes back as a reconnect.
    @Test func awayDeviceQueueExpiryAndReconnect() async throws {
        let m = TestMetrics()
        let h = try Self.harness(m, deadline: .milliseconds(150), present: false)
        try await h.running {
            h.set(#"{"command":"ping","value":1}"#)
            let r = try await h.responses(2)
            #expect(r.map { $0["status"] } == ["queued", "expired"])
            #expect(Self.commands(m, "ping", "expired") == 1)
            // The queue depth is recorded after the event that published `expired` was handled.
            await h.session.settled()
            let depths = try m.expectGauge(BridgeMetrics.Name.queueDepth, [("device", "dev")]).values
            #expect(depths.contains(1) && depths.last == 0, "\(depths)")
            #expect(await eventually { (Self.device(m, counter: BridgeMetrics.Name.connectFailures) ?? 0) >= 1 })
            #expect(Self.gauge(m, BridgeMetrics.Name.linkUp) == 0)

            h.device.setPresent(true)
            try await Self.until(h, "gatt2mqtt/dev/availability") { Self.online($0) == 1 }
            #expect(Self.gauge(m, BridgeMetrics.Name.linkUp) == 1)
            #expect(Self.device(m, counter: BridgeMetrics.Name.reconnects) == 0)
            h.device.dropLink()
            try await Self.until(h, "gatt2mqtt/dev/availability") { Self.online($0) == 2 }
            #expect(Self.device(m, counter: BridgeMetrics.Name.reconnects) == 1)
            #expect(Self.gauge(m, BridgeMetrics.Name.linkUp) == 1)
        }
    }

    @Test func commandLabels() {
        func label(_ body: JSONObject, _ error: ErrorCode? = nil) -> String {
            BridgeMetrics.label(PendingCommand(payload: .command(body), deadline: nil), error: error.map { CommandError($0, "") })
        }
        #expect(label(["command": "set_shutter", "value": true]) == "set_shutter")
        #expect(label(["query": "get_status_values"]) == "get_status_values")
        #expect(label(["setting": "resolution", "value": "4K"]) == "setting")
        #expect(label(["get": []]) == "get")
        #expect(label(["brightness": 8]) == "brightness")
        #expect(label(["a": 1, "b": 2]) == "invalid")
        #expect(label(["command": "set_shutter"], .timeout) == "set_shutter")
        #expect(label(["command": "made_up"], .unknownCommand) == "invalid")
        #expect(BridgeMetrics.label(PendingCommand(payload: .write(topic: "control", payload: [1]), deadline: nil), error: nil) == "write")
    }
}
