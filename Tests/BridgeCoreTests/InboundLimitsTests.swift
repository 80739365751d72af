import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import BridgeCore

/// What the bridge takes from the broker (issue 20): retained requests never run, the limits on
/// payloads, command arrays, queues and the redelivery cache, and `mqtt.api`.
@Suite struct InboundLimitsTests {
    final class Restarts: Sendable {
        let count = Atomic<Int>(0)
    }

    struct Harness {
        let mqtt = FakeMQTT()
        let device = FakeDevice()
        let bridge: Bridge
        let restarts = Restarts()

        init(present: Bool = true, _ change: (inout Configuration) -> Void = { _ in }) throws {
            var config = Configuration()
            config.mqtt.reconnectMin = .milliseconds(20)
            config.mqtt.reconnectMax = .milliseconds(40)
            var d = DeviceConfig(id: "dev", profile: .custom)
            d.address = "C0:FF:EE:00:00:09"
            d.characteristics = [CharacteristicMapping(uuid: "FFF2", codec: .raw, directions: [.notify], topic: "reading")]
            config.devices = [d]
            change(&config)
            device.setPresent(present)
            let restarts = self.restarts
            bridge = try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: mqtt,
                                central: FakeCentral(["C0:FF:EE:00:00:09": device]), drivers: { _ in TestDriver() },
                                tick: .milliseconds(10), control: BridgeControl(restart: { restarts.count.add(1, ordering: .relaxed) }))
        }

        func request(_ action: String, _ payload: [UInt8], retain: Bool = false, packetID: Int? = nil) {
            bridge.handle(InboundMessage(topic: "gatt2mqtt/bridge/request/\(action)", payload: payload, retain: retain, packetID: packetID))
        }

        func set(_ payload: [UInt8], device: String = "dev", retain: Bool = false, packetID: Int? = nil) {
            bridge.handle(InboundMessage(topic: "gatt2mqtt/\(device)/set", payload: payload, retain: retain, packetID: packetID))
        }

        /// The `n`th answer on `bridge/response/<action>` (waited for).
        func response(_ action: String, _ n: Int = 1) async throws -> JSONValue {
            let all = try await mqtt.wait(for: "gatt2mqtt/bridge/response/\(action)", count: n)
            return try JSONValue(parsing: all[n - 1].payload)
        }

        func responses(_ n: Int) async throws -> [JSONValue] {
            try await mqtt.wait(for: "gatt2mqtt/dev/response", count: n).map { try JSONValue(parsing: $0.payload) }
        }

