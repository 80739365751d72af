import Foundation
import Testing
import Yams

/// The container recipe's contract (shared/spec/bridge.md point 8, docs/configuration.md
/// "Container"): `docker-compose.yml` and `Dockerfile` parse and keep the least-privilege keys.
/// No Docker engine runs here: this checks the files, not a built image.
@Suite struct ContainerRecipeTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func compose() throws -> [String: Any] {
        let text = try String(contentsOf: root.appendingPathComponent("docker-compose.yml"), encoding: .utf8)
        return try #require(try Yams.load(yaml: text) as? [String: Any])
    }

    @Test func composeRunsTheBridgeWithLeastPrivilege() throws {
        let services = try #require(try Self.compose()["services"] as? [String: Any])
        let bridge = try #require(services["gatt2mqtt"] as? [String: Any])
        let broker = try #require(services["mosquitto"] as? [String: Any])
        #expect(bridge["network_mode"] as? String == "host")
        #expect(broker["network_mode"] as? String == "host")
        // The user's own broker by default: the bundled one only with `--profile broker`, persistent,
        // and the bridge does not depend on it.
        #expect(broker["profiles"] as? [String] == ["broker"])
        #expect(bridge["depends_on"] == nil)
        #expect((broker["volumes"] as? [String])?.contains("mosquitto-data:/mosquitto/data") == true)
        let brokerConf = try String(contentsOf: Self.root.appendingPathComponent("config/mosquitto-compose.conf"), encoding: .utf8)
        #expect(brokerConf.split(separator: "\n").contains("persistence true"))
        // Never privileged, no capabilities, no devices.
        #expect((bridge["privileged"] as? Bool ?? false) == false)
        #expect(bridge["devices"] == nil && bridge["cap_add"] == nil)
        #expect(bridge["cap_drop"] as? [String] == ["ALL"])
        // The host's system bus: the socket's directory mounted, and the address pointing at it.
        let volumes = try #require(bridge["volumes"] as? [String])
        let socketMounts = volumes.filter { v in
            let parts = v.split(separator: ":").map(String.init)
            return parts.count >= 2 && ["/run/dbus", "/run/dbus/system_bus_socket"].contains(parts[0]) && parts[1] == parts[0]
        }
        #expect(socketMounts.count == 1, "\(volumes)")
        // `- NAME=value` entries, and bare `- NAME` ones passed on from where compose runs.
        let entries = try #require(bridge["environment"] as? [String])
        let environment = Dictionary(entries.map { e -> (String, Any) in
            let parts = e.split(separator: "=", maxSplits: 1).map(String.init)
            return (parts[0], parts.count == 2 ? parts[1] : NSNull())
        }, uniquingKeysWith: { a, _ in a })
        #expect(environment["GATT2MQTT_MQTT_URL"] is NSNull && environment["GATT2MQTT_LOG_LEVEL"] is NSNull)
        #expect(environment["DBUS_SYSTEM_BUS_ADDRESS"] as? String == "unix:path=/run/dbus/system_bus_socket")
        // Configuration (read-only) and state volumes.
        #expect(volumes.contains { $0.hasSuffix(":/config:ro") })
        #expect(volumes.contains { $0.split(separator: ":").dropFirst().first == "/data" })
        #expect(environment["GATT2MQTT_DATABASE_PATH"] as? String == "/data/gatt2mqtt.sqlite")
        // The state volume is declared.
        let named = try #require(try Self.compose()["volumes"] as? [String: Any])
        #expect(named.keys.contains("gatt2mqtt-data") && named.keys.contains("mosquitto-data"))
    }

    @Test func dockerfileBuildsOnSwiftAndRunsSlimAsNonRoot() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("Dockerfile"), encoding: .utf8)
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.hasPrefix("#") }
        let froms = lines.filter { $0.hasPrefix("FROM ") }
        #expect(froms.count == 2)
        #expect(froms.first?.hasPrefix("FROM swift:${SWIFT_VERSION}-bookworm AS build") == true)
        #expect(froms.last == "FROM debian:bookworm-slim")
        for lib in ["libmosquitto1", "libdbus-1-3", "libsqlite3-0"] { #expect(text.contains(lib), "\(lib)") }
        // The last USER is not root, and the entry point is the bridge on /config.
        let user = lines.last { $0.hasPrefix("USER ") }
        #expect(user != nil && user != "USER root" && user != "USER 0")
        #expect(lines.last { $0.hasPrefix("ENTRYPOINT ") } == #"ENTRYPOINT ["gatt2mqtt","run","--config","/config/gatt2mqtt.yaml"]"#)
    }

    /// docs/benchmarks.md "Memory": every way the bridge is built for use — the image, the demo,
    /// the benchmark — goes through `scripts/build-release`, and that script keeps the flags the
    /// memory figures depend on and an order file that lists functions.
    @Test func everyReleaseBuildUsesTheSameMemoryFlags() throws {
        func read(_ path: String) throws -> String {
            try String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
        }
        // The benchmark drivers build through Benchmarks/common.sh, which they source.
        for driver in ["Benchmarks/Bridge/run.sh", "Benchmarks/ClusterHandover/run.sh"] {
            let text = try read(driver)
            #expect(text.contains("source \"$root/Benchmarks/common.sh\"") && text.contains("bench_build "),
                    "\(driver) does not build through Benchmarks/common.sh")
        }
        for path in ["Dockerfile", "scripts/run", "Benchmarks/common.sh"] {
            let text = try read(path)
            #expect(text.contains("scripts/build-release"), "\(path) does not build with scripts/build-release")
            #expect(!text.contains("swift build -c release --product gatt2mqtt"), "\(path) builds gatt2mqtt on its own")
        }
        let script = try read("scripts/build-release")
        for flag in ["--static-swift-stdlib", "-function-sections", "-use-ld=lld", "--symbol-ordering-file=",
                     "pack-relative-relocs", "--no-export-dynamic"] {
            #expect(script.contains(flag), "scripts/build-release lost \(flag)")
        }
        let order = try read("scripts/order/gatt2mqtt.order").split(separator: "\n")
        #expect(order.count > 1000)
        #expect(order.contains { $0.hasPrefix("$s10BridgeCore") }, "the order file names none of the bridge's functions")
    }
}
