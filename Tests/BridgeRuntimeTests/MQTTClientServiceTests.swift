import BridgeConfig
import BridgeCore
import Foundation
import Logging
import Mosquitto
import Reactor
import ServiceLifecycle
import TestSupport
import Testing
@testable import BridgeRuntime

/// `MQTTClientService` against a real mosquitto: a graceful shutdown sends what the port was
/// handed (waiting for the acknowledgements, not for a fixed time) before it disconnects.
@Suite(.serialized) struct MQTTClientServiceTests {
    @Test func gracefulShutdownDeliversWhatThePortHoldsThenDisconnects() async throws {
        try await withMosquitto { broker in
            let dir = try TemporaryDirectory()
            let loop = EventLoop(name: "t-mqtt-service")
            defer { loop.shutdown() }  // after the service and the hub disconnected
            let configuration = try BridgeServiceTests.config(port: broker.port, db: dir.path + "/state.sqlite")
            let mqtt = try MQTTClientService(configuration: configuration, logger: Logger(label: "test"), loop: loop)
            let hub = try await broker.client(loop: loop)
            let received = try await hub.subscribe("t/#")
            try await mqtt.client.connect()
            let count = 200
            for i in 0..<count {
                mqtt.port.send(OutboundMessage(topic: "t/\(i)", payload: Array("\(i)".utf8), qos: 1, retain: false))
            }
            #expect(mqtt.port.outstandingCount > 0, "200 QoS 1 messages are not acknowledged at once")
            // The wait ends on the last acknowledgement, long before its deadline.
            let started = ContinuousClock.now
            await mqtt.port.drained(within: .seconds(30), on: loop)
            #expect(mqtt.port.outstandingCount == 0 && ContinuousClock.now - started < .seconds(20))
            // More, then the service's graceful shutdown: they are acknowledged before the DISCONNECT.
            for i in count..<(2 * count) {
                mqtt.port.send(OutboundMessage(topic: "t/\(i)", payload: Array("\(i)".utf8), qos: 1, retain: false))
            }
            let group = ServiceGroup(configuration: .init(services: [mqtt], logger: Logger(label: "test")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                await group.triggerGracefulShutdown()
                try await tasks.next()
            }
            #expect(mqtt.port.outstandingCount == 0)
            let messages = await collect(received, count: 2 * count)
            #expect(messages.map(\.topic) == (0..<(2 * count)).map { "t/\($0)" })
            await hub.disconnect()
        }
    }

    @Test func drainedReturnsAtOnceWhenNothingIsOutstanding() async throws {
        let loop = EventLoop(name: "t-mqtt-drain")
        defer { loop.shutdown() }
        let configuration = try BridgeServiceTests.config(port: 1, db: "/nonexistent/state.sqlite")
        let mqtt = try MQTTClientService(configuration: configuration, logger: Logger(label: "test"), loop: loop)
        let started = ContinuousClock.now
        await mqtt.port.drained(within: .seconds(30), on: loop)
        #expect(ContinuousClock.now - started < .seconds(10))
        await mqtt.client.disconnect()
    }
}
