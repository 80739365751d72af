import Foundation
import Mosquitto
import TestSupport
import Testing

/// `gatt2mqtt health` (the Dockerfile's HEALTHCHECK) asks the running bridge over MQTT:
/// `bridge/request/health_check` with a transaction, the answer on `bridge/response/health_check`.
@Suite(.serialized, .timeLimit(.minutes(5))) struct HealthCLITests {
    @Test func healthyWhenTheRunningBridgeAnswers() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let state = try await hub.subscribe("gatt2mqtt/bridge/state")
        let requests = try await hub.subscribe("gatt2mqtt/bridge/request/health_check")
        _ = try env.startBridge(devices: "  []")
        #expect(await collect(state, count: 1).first?.payloadString == #"{"state":"online"}"#)
        let r = try await CLI.run(["health", "--config", env.directory.path + "/bridge.yaml"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("healthy"), "\(r.stdout)")
        // It asked with a transaction of its own.
        let request = await collect(requests, count: 1).first?.payloadString ?? ""
        #expect(request.hasPrefix(#"{"transaction":"health-"#), "\(request)")
        await hub.disconnect()
    }

    @Test func failsWithinItsDeadlineWhenNoBridgeAnswers() async throws {
        let broker = try await MosquittoBroker.started()
        defer { broker.stop() }
        let dir = try TemporaryDirectory()
        let config = dir.path + "/bridge.yaml"
        try "mqtt:\n  url: mqtt://127.0.0.1:\(broker.port)\ndevices: []\n".write(toFile: config, atomically: true, encoding: .utf8)
        let start = ContinuousClock.now
        let r = try await CLI.run(["health", "--config", config, "--timeout", "2"])
        let took = ContinuousClock.now - start
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("no answer on gatt2mqtt/bridge/response/health_check within 2 s"), "\(r.stderr)")
        #expect(took >= .seconds(2) && took < .seconds(8), "\(took)")
    }

    @Test func failsAtOnceWithoutABroker() async throws {
        let dir = try TemporaryDirectory()
        let config = dir.path + "/bridge.yaml"
        // Port 1 on loopback: nothing listens there, the connection is refused.
        try "mqtt:\n  url: mqtt://127.0.0.1:1\ndevices: []\n".write(toFile: config, atomically: true, encoding: .utf8)
        let start = ContinuousClock.now
        let r = try await CLI.run(["health", "--config", config, "--timeout", "5"])
        #expect(ContinuousClock.now - start < .seconds(4))
        #expect(r.status == 1)
        #expect(r.stderr.contains("cannot reach the broker 127.0.0.1:1"), "\(r.stderr)")
    }
}
