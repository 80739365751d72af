import Foundation
import Mosquitto
import TestSupport
import Testing

/// Two bridges with different base topics on one broker (issue 22: the bridge device was a fixed
/// `gatt2mqtt_bridge` and the device nodes `gatt2mqtt_<id>`, so one bridge's Home Assistant
/// configs overwrote the other's). Two `gatt2mqtt run` on one mosquitto, the same device
/// configured in both: the broker keeps both sets of retained configs, none in common.
@Suite(.serialized, .timeLimit(.minutes(5))) struct DiscoveryBaseTopicEndToEndTests {
    @Test func twoBaseTopicsOnOneBrokerKeepBothSetsOfConfigs() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let published = try await hub.subscribe("homeassistant/#")
        // A device's configs come after the bridge's: its last seen is the last one.
        func configs(until last: String) async -> [MQTTMessage] {
            await collectUntil(published, timeout: .seconds(20)) { $0.topic == last }
        }
        let first = try env.startBridge(devices: EndToEnd.heart, environment: ["GATT2MQTT_MQTT_CLIENT_ID": "gatt2mqtt-downstairs"])
        defer { if first.isRunning { reap(first, SIGKILL) } }
        let downstairs = await configs(until: "homeassistant/sensor/gatt2mqtt_heart/last_seen/config")
        _ = try env.startBridge(devices: EndToEnd.heart, environment: [
            "GATT2MQTT_MQTT_CLIENT_ID": "gatt2mqtt-upstairs", "GATT2MQTT_MQTT_BASE_TOPIC": "upstairs",
            "GATT2MQTT_DATABASE_PATH": env.directory.path + "/upstairs.sqlite",
        ])
        let upstairs = await configs(until: "homeassistant/sensor/upstairs_heart/last_seen/config")
        // (The first bridge may publish some of its own again meanwhile: the second's are its nodes'.)
        let (a, b) = (Set(downstairs.map(\.topic)), Set(upstairs.map(\.topic).filter { $0.contains("/upstairs_") }))
        try #require(a.contains("homeassistant/button/gatt2mqtt_bridge/restart/config"), "\(a.sorted())")
        try #require(b.contains("homeassistant/button/upstairs_bridge/restart/config"), "\(b.sorted())")
        #expect(a.isDisjoint(with: b))
        #expect(Set(a.map { $0.replacingOccurrences(of: "/gatt2mqtt_", with: "/upstairs_") }) == b)

        // What a Home Assistant that subscribes now gets: every config of both, retained.
        let retained = await collect(try await hub.subscribe("homeassistant/#"), count: a.count + b.count)
        #expect(retained.allSatisfy(\.retain) && Set(retained.map(\.topic)) == a.union(b))
        let payloads = retained.compactMap { try? JSONSerialization.jsonObject(with: Data($0.payload)) as? [String: Any] }
        let uniqueIDs = payloads.compactMap { $0["unique_id"] as? String }
        #expect(uniqueIDs.count == retained.count && Set(uniqueIDs).count == uniqueIDs.count)
        let devices = Set(payloads.compactMap { (($0["device"] as? [String: Any])?["identifiers"] as? [String])?.first })
        #expect(devices == ["gatt2mqtt_bridge", "gatt2mqtt_c0ffee000001", "upstairs_bridge", "upstairs_c0ffee000001"])
        let heart = payloads.filter { ($0["unique_id"] as? String)?.hasSuffix("_c0ffee000001_heart_rate") == true }
        #expect(Set(heart.compactMap { $0["state_topic"] as? String }) == ["gatt2mqtt/heart", "upstairs/heart"])
        await hub.disconnect()
    }
}
