import Foundation
import Mosquitto
import TestSupport
import Testing

/// Two bridges on one emulated bluetoothd (`simulate --adapters hci0,hci1`), node a on hci0 and
/// node b on hci1: the emulator's counterpart of `RealStackTests.Adapters.twoBridgesOnOneBluetoothd`.
/// The emulated daemon, as the real one, keeps a link when its client dies, and a device linked
/// through one adapter is out of reach of the others.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ClusterOneDaemonTests {
    static let address = Cluster.address

    /// Starts node `node` on `adapter` of the environment's emulator.
    static func start(_ env: EndToEnd, _ node: String, adapter: String) throws -> Process {
        // lost_after longer than closing the dead node's link (~2 s, spec/bluez.md behaviour 5) and connecting.
        let yaml = Cluster.nodeYAML(node, lostAfter: "8s")
        let config = env.directory.path + "/\(node).yaml"
        try """
            \(yaml.top)
            mqtt:
              url: mqtt://127.0.0.1:\(env.broker.port)
            \(yaml.mqtt)
              reconnect_max: 1s
            bluetooth:
              bus_address: \(env.bus)
              adapter: \(adapter)
            database:
              path: \(env.directory.path)/\(node).sqlite
            devices:
              - id: heart
                address: \(address)
                profile: custom
                characteristics:
                  - {uuid: 2A39, codec: raw, direction: write, topic: control}
            """.write(toFile: config, atomically: true, encoding: .utf8)
        return try launchBridge(config: config, logLevel: "info", log: env.directory.path + "/\(node).log")
    }

    static func log(_ env: EndToEnd, _ node: String) -> String {
        String(((try? String(contentsOfFile: env.directory.path + "/\(node).log", encoding: .utf8)) ?? "").suffix(2000))
    }

    static func connected(_ env: EndToEnd, on adapter: String) -> Bool {
        AdapterEndToEndTests.connected(env, address, on: adapter)
    }

    @Test func theNewOwnerClosesTheLinkADeadNodeLeftOnTheSameDaemon() async throws {
        // hci0 hears the sensor better: node a owns it.
        let env = try await EndToEnd(simulate: ["--adapters", "hci0,hci1", "--rssi", "hci0/\(Self.address)=-50",
                                                "--rssi", "hci1/\(Self.address)=-80"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let states = try await hub.subscribe("gatt2mqtt/bridge/nodes/+/state")
        let owners = try await hub.subscribe("gatt2mqtt/bridge/owners/heart")
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let a = try Self.start(env, "a", adapter: "hci0")
        let b = try Self.start(env, "b", adapter: "hci1")
        defer {
            for p in [a, b] where p.isRunning { reap(p, SIGKILL) }
        }
        let (online, _) = await Cluster.online(states, nodes: ["a", "b"], timeout: .seconds(15))
        try #require(online == ["a", "b"], "\(Self.log(env, "a"))\n\(Self.log(env, "b"))")
        _ = await collectUntil(owners, timeout: .seconds(10)) { $0.payloadString == #"{"node":"a","epoch":1}"# }
        func command(_ t: String) async throws -> [String: Any]? {
            try await hub.publish(topic: "gatt2mqtt/heart/set", payload: Array(#"{"control":"01","transaction":"\#(t)"}"#.utf8), qos: .atLeastOnce)
            let r = await collectUntil(responses, timeout: .seconds(15)) { m in
                m.payloadString.contains(#""transaction":"\#(t)""#)
                    && ["ok", "error", "expired"].contains { m.payloadString.contains(#""status":"\#($0)""#) }
            }
            return r.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.payload)) as? [String: Any] }
        }
        let first = try await command("t1")
        #expect(first?["status"] as? String == "ok" && first?["node"] as? String == "a", "\(String(describing: first))\n\(Self.log(env, "a"))\n\(Self.log(env, "b"))")
        #expect(Self.connected(env, on: "hci0"))

        // a dies; the daemon keeps its link (the sensor advertises to nobody). b claims the
        // sensor, closes that link, and connects through hci1.
        kill(a.processIdentifier, SIGKILL)
        await a.exited()
        _ = await collectUntil(owners, timeout: .seconds(10)) { $0.payloadString == #"{"node":"b","epoch":2}"# }
        let second = try await command("t2")
        #expect(second?["status"] as? String == "ok" && second?["node"] as? String == "b", "\(String(describing: second))\n\(Self.log(env, "b"))")
        #expect(Self.connected(env, on: "hci1") && !Self.connected(env, on: "hci0"))
        #expect(Self.log(env, "b").contains("closed a link another bridge left"), "\(Self.log(env, "b"))")
        #expect(try RunEndToEndTests.writes(env, Self.address, on: "2a39").count == 2, "one write per command")
        await hub.disconnect()
    }

    /// The same when b starts only after a linked the sensor, so b never hears it advertise (a
    /// linked peripheral advertises to nobody; a CI run on the real stack had b start its scan
    /// that late): b sees it in reach through a's adapter of their daemon (a sighting without
    /// RSSI), leaves it to a while a lives, and claims it when a dies.
    @Test func aNodeThatNeverHeardTheDeviceTakesItOverThroughTheSameDaemon() async throws {
        let env = try await EndToEnd(simulate: ["--adapters", "hci0,hci1"])
        defer { env.stop() }
        let hub = try await env.broker.client(loop: env.loop)
        let states = try await hub.subscribe("gatt2mqtt/bridge/nodes/+/state")
        let owners = try await hub.subscribe("gatt2mqtt/bridge/owners/heart")
        let seen = try await hub.subscribe("gatt2mqtt/bridge/nodes/b/seen")
        let responses = try await hub.subscribe("gatt2mqtt/heart/response")
        let a = try Self.start(env, "a", adapter: "hci0")
        var b: Process?
        defer {
            for p in [a, b].compactMap({ $0 }) where p.isRunning { reap(p, SIGKILL) }
        }
        let claimed = await collectUntil(owners) { $0.payloadString == #"{"node":"a","epoch":1}"# }
        try #require(claimed.last?.payloadString == #"{"node":"a","epoch":1}"#, "\(Self.log(env, "a"))")
        try #require(await eventually { Self.connected(env, on: "hci0") }, "\(Self.log(env, "a"))")
        b = try Self.start(env, "b", adapter: "hci1")
        let (online, _) = await Cluster.online(states, nodes: ["b"], timeout: .seconds(30))
        try #require(online.contains("b"), "\(Self.log(env, "b"))")
        // b reports the sensor in reach without an RSSI, and a keeps it.
        let report = await collectUntil(seen) { $0.payloadString.contains(#""rssi":-127"#) }
        #expect(report.last?.payloadString.contains(#""\#(Self.address)":{"#) == true, "\(report.map(\.payloadString))\n\(Self.log(env, "b"))")

        kill(a.processIdentifier, SIGKILL)
        await a.exited()
        let taken = await collectUntil(owners) { $0.payloadString == #"{"node":"b","epoch":2}"# }
        #expect(taken.last?.payloadString == #"{"node":"b","epoch":2}"#, "\(taken.map(\.payloadString))\n\(Self.log(env, "b"))")
        try await hub.publish(topic: "gatt2mqtt/heart/set", payload: Array(#"{"control":"01","transaction":"t1"}"#.utf8), qos: .atLeastOnce)
        let answer = await collectUntil(responses) { $0.payloadString.contains(#""transaction":"t1""#) && $0.payloadString.contains(#""status":"ok""#) }
        #expect(answer.last?.payloadString.contains(#""node":"b""#) == true, "\(answer.map(\.payloadString))\n\(Self.log(env, "b"))")
        #expect(Self.connected(env, on: "hci1") && !Self.connected(env, on: "hci0"))
        #expect(Self.log(env, "b").contains("closed a link another bridge left"), "\(Self.log(env, "b"))")
        await hub.disconnect()
    }
}
