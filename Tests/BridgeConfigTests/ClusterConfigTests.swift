import BridgeConfig
import Testing

/// `node_id` and `cluster:` (docs/configuration.md, docs/scale-out.md): defaults, the section,
/// each error with its key path and line, the environment.
@Suite struct ClusterConfigTests {
    func error(_ yaml: String, environment: [String: String] = [:]) -> ConfigError? {
        do { _ = try Configuration(yaml: yaml, environment: environment); return nil } catch { return error }
    }

    @Test func defaults() throws {
        let c = try Configuration(yaml: "")
        #expect(c.nodeID == Configuration.defaultNodeID)
        #expect(Configuration.isValidNodeID(c.nodeID))
        #expect(c.cluster == ClusterSettings())
        #expect(!c.cluster.enabled && c.cluster.hysteresis == 6)
        #expect(c.cluster.handoverAfter == .seconds(10) && c.cluster.seenInterval == .seconds(5))
        #expect(c.cluster.lostAfter == .seconds(30) && c.cluster.claimSettle == .seconds(1))
        #expect(c.cluster.drainTimeout == .seconds(5))
        // An empty section changes nothing.
        #expect(try Configuration(yaml: "cluster: {}").cluster == ClusterSettings())
    }

    @Test func fullSection() throws {
        let c = try Configuration(yaml: """
            node_id: Pi-Kitchen_2
            cluster:
              enabled: true
              hysteresis: 0
              handover_after: 2m
              seen_interval: 500ms
              lost_after: 3s
              claim_settle: 250ms
              drain_timeout: 8s
            """)
        #expect(c.nodeID == "Pi-Kitchen_2")
        var expected = ClusterSettings()
        expected.enabled = true
        expected.hysteresis = 0
        expected.handoverAfter = .seconds(120)
        expected.seenInterval = .milliseconds(500)
        expected.lostAfter = .seconds(3)
        expected.claimSettle = .milliseconds(250)
        expected.drainTimeout = .seconds(8)
        #expect(c.cluster == expected)
    }

    @Test func nodeIDErrors() {
        let allowed = "is not a node id: 1 to 64 letters, digits, '_' or '-' (it is an MQTT topic level)"
        for bad in ["kitchen/pi", "a+b", "a#b", "pi.local", "küche", "a b", "\"\"", String(repeating: "x", count: 65)] {
            let shown = bad == "\"\"" ? "" : bad
            #expect(error("devices: []\nnode_id: \(bad)") == ConfigError(path: "node_id", line: 2, message: "'\(shown)' \(allowed)"), "\(bad)")
        }
        #expect(throws: Never.self) { try Configuration(yaml: "node_id: \(String(repeating: "x", count: 64))") }
    }

    @Test func sectionErrors() {
        #expect(error("cluster:\n  enabled: maybe") == ConfigError(path: "cluster.enabled", line: 2, message: "expected true or false"))
        #expect(error("cluster:\n  hysteresis: 61") == ConfigError(path: "cluster.hysteresis", line: 2, message: "61 is out of range 0…60"))
        #expect(error("cluster:\n  hysteresis: -1") == ConfigError(path: "cluster.hysteresis", line: 2, message: "-1 is out of range 0…60"))
        #expect(error("cluster:\n  hysteresis: loud") == ConfigError(path: "cluster.hysteresis", line: 2, message: "expected an integer"))
        for key in ["handover_after", "seen_interval", "lost_after", "claim_settle", "drain_timeout"] {
            #expect(error("cluster:\n  enabled: true\n  \(key): 0s") == ConfigError(path: "cluster.\(key)", line: 3, message: "must be longer than 0"))
            #expect(error("cluster:\n  \(key): soon")?.path == "cluster.\(key)")
        }
        #expect(error("cluster:\n  seen_interval: 30s") == ConfigError(path: "cluster.lost_after", line: 2,
                                                                       message: "must be longer than seen_interval (30.0 seconds is not more than 30.0 seconds)"))
        #expect(error("cluster:\n  seen_interval: 5s\n  lost_after: 4s")
            == ConfigError(path: "cluster.lost_after", line: 3, message: "must be longer than seen_interval (4.0 seconds is not more than 5.0 seconds)"))
        #expect(error("cluster:\n  enabled: true\n  timeout: 5s") == ConfigError(
            path: "cluster.timeout", line: 3,
            message: "unknown key (expected one of claim_settle, drain_timeout, enabled, handover_after, hysteresis, lost_after, seen_interval)"))
        #expect(error("cluster: true") == ConfigError(path: "cluster", line: 1, message: "expected a mapping (key: value)"))
    }

    @Test func environment() throws {
        let c = try Configuration(yaml: "node_id: from-file\ncluster:\n  hysteresis: 3", environment: [
            "GATT2MQTT_NODE_ID": "from-env", "GATT2MQTT_CLUSTER_ENABLED": "true", "GATT2MQTT_CLUSTER_LOST_AFTER": "1m",
        ])
        #expect(c.nodeID == "from-env")
        #expect(c.cluster.enabled && c.cluster.hysteresis == 3 && c.cluster.lostAfter == .seconds(60))
        // Both intervals from the environment: checked after both are applied, in either order.
        let both = try Configuration(yaml: "", environment: ["GATT2MQTT_CLUSTER_LOST_AFTER": "90s", "GATT2MQTT_CLUSTER_SEEN_INTERVAL": "60s"])
        #expect(both.cluster.seenInterval == .seconds(60) && both.cluster.lostAfter == .seconds(90))

        #expect(error("", environment: ["GATT2MQTT_NODE_ID": "a/b"]) == ConfigError(
            path: "node_id (from GATT2MQTT_NODE_ID)", line: nil,
            message: "'a/b' is not a node id: 1 to 64 letters, digits, '_' or '-' (it is an MQTT topic level)"))
        #expect(error("", environment: ["GATT2MQTT_CLUSTER_ENABLED": "sometimes"]) == ConfigError(
            path: "cluster.enabled (from GATT2MQTT_CLUSTER_ENABLED)", line: nil, message: "expected true or false"))
        #expect(error("", environment: ["GATT2MQTT_CLUSTER_SEEN_INTERVAL": "1m"]) == ConfigError(
            path: "cluster.lost_after", line: nil, message: "must be longer than seen_interval (30.0 seconds is not more than 60.0 seconds)"))
        #expect(error("", environment: ["GATT2MQTT_CLUSTER_COLOUR": "red"])?.path == "cluster.colour (from GATT2MQTT_CLUSTER_COLOUR)")
        #expect(error("", environment: ["GATT2MQTT_NODE": "x"]) == ConfigError(
            path: "GATT2MQTT_NODE", line: nil,
            message: "unknown environment override (expected GATT2MQTT_<MQTT|BLUETOOTH|DATABASE|HOMEASSISTANT|METRICS|FRONTEND|CLUSTER|LIMITS>_<KEY>, GATT2MQTT_LOG_LEVEL or GATT2MQTT_NODE_ID)"))
    }

    @Test(arguments: [
        ("raspberrypi", "raspberrypi"), ("Pi-Kitchen", "pi-kitchen"), ("pi.local", "pi-local"), ("host_1", "host_1"),
        ("Küche 2", "k-che-2"), ("a/b+c#d", "a-b-c-d"), ("", "gatt2mqtt"),
        (String(repeating: "A", count: 70), String(repeating: "a", count: 64)),
    ])
    func sanitizedNodeID(_ hostName: String, _ expected: String) {
        #expect(Configuration.sanitizedNodeID(hostName) == expected)
        #expect(Configuration.isValidNodeID(Configuration.sanitizedNodeID(hostName)))
    }
}
