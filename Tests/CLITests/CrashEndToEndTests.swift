import Foundation
import Mosquitto
import TestSupport
import Testing

/// A crash leaves a trace in the log, and the message being handled does not crash the next
/// start (the broker delivers it again to the bridge's persistent session): `gatt2mqtt run`
/// with the test-only `TEST_GATT2MQTT_CRASH_ON_TOPIC`, a real mosquitto and the emulator.
@Suite(.serialized, .timeLimit(.minutes(6))) struct CrashEndToEndTests {
    @Test func aCrashIsLoggedAndItsMessageAnsweredCrashedNotHandledAgain() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
        let state = try await hub.subscribe("gatt2mqtt/bridge/state")
        let crashOn = ["TEST_GATT2MQTT_CRASH_ON_TOPIC": "gatt2mqtt/bridge/request/info"]
        let first = try env.startBridge(devices: EndToEnd.heart, logLevel: "info", environment: crashOn)
        #expect(await BridgeAPITests.first(state) { $0.payloadString.contains("online") } != nil)

        try await hub.publish(topic: "gatt2mqtt/bridge/request/info", payload: Array(#"{"transaction":"boom"}"#.utf8), qos: .atLeastOnce)
        #expect(await eventually { !first.isRunning }, "the bridge dies")
        let log = env.bridgeLog()
        #expect(log.contains("Fatal error: TEST_GATT2MQTT_CRASH_ON_TOPIC"), "\(log)")
        #expect(log.contains("gatt2mqtt: fatal signal SIG"), "the signal is named: \(log)")
        #expect(log.contains(#"gatt2mqtt: the last MQTT message received: topic gatt2mqtt/bridge/request/info, 22 byte(s): {"transaction":"boom"}"#), "\(log)")
        #expect(log.contains("gatt2mqtt: backtrace"), "\(log)")

        // The next start (the same trigger still on): the request is answered crashed, and its
        // redelivery by the broker is dropped instead of crashing the bridge again.
        let second = try env.startBridge(devices: EndToEnd.heart, logLevel: "info", environment: crashOn)
        let crashed = try #require(await BridgeAPITests.first(responses) { $0.payloadString.contains(#""transaction":"boom""#) })
        #expect(crashed.topic == "gatt2mqtt/bridge/response/info")
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(crashed.payload)) as? [String: Any])
        #expect(answer["status"] as? String == "error" && answer["code"] as? String == "crashed", "\(answer)")
        // Still running and answering: another request is handled.
        let devices = try await BridgeAPITests.request(hub, responses, "devices")
        #expect(devices["status"] as? String == "ok")
        #expect(second.isRunning)
        let log2 = env.bridgeLog()
        #expect(log2.contains("the bridge stopped while handling a message"), "\(log2)")
        #expect(log2.contains("gatt2mqtt/bridge/request/info"), "\(log2)")
        #expect(await eventually { env.bridgeLog().contains("delivered again by the broker") }, "the redelivery was dropped: \(env.bridgeLog())")
        #expect(second.isRunning)
        await hub.disconnect()
    }
}
