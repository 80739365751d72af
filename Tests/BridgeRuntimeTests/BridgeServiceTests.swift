import BinaryCoding
import BridgeConfig
import BridgeCore
import BridgeRuntime
import Foundation
import Logging
import Mosquitto
import Reactor
import ServiceLifecycle
import TestSupport
import Testing

/// `BridgeService` against a real mosquitto (started by the test) and a fake BLE central:
/// commands and state travel through the broker exactly as a hub sees them.
@Suite(.serialized) struct BridgeServiceTests {
    static func config(port: Int, db: String, mqtt: String = "", top: String = "") throws -> Configuration {
        try Configuration(yaml: """
            \(top)
            mqtt:
              url: mqtt://127.0.0.1:\(port)
              client_id: bridge-under-test
              reconnect_min: 50ms
              reconnect_max: 200ms
            \(mqtt)
            database:
              path: \(db)
            devices:
              - id: lamp
                address: C0:FF:EE:00:00:09
                profile: custom
                characteristics:
                  - uuid: FFF1
                    codec: layout
                    direction: write
                    topic: led
                    layout:
                      fields:
                        - {name: on, type: u8}
                  - {uuid: FFF2, codec: raw, direction: notify, topic: reading}
            """)
    }

    @Test func commandsAndStateThroughARealBroker() async throws {
        try await withMosquitto { broker in
            let dir = try TemporaryDirectory()
            let device = FakeDevice()
            let central = FakeCentral(["C0:FF:EE:00:00:09": device])
            let loop = EventLoop(name: "t-bridge")
            defer { loop.shutdown() }  // after the service stopped and the hub is disconnected
            let configuration = try Self.config(port: broker.port, db: dir.path + "/state.sqlite")
            let mqtt = try MQTTClientService(configuration: configuration, logger: Logger(label: "test"), loop: loop)
            let service = BridgeService(configuration: configuration, central: central, mqtt: mqtt, logger: Logger(label: "test"), loop: loop)
            let hub = try await broker.client(loop: loop)
            let responses = try await hub.subscribe("gatt2mqtt/lamp/response")
            let state = try await hub.subscribe("gatt2mqtt/lamp")
            let bridgeState = try await hub.subscribe("gatt2mqtt/bridge/state")
            let group = ServiceGroup(configuration: .init(services: [mqtt, service], logger: Logger(label: "test")))

            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let online = await collect(bridgeState, count: 1)
                #expect(online.first?.payloadString == #"{"state":"online"}"#)
                // A hub that subscribes later gets it as a retained message.
                let late = await collect(try await hub.subscribe("gatt2mqtt/bridge/state"), count: 1)
                #expect(late.first?.retain == true && late.first?.payloadString == #"{"state":"online"}"#)
                // Wait for the device link, then command it as a hub would.
                #expect(await eventually { device.state.withLock { $0.link != nil } })
                try await hub.publish(topic: "gatt2mqtt/lamp/set", payload: Array(#"{"led":{"on":1},"transaction":"t1"}"#.utf8), qos: .atLeastOnce)
                try await hub.publish(topic: "gatt2mqtt/lamp/set", payload: Array("{broken".utf8), qos: .atLeastOnce)
                let r = await collect(responses, count: 2)
                let texts = Set(r.map(\.payloadString))
                #expect(texts.contains(#"{"transaction":"t1","status":"ok","command":{"led":{"on":1}}}"#))
                #expect(texts.contains { $0.contains(#""code":"invalid_json""#) })
                #expect(device.writes == [[0x01]])
                // A notification becomes retained state on the broker (with last_seen, which the
                // state also carries alone from the link's start).
                device.notify([0xAB], on: "FFF2")
                // The retained state (its `last_seen` set at link up) gains the reading.
                let s = await collectUntil(state) { $0.payloadString.contains(#""reading":"ab""#) }
                let reading = try JSONSerialization.jsonObject(with: Data(s.last?.payload ?? [])) as? [String: Any]
                #expect(reading?["reading"] as? String == "ab" && (reading?["last_seen"] as? String)?.hasSuffix("Z") == true, "\(s.map(\.payloadString))")
                await group.triggerGracefulShutdown()
                try await tasks.next()
                // After a graceful stop the retained bridge state says offline.
                let offline = await collect(try await hub.subscribe("gatt2mqtt/bridge/state"), count: 1)
                #expect(offline.first?.payloadString == #"{"state":"offline"}"# && offline.first?.retain == true)
            }
            await hub.disconnect()
        }
    }

    /// `limits.max_payload` end to end, under both protocols: a message far above the limit and
    /// one just above it are each answered `payload_too_large` by the bridge. The bridge does not
    /// ask the broker for a Maximum Packet Size (mosquitto 2.0.11 stalls a client's QoS 1
    /// deliveries behind oversized messages: MQTTClientService.mqttOptions).
    @Test(arguments: ["5", "3.1.1"]) func oversizedPayloads(version: String) async throws {
        try await withMosquitto { broker in
            let dir = try TemporaryDirectory()
            let central = FakeCentral(["C0:FF:EE:00:00:09": FakeDevice()])
            let loop = EventLoop(name: "t-bridge")
            defer { loop.shutdown() }  // after the service stopped and the hub is disconnected
            let configuration = try Self.config(port: broker.port, db: dir.path + "/state.sqlite", mqtt: "  protocol: \(version)",
                                                top: "limits:\n  max_payload: 2KiB")
            #expect(try MQTTClientService.mqttOptions(configuration).maximumPacketSize == nil)
            let mqtt = try MQTTClientService(configuration: configuration, logger: Logger(label: "test"), loop: loop)
            let service = BridgeService(configuration: configuration, central: central, mqtt: mqtt, logger: Logger(label: "test"), loop: loop)
            let hub = try await broker.client(loop: loop)
            let responses = try await hub.subscribe("gatt2mqtt/lamp/response")
            let bridgeState = try await hub.subscribe("gatt2mqtt/bridge/state")
            let group = ServiceGroup(configuration: .init(services: [mqtt, service], logger: Logger(label: "test")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                #expect(await collect(bridgeState, count: 1).first?.payloadString == #"{"state":"online"}"#)
                let huge = Array(#"{"transaction":"huge","pad":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: 300_000) + Array(#""}"#.utf8)
                try await hub.publish(topic: "gatt2mqtt/lamp/set", payload: huge, qos: .atLeastOnce)
                let big = Array(#"{"transaction":"big","pad":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: 3_000) + Array(#""}"#.utf8)
                try await hub.publish(topic: "gatt2mqtt/lamp/set", payload: big, qos: .atLeastOnce)
                try await hub.publish(topic: "gatt2mqtt/lamp/set", payload: Array(#"{"nothing":1,"transaction":"last"}"#.utf8), qos: .atLeastOnce)
                let r = await collectUntil(responses) { $0.payloadString.contains(#""transaction":"last""#) }.map(\.payloadString)
                let tooLarge = r.filter { $0.contains(#""code":"payload_too_large""#) }
                #expect(tooLarge.count == 2, "\(r.map { $0.prefix(120) })")
                #expect(tooLarge.contains { $0.contains("3030 bytes") && $0.contains("2048") }, "the answer names the size and the limit")
                await group.triggerGracefulShutdown()
                try await tasks.next()
            }
            await hub.disconnect()
        }
    }
}
