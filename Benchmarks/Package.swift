// swift-tools-version:6.1
import PackageDescription

// Benchmarks live in their own package so the main build and CI stay lean.
//   swift run -c release --package-path Benchmarks codec-bench [filter]
//   swift run -c release --package-path Benchmarks store-bench [filter]
//   swift run -c release --package-path Benchmarks metrics-bench
let package = Package(
    name: "gatt2mqtt-benchmarks",
    dependencies: [
        .package(name: "gatt2mqtt", path: ".."),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        .target(name: "CMallocCounter"),
        .executableTarget(
            name: "codec-bench",
            dependencies: [
                "CMallocCounter",
                .product(name: "CapsCodec", package: "gatt2mqtt"),
                .product(name: "GoProCodec", package: "gatt2mqtt"),
                .product(name: "GattLayout", package: "gatt2mqtt"),
                .product(name: "AdvertisementCodec", package: "gatt2mqtt"),
                .product(name: "DeviceProfiles", package: "gatt2mqtt"),
            ],
            path: "Sources/CodecBench"
        ),
        // The SQLite writes of one command (BridgeStore on a real file): docs/benchmarks.md
        .executableTarget(
            name: "store-bench",
            dependencies: ["CMallocCounter", .product(name: "BridgeStore", package: "gatt2mqtt")],
            path: "Sources/StoreBench"
        ),
        // One command's metric updates, swift-prometheus against the no-op handlers: docs/benchmarks.md
        .executableTarget(
            name: "metrics-bench",
            dependencies: [
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            path: "Sources/MetricsBench"
        ),
        // MQTTClient vs libmosquitto from C: Benchmarks/MQTT/run.sh
        .executableTarget(
            name: "mqtt-bench",
            dependencies: [.product(name: "Mosquitto", package: "gatt2mqtt"), .product(name: "Reactor", package: "gatt2mqtt")],
            path: "MQTT/Swift"
        ),
        // command → device → telemetry through mosquitto, the emulator and `gatt2mqtt run`:
        // Benchmarks/Bridge/run.sh
        .executableTarget(
            name: "bridge-bench",
            dependencies: [.product(name: "Mosquitto", package: "gatt2mqtt"), .product(name: "Reactor", package: "gatt2mqtt")],
            path: "Bridge/Swift"
        ),
        // forced handovers on a two-node cluster, commands sent all along: Benchmarks/ClusterHandover/run.sh
        .executableTarget(
            name: "handover-bench",
            dependencies: [.product(name: "Mosquitto", package: "gatt2mqtt"), .product(name: "Reactor", package: "gatt2mqtt")],
            path: "ClusterHandover/Swift"
        ),
    ],
    swiftLanguageModes: [.v6]
)