        func running(_ body: () async throws -> Void) async throws { try await bridge.running(body) }
    }

    // MARK: Retained requests

    /// A retained restart request (which the broker hands out at every start) is answered
    /// `retained_request`, not run, and cleared with an empty retained message; the echo of that
    /// clear is no request either, while a later empty request still means `{}`.
    @Test func aRetainedRequestIsRefusedClearedAndNeverRun() async throws {
        let h = try Harness()
        try await h.running {
            h.request("restart", Array(#"{"transaction":"t9"}"#.utf8), retain: true)
            let refused = try await h.response("restart")
            #expect(refused["status"] == "error")
            #expect(refused["code"] == "retained_request")
            #expect(refused["transaction"] == "t9")
            let clear = h.mqtt.messages("gatt2mqtt/bridge/request/restart")
            #expect(clear == [OutboundMessage(topic: "gatt2mqtt/bridge/request/restart", payload: [], qos: 1, retain: true)])
            // The broker delivers the clear back (no no-local under MQTT 3.1.1): nothing runs.
            h.request("restart", [])
            h.request("info", [])
            _ = try await h.response("info")
            #expect(h.mqtt.messages("gatt2mqtt/bridge/response/restart").count == 1)
            #expect(h.restarts.count.load(ordering: .relaxed) == 0)
            // A retained empty payload is a clear too.
            h.request("restart", [], retain: true)
            // The next empty request is one (`{}`).
            h.request("restart", [])
            let ran = try await h.response("restart", 2)
            #expect(ran["status"] == "ok")
            #expect(h.restarts.count.load(ordering: .relaxed) == 1)
            #expect(h.mqtt.messages("gatt2mqtt/bridge/request/restart").count == 1, "only the retained request was cleared")
        }
    }

    // MARK: Payload size

    /// A payload above `limits.max_payload` is answered `payload_too_large` where there is a
    /// response topic, and not parsed or run.
    @Test func aPayloadAboveTheLimitIsRefusedUnparsed() async throws {
        let h = try Harness { $0.limits.maxPayload = 1024 }
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            let big = Array(#"{"command":"ping","value":1,"pad":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: 1100) + Array(#""}"#.utf8)
            h.set(big)
            let r = try await h.responses(1)
            #expect(r[0]["status"] == "error")
            #expect(r[0]["error"]?["code"] == "payload_too_large")
            #expect(r[0]["error"]?["message"]?.stringValue?.contains("1024") == true)
            h.request("restart", Array(repeating: UInt8(ascii: " "), count: 1025))
            let refused = try await h.response("restart")
            #expect(refused["code"] == "payload_too_large")
            #expect(h.restarts.count.load(ordering: .relaxed) == 0)
            // At the limit it is taken.
            let fits = Array(#"{"command":"ping","value":2}"#.utf8)
            h.set(fits + Array(repeating: UInt8(ascii: " "), count: 1024 - fits.count))
            let ok = try await h.responses(2)
            #expect(ok[1]["status"] == "ok")
            #expect(h.device.writes == [[1, 2]])
        }
    }

    // MARK: Command arrays

    @Test func anArrayAboveTheLimitIsRefusedWholeAndNothingRuns() async throws {
        let h = try Harness { $0.limits.maxCommands = 3 }
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            let four = "[" + (1...4).map { #"{"command":"ping","value":\#($0)}"# }.joined(separator: ",") + "]"
            h.set(Array(four.utf8))
            let r = try await h.responses(1)
            #expect(r[0]["error"]?["code"] == "too_many_commands")
            let three = "[" + (5...7).map { #"{"command":"ping","value":\#($0)}"# }.joined(separator: ",") + "]"
            h.set(Array(three.utf8))
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/response", "three ok") { $0.filter { $0.text.contains(#""status":"ok""#) }.count == 3 }
            #expect(h.mqtt.messages("gatt2mqtt/dev/response").count == 4, "one error for the array, then three ok")
            #expect(h.device.writes == [[1, 5], [1, 6], [1, 7]], "nothing of the refused array was written")
        }
    }

    // MARK: Queue

    @Test func aCommandBeyondTheQueueLimitIsRefused() async throws {
        let h = try Harness(present: false) { $0.limits.maxQueued = 2 }
        try await h.running {
            for v in 1...3 { h.set(Array(#"{"command":"ping","value":\#(v),"transaction":\#(v)}"#.utf8)) }
            let r = try await h.responses(3).sorted { ($0["transaction"]?.intValue ?? 0) < ($1["transaction"]?.intValue ?? 0) }
            #expect(r.map { $0["status"] } == ["queued", "queued", "error"])
            #expect(r[2]["error"]?["code"] == "queue_full")
            #expect(r[2]["transaction"] == 3)
        }
    }

    /// Commands not taken by the session yet count too: a flood cannot pile up ahead of it.
    @Test func aFloodCannotPileUpAheadOfTheSession() async throws {
        let h = try Harness(present: false) { $0.limits.maxQueued = 2 }
        // The bridge is not running: nothing takes the commands.
        for v in 1...5 { h.set(Array(#"{"command":"ping","value":\#(v),"transaction":\#(v)}"#.utf8)) }
        let refused = h.mqtt.messages("gatt2mqtt/dev/response").compactMap { try? JSONValue(parsing: $0.payload) }
        #expect(refused.map { $0["transaction"] } == [3, 4, 5])
        #expect(refused.allSatisfy { $0["error"]?["code"] == "queue_full" })
        try await h.running {
            let r = try await h.responses(5)
            #expect(r[3...].map { $0["status"] } == ["queued", "queued"])
            #expect(h.bridge.session("dev")?.backlog.load(ordering: .relaxed) == 0)
        }
    }

    // MARK: Redeliveries

    /// Only messages the bridge acts on are remembered: not those for devices it does not have.
    @Test func messagesForUnknownDevicesAreNotRemembered() async throws {
        let h = try Harness()
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            for id in 1...50 { h.set(Array(repeating: UInt8(ascii: " "), count: 100), device: "nobody", packetID: id) }
            #expect(h.bridge.redeliveries.withLock { $0.count } == 0)
            h.set(Array(#"{"command":"ping","value":1}"#.utf8), packetID: 51)
            h.request("info", [], packetID: 52)
            #expect(h.bridge.redeliveries.withLock { $0.count } == 2)
            _ = try await h.responses(1)
        }
    }

    // MARK: mqtt.api

    @Test func readOnlyAllowsOnlyTheRequestsThatRead() async throws {
        let h = try Harness { $0.mqtt.api = .readOnly }
        #expect(h.bridge.subscriptions.contains("gatt2mqtt/bridge/request/#"))
        try await h.running {
            for action in ["info", "devices", "health_check"] {
                h.request(action, Array(#"{"transaction":1}"#.utf8))
                #expect(try await h.response(action)["status"] == "ok", "\(action)")
            }
            for action in ["restart", "device/remove", "config/reload", "scan", "unpair"] {
                h.request(action, Array(#"{"transaction":2,"id":"dev"}"#.utf8))
                let r = try await h.response(action)
                #expect(r["code"] == "forbidden", "\(action)")
                #expect(r["transaction"] == 2)
                #expect(r["error"]?.stringValue?.contains("mqtt.api is read_only") == true)
            }
            #expect(h.restarts.count.load(ordering: .relaxed) == 0)
        }
    }

    @Test func offDoesNotSubscribeToRequests() throws {
        let off = try Harness { $0.mqtt.api = .off }
        #expect(!off.bridge.subscriptions.contains { $0.contains("bridge/request") })
        #expect(off.bridge.subscriptions.contains("gatt2mqtt/+/set"))
        let full = try Harness()
        #expect(full.bridge.subscriptions.contains("gatt2mqtt/bridge/request/#"))
    }
}
