import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Mosquitto
import TestSupport
import Testing

/// The Prometheus endpoint of `gatt2mqtt run` (docs/metrics.md), scraped with a real HTTP client
/// (URLSession) while the bridge runs against mosquitto and the emulator.
@Suite(.serialized, .timeLimit(.minutes(5))) struct MetricsEndToEndTests {
    /// GET `path` on 127.0.0.1:`port`: the status and the body.
    static func get(port: Int, _ path: String) async throws -> (status: Int, body: String, contentType: String?) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 5
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        let http = try #require(response as? HTTPURLResponse)
        return (http.statusCode, String(decoding: data, as: UTF8.self), http.value(forHTTPHeaderField: "Content-Type"))
    }

    /// The samples of a text exposition: `name{labels}` → value (comments skipped).
    static func samples(_ text: String) -> [String: Double] {
        var out: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            out[String(line[..<space])] = value
        }
        return out
    }

    @Test func scrapeAfterCommands() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        let port = try freeLoopbackPort()
        let hub = try await env.broker.client(loop: env.loop)
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let availability = try await hub.subscribe("gatt2mqtt/heart/availability")
        let heartRate = try await hub.subscribe("gatt2mqtt/heart/heart_rate")
        // metrics.listen through its environment override.
        let bridge = try env.startBridge(devices: EndToEnd.heart, environment: ["GATT2MQTT_METRICS_LISTEN": "127.0.0.1:\(port)"])
        #expect(await collect(availability, count: 1).first?.payloadString == #"{"state":"online"}"#)
        #expect(await collect(heartRate, count: 1).count == 1)

        // One read that succeeds, one write the device refuses, one command the driver refuses.
        try await hub.publish(topic: "gatt2mqtt/heart/get", payload: Array(#"{"battery":""}"#.utf8), qos: .atLeastOnce)
        #expect(await collect(responses, count: 1).first?.payloadString == #"{"status":"ok","command":{"get":["battery"]},"data":{"battery_level":85}}"#)
        try await hub.publish(topic: "gatt2mqtt/heart/control/write", payload: Array("02".utf8), qos: .atLeastOnce)
        #expect(await collect(responses, count: 1).first?.payloadString.contains(#""code":"bluetooth_error""#) == true)
        try await hub.publish(topic: "gatt2mqtt/heart/set", payload: Array(#"{"self_destruct":1}"#.utf8), qos: .atLeastOnce)
        #expect(await collect(responses, count: 1).first?.payloadString.contains(#""code":"unknown_command""#) == true)

        let scrape = try await Self.get(port: port, "/metrics")
        #expect(scrape.status == 200)
        #expect(scrape.contentType?.hasPrefix("text/plain; version=0.0.4") == true)
        let s = Self.samples(scrape.body)
        // Commands by device, command and status; the refused one under command="invalid", not
        // under the name the client made up; errors by code.
        #expect(s[#"gatt2mqtt_commands_total{device="heart",command="get",status="ok"}"#] == 1, "\(scrape.body)")
        #expect(s[#"gatt2mqtt_commands_total{device="heart",command="get",status="error"}"#] == 0)
        #expect(s[#"gatt2mqtt_commands_total{device="heart",command="write",status="error"}"#] == 1)
        #expect(s[#"gatt2mqtt_commands_total{device="heart",command="invalid",status="error"}"#] == 1)
        #expect(!scrape.body.contains("self_destruct"))
        #expect(s[#"gatt2mqtt_command_errors_total{device="heart",code="bluetooth_error"}"#] == 1)
        #expect(s[#"gatt2mqtt_command_errors_total{device="heart",code="unknown_command"}"#] == 1)
        // The latency histogram: one observation for the read, in seconds, below the 5 s bucket.
        #expect(s[#"gatt2mqtt_command_duration_seconds_count{device="heart",command="get"}"#] == 1)
        let sum = try #require(s[#"gatt2mqtt_command_duration_seconds_sum{device="heart",command="get"}"#])
        #expect(sum > 0 && sum < 5)
        #expect(s[#"gatt2mqtt_command_duration_seconds_bucket{device="heart",command="get",le="5.0"}"#] == 1)
        #expect(s[#"gatt2mqtt_command_duration_seconds_bucket{device="heart",command="get",le="+Inf"}"#] == 1)
        #expect(scrape.body.contains("# TYPE gatt2mqtt_command_duration_seconds histogram"))
        #expect(scrape.body.contains("# TYPE gatt2mqtt_commands_total counter"))
        // The link: up, connected once, no reconnect; notifications counted, none malformed.
        #expect(s[#"gatt2mqtt_link_up{device="heart"}"#] == 1)
        #expect(s[#"gatt2mqtt_connect_duration_seconds_count{device="heart"}"#] == 1)
        #expect(s[#"gatt2mqtt_reconnects_total{device="heart"}"#] == 0)
        #expect(s[#"gatt2mqtt_connect_failures_total{device="heart"}"#] == 0)
        #expect(s[#"gatt2mqtt_pair_duration_seconds_count{device="heart"}"#] == 0)
        #expect((s[#"gatt2mqtt_notifications_total{device="heart"}"#] ?? 0) >= 1)
        #expect(s[#"gatt2mqtt_decode_errors_total{device="heart"}"#] == 0)
        #expect(s[#"gatt2mqtt_queue_depth{device="heart"}"#] == 0)
        #expect(s["gatt2mqtt_mqtt_reconnects_total"] == 0)
        // SQLite: at least the read's outbox entry and its answer, each one commit.
        #expect((s["gatt2mqtt_sqlite_commit_duration_seconds_count"] ?? 0) >= 2)
        // The process, read from /proc at the scrape.
        #expect((s["process_resident_memory_bytes"] ?? 0) > 1_000_000)
        #expect((s["process_cpu_seconds_total"] ?? 0) > 0)
        let start = try #require(s["process_start_time_seconds"])
        let now = Date().timeIntervalSince1970
        #expect(start > now - 120 && start <= now + 1, "\(start) vs \(now)")

        // Anything but /metrics is 404.
        let missing = try await Self.get(port: port, "/")
        #expect(missing.status == 404)
        #expect(try await Self.get(port: port, "/metrics/extra").status == 404)

        // A graceful stop still ends well (the endpoint stops after the bridge), and closes the port.
        kill(bridge.processIdentifier, SIGTERM)
        await bridge.exited()
        #expect(bridge.terminationStatus == 0, "\(env.bridgeLog())")
        #expect(!acceptsConnections(port: port))
        let state = await collect(try await hub.subscribe("gatt2mqtt/bridge/state"), count: 1)
        #expect(state.first?.payloadString == #"{"state":"offline"}"#, "\(env.bridgeLog())")
        await hub.disconnect()
    }

    /// The broker dies and comes back: one MQTT reconnect counted.
    @Test func brokerRestartCountsAnMQTTReconnect() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        let port = try freeLoopbackPort()
        var hub = try await env.broker.client(loop: env.loop)
        let availability = try await hub.subscribe("gatt2mqtt/heart/availability")
        _ = try env.startBridge(devices: EndToEnd.heart, environment: ["GATT2MQTT_METRICS_LISTEN": "127.0.0.1:\(port)"])
        #expect(await collect(availability, count: 1).first?.payloadString == #"{"state":"online"}"#)
        #expect(Self.samples(try await Self.get(port: port, "/metrics").body)["gatt2mqtt_mqtt_reconnects_total"] == 0)
        await hub.disconnect()

        env.broker.kill()
        try env.broker.start()
        hub = try await env.broker.client(loop: env.loop)
        // The bridge republishes its retained state after it reconnected (and counted it).
        let state = await collect(try await hub.subscribe("gatt2mqtt/bridge/state"), count: 1, timeout: .seconds(15))
        #expect(state.first?.payloadString == #"{"state":"online"}"#)
        #expect(Self.samples(try await Self.get(port: port, "/metrics").body)["gatt2mqtt_mqtt_reconnects_total"] == 1)
        await hub.disconnect()
    }

    /// A listen address already in use stops the start with an error that names it.
    @Test func addressInUseStopsTheStart() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        // The broker holds its port.
        let bridge = try env.startBridge(devices: EndToEnd.heart, environment: ["GATT2MQTT_METRICS_LISTEN": "127.0.0.1:\(env.broker.port)"])
        #expect(await eventually { !bridge.isRunning })
        await bridge.exited()
        #expect(bridge.terminationStatus != 0)
        let log = env.bridgeLog()
        #expect(log.contains("metrics.listen 127.0.0.1:\(env.broker.port): bind failed: Address already in use"), "\(log)")
    }
}
