// swift-tools-version:6.1
import PackageDescription

// Benchmarks live in their own package so the main build and CI stay lean.
//   swift run -c release --package-path Benchmarks codec-bench [filter]
//   swift run -c release --package-path Benchmarks store-bench [filter]
let package = Package(
    name: "gatt2mqtt-benchmarks",
    dependencies: [.package(name: "gatt2mqtt", path: "..")],
    targets: [
        .target(name: "CMallocCounter"),
        .executableTarget(
            name: "codec-bench",
            dependencies: [
                "CMallocCounter",
                .product(name: "CapsCodec", package: "gatt2mqtt"),
                .product(name: "GoProCodec", package: "gatt2mqtt"),
                .product(name: "GattLayout", package: "gatt2mqtt"),
            ],
            path: "Sources/CodecBench"
        ),
        // The SQLite writes of one command (BridgeStore on a real file): docs/benchmarks.md
        .executableTarget(
            name: "store-bench",
            dependencies: ["CMallocCounter", .product(name: "BridgeStore", package: "gatt2mqtt")],
            path: "Sources/StoreBench"
        ),
        // MQTTClient vs libmosquitto from C: Benchmarks/MQTT/run.sh
        .executableTarget(
            name: "mqtt-bench",
            dependencies: [.product(name: "Mosquitto", package: "gatt2mqtt")],
            path: "MQTT/Swift"
        ),
        // command → device → telemetry through mosquitto, the emulator and `gatt2mqtt run`:
        // Benchmarks/Bridge/run.sh
        .executableTarget(
            name: "bridge-bench",
            dependencies: [.product(name: "Mosquitto", package: "gatt2mqtt")],
            path: "Bridge/Swift"
        ),
    ],
    swiftLanguageModes: [.v6]
)
