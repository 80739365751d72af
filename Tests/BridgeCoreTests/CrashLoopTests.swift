import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import TestSupport
import Testing
@testable import BridgeCore

/// A message the previous run died handling (its marker left in the store) is answered `crashed`
/// at start and dropped when the broker delivers it again: one message cannot crash-loop the bridge.
@Suite struct CrashLoopTests {
    static func bridge(_ store: BridgeStore, _ mqtt: FakeMQTT) throws -> Bridge {
        try BridgeRequestTests.bridge(store, mqtt, central: BridgeRequestTests.central())
    }

    static func message(_ topic: String, _ payload: String, packetID: Int?, responseTopic: String? = nil,
                        correlation: [UInt8]? = nil) -> InboundMessage {
        InboundMessage(topic: topic, payload: Array(payload.utf8), responseTopic: responseTopic, correlationData: correlation, packetID: packetID)
    }

    @Test func aBridgeRequestLeftMarkedIsAnsweredCrashedAndItsRedeliveryDropped() async throws {
        let store = try BridgeStore.inMemory()
        let request = Self.message("gatt2mqtt/bridge/request/info", #"{"transaction":"t9"}"#, packetID: 42)
        try store.markInflight(InflightMessage(topic: request.topic, payload: request.payload, packetID: 42, at: Date()))
        let mqtt = FakeMQTT()
        let bridge = try Self.bridge(store, mqtt)
        try await bridge.running {
            let crashed = try await mqtt.wait(for: "gatt2mqtt/bridge/response/info")
            let answer = try JSONValue(parsing: crashed[0].payload)
            #expect(answer["status"] == "error")
            #expect(answer["code"] == "crashed")
            #expect(answer["transaction"] == "t9")
            // The broker's redelivery (same packet id, topic, payload): acknowledged and dropped.
            bridge.handle(request)
            // A new publish of the same request (another packet id) is handled as usual.
            bridge.handle(Self.message(request.topic, #"{"transaction":"t10"}"#, packetID: 43))
            let all = try await mqtt.wait(for: "gatt2mqtt/bridge/response/info", count: 2)
            #expect(all.count == 2)
            let next = try JSONValue(parsing: all[1].payload)
            #expect(next["status"] == "ok" && next["transaction"] == "t10", "the redelivered request is not answered again")
        }
        #expect(try store.takeInflight().isEmpty, "the markers are gone")
    }

    @Test func aCommandLeftMarkedIsAnsweredCrashedOnItsResponseTopic() async throws {
        let store = try BridgeStore.inMemory()
        let command = Self.message("gatt2mqtt/dev/set", #"{"transaction":"c1","read":"FFF2"}"#, packetID: 7,
                                   responseTopic: "reply/here", correlation: [1, 2])
        try store.markInflight(InflightMessage(topic: command.topic, payload: command.payload, packetID: 7,
                                               responseTopic: "reply/here", correlationData: [1, 2], at: Date()))
        let mqtt = FakeMQTT()
        let bridge = try Self.bridge(store, mqtt)
        try await bridge.running {
            let answers = try await mqtt.wait(for: "reply/here")
            let answer = try JSONValue(parsing: answers[0].payload)
            #expect(answer["status"] == "error")
            #expect(answer["error"]?["code"] == "crashed")
            #expect(answer["transaction"] == "c1")
            #expect(answers[0].correlationData == [1, 2])
            bridge.handle(command)  // delivered again: dropped
            bridge.handle(Self.message("gatt2mqtt/bridge/request/info", "{}", packetID: 8))  // a barrier
            _ = try await mqtt.wait(for: "gatt2mqtt/bridge/response/info")
            #expect(mqtt.messages("reply/here").count == 1)
            #expect(mqtt.messages("gatt2mqtt/dev/response").isEmpty)
        }
    }

    @Test func handledMessagesLeaveNoMarker() async throws {
        let store = try BridgeStore.inMemory()
        let mqtt = FakeMQTT()
        let bridge = try Self.bridge(store, mqtt)
        try await bridge.running {
            bridge.handle(Self.message("gatt2mqtt/bridge/request/device/rename", #"{"id":"nope","to":"x"}"#, packetID: 1))
            _ = try await mqtt.wait(for: "gatt2mqtt/bridge/response/device/rename")
            bridge.handle(Self.message("gatt2mqtt/nope/set", #"{"read":"FFF2"}"#, packetID: 2))
            _ = try await mqtt.wait(for: "gatt2mqtt/bridge/event")
            #expect(try store.takeInflight().isEmpty)
        }
    }
}
