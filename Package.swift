// swift-tools-version:6.1
import PackageDescription

// Layering (see docs/architecture.md and ../shared/STYLE.md):
//   pure codecs (no I/O):   BinaryCoding ← CapsCodec, GoProCodec, GattLayout (used by DeviceProfiles, not by BridgeCore)
//   one wrapper per C lib:  CMosquitto ← Mosquitto,  CDBus ← DBus,  CEpoll ← Reactor
//   clients over them:      BlueZ (DBus, PacketSocket, Reactor; knows nothing of the bridge)
//   the bridge core:        BridgeCore over ports (MQTTPort, BLECentral), with BridgeConfig, BridgeStore
//   adapters to the ports:  BlueZPort (BlueZ → BLECentral), BridgeRuntime (Mosquitto → MQTTPort, wiring)
//   thin executable:        gatt2mqtt
//   tests:                  Tests/<Module>Tests, sharing TestSupport (Tests/TestSupport: fakes, generators,
//                           launchers, waits), a target, not a product
let package = Package(
    name: "gatt2mqtt",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "gatt2mqtt", targets: ["gatt2mqtt"]),
        .library(name: "CapsCodec", targets: ["CapsCodec"]),
        .library(name: "GoProCodec", targets: ["GoProCodec"]),
        .library(name: "GattLayout", targets: ["GattLayout"]),
        .library(name: "AdvertisementCodec", targets: ["AdvertisementCodec"]),
        .library(name: "Mosquitto", targets: ["Mosquitto"]),
        // The event loop an MQTTClient runs on (Benchmarks/).
        .library(name: "Reactor", targets: ["Reactor"]),
        // For Benchmarks/ (store-bench).
        .library(name: "BridgeStore", targets: ["BridgeStore"]),
        // For Benchmarks/ (codec-bench's passive cases: the profile's decoder and PassiveTracker).
        .library(name: "DeviceProfiles", targets: ["DeviceProfiles"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-protobuf", exact: "1.39.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // The metrics endpoint: the swift-metrics API in the core, Prometheus and FlyingFox's
        // socket layer (no NIO, no FoundationNetworking) in the runtime.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swhitty/FlyingFox", from: "0.27.1"),
        // Heap for the event loop's timers, OrderedDictionary for JSON objects.
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
    ],
    targets: [
        // MARK: Pure codecs
        .target(name: "BinaryCoding", dependencies: [.product(name: "OrderedCollections", package: "swift-collections")]),
        .target(name: "CapsCodec", dependencies: ["BinaryCoding"]),
        .target(
            name: "GoProCodec",
            dependencies: ["BinaryCoding", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
            exclude: ["Proto"]
        ),
        .target(name: "GattLayout", dependencies: ["BinaryCoding"]),
        // Passive sensors' advertisements: BTHome v2, Xiaomi MiBeacon (AES-CCM), layout formats.
        .target(name: "AdvertisementCodec", dependencies: ["BinaryCoding", "GattLayout"]),

        // MARK: C libraries and their single Swift wrappers
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        .target(
            name: "Mosquitto",
            dependencies: ["CMosquitto", "Reactor", .product(name: "Logging", package: "swift-log")]
        ),
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        .target(name: "DBus", dependencies: ["CDBus", "Reactor"]),

        // MARK: Bluetooth over D-Bus
        // SOCK_SEQPACKET sockets of AcquireWrite/AcquireNotify (client and emulator ends).
        .target(name: "PacketSocket", dependencies: ["Reactor"]),
        // The one epoll(7) thread the bridge runs on (executor, descriptors, timers).
        .systemLibrary(name: "CEpoll"),
        .target(name: "Reactor", dependencies: ["CEpoll", .product(name: "HeapModule", package: "swift-collections")]),
        // The typed BlueZ client: D-Bus, the AcquireWrite/AcquireNotify sockets and the loop only.
        .target(name: "BlueZ", dependencies: ["DBus", "PacketSocket", "Reactor"]),
        .target(name: "BlueZSimulator", dependencies: ["DBus", "PacketSocket", "Reactor"]),

        // MARK: The bridge
        .target(name: "BridgeConfig", dependencies: ["BinaryCoding", .product(name: "Yams", package: "Yams")]),
        .target(
            name: "BridgeCore",
            // No device codec: each device profile (its driver, entities, guesses) is a DeviceProfiles plug-in.
            dependencies: ["BinaryCoding", "BridgeConfig", "BridgeStore", .product(name: "Logging", package: "swift-log"),
                           .product(name: "CoreMetrics", package: "swift-metrics")]
        ),
        // The adapter from BridgeCore's BLE ports (BLECentral, BLELink, BLEAdapterControl) to the
        // BlueZ client, beside the MQTT one (BridgeRuntime's MosquittoPort): the core does not
        // know BlueZ, and the BlueZ client does not know the core.
        .target(name: "BlueZPort", dependencies: ["BlueZ", "BridgeCore", "DBus", "Reactor"]),
        // The device profiles, a folder each (GoPro/, Rokid/, Layout/), registered in DeviceProfiles.all.
        .target(name: "DeviceProfiles", dependencies: ["AdvertisementCodec", "BridgeCore", "BridgeConfig", "BridgeStore", "BinaryCoding", "CapsCodec", "GoProCodec", "GattLayout",
                                                       .product(name: "Logging", package: "swift-log")]),
        .target(
            name: "BridgeRuntime",
            dependencies: [
                "BridgeCore", "BridgeConfig", "BridgeStore", "DeviceProfiles", "Frontend", "Mosquitto", "BinaryCoding", "BlueZ", "BlueZPort", "DBus", "Reactor",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "FlyingSocks", package: "FlyingFox"),
            ]
        ),
        // The web frontend's pages (html, css, js), compiled in as resources; BridgeRuntime's
        // FrontendServer serves them.
        .target(
            name: "Frontend",
            resources: [.embedInCode("Pages/index.html"), .embedInCode("Pages/app.css"), .embedInCode("Pages/app.js")]
        ),
        .target(
            name: "DeviceSimulators",
            // EmulatedBlueZ (what `gatt2mqtt simulate` runs): the private bus, the connection, the loop.
            dependencies: ["AdvertisementCodec", "BlueZSimulator", "DBus", "Reactor", "GoProCodec", "CapsCodec", "BinaryCoding",
                           .product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
        .target(name: "BridgeStore", dependencies: ["BinaryCoding", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift")]),
        // The models served to a radio front-end (scripts/vm/radio.py) over a Unix socket.
        .target(name: "PeripheralServer", dependencies: ["BinaryCoding", "BlueZSimulator", "DeviceSimulators", "Reactor"]),

        // MARK: Executable (thin)
        .executableTarget(
            name: "gatt2mqtt",
            dependencies: [
                "AdvertisementCodec", "BinaryCoding", "CapsCodec", "GoProCodec", "GattLayout", "BridgeConfig", "BridgeCore", "BridgeRuntime", "DeviceProfiles", "BlueZ", "BlueZSimulator", "DeviceSimulators", "PeripheralServer", "DBus", "Reactor",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Tests
        // What several test targets share, in one place (no copies, no symlinked folders): the
        // core's fakes (FakeMQTT, FakeCentral, TestDriver…), the seeded generator, the mosquitto
        // launcher with its committed configurations (Fixtures), child processes, loopback and
        // Unix sockets, and waits with a deadline. The dbus-daemon launcher is DBus' PrivateBus
        // (`gatt2mqtt simulate` starts its bus with it too). A plain library target, not a product.
        .target(
            name: "TestSupport",
            // BlueZ and BlueZSimulator for `withEmulator` (BlueZTests, BlueZSimulatorTests, BlueZPortTests).
            dependencies: ["BinaryCoding", "BlueZ", "BlueZSimulator", "BridgeCore", "DBus", "Mosquitto", "Reactor"],
            path: "Tests/TestSupport",
            exclude: ["Fixtures"]
        ),
        .testTarget(name: "ReactorTests", dependencies: ["Reactor", "TestSupport"]),
        .testTarget(name: "BinaryCodingTests", dependencies: ["BinaryCoding"]),
        .testTarget(name: "CapsCodecTests", dependencies: ["CapsCodec", "BinaryCoding", "TestSupport"], exclude: ["Vectors", "Corpus"]),
        .testTarget(name: "GoProCodecTests", dependencies: ["GoProCodec", "BinaryCoding", "TestSupport"], exclude: ["Vectors", "Corpus"]),
        .testTarget(name: "AdvertisementCodecTests", dependencies: ["AdvertisementCodec", "BinaryCoding", "GattLayout", "TestSupport"]),
        .testTarget(name: "GattLayoutTests", dependencies: ["GattLayout", "BinaryCoding", "TestSupport"], exclude: ["Corpus"]),
        .testTarget(name: "MosquittoTests", dependencies: ["Mosquitto", "Reactor", "TestSupport", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "DBusTests", dependencies: ["DBus", "Reactor", "TestSupport"]),
        .testTarget(name: "PacketSocketTests", dependencies: ["PacketSocket", "Reactor", "TestSupport"]),
        // The BlueZ client against the emulator: its pure parts, AcquireWrite/AcquireNotify.
        .testTarget(name: "BlueZTests", dependencies: ["BlueZ", "BlueZSimulator", "DBus", "TestSupport"]),
        // The emulator as a BlueZ client sees it: scans, advertising, discovery sessions, RSSI,
        // notification faults, several adapters (one test there drives a BlueZCentral on hci1).
        .testTarget(
            name: "BlueZSimulatorTests",
            dependencies: ["BlueZ", "BlueZPort", "BlueZSimulator", "BridgeCore", "DBus", "DeviceSimulators", "GoProCodec", "Reactor", "TestSupport"]
        ),
        // BlueZCentral (the core's BLE ports over the client) on the emulator, and the core's
        // device sessions run over it end to end in-process (GoProBridgeTests, RokidBridgeTests):
        // the port with the core above it and the emulated devices below.
        .testTarget(
            name: "BlueZPortTests",
            dependencies: ["BlueZ", "BlueZPort", "BlueZSimulator", "BinaryCoding", "BridgeConfig", "BridgeCore", "BridgeStore", "CapsCodec", "DBus",
                           "DeviceProfiles", "DeviceSimulators", "GoProCodec", "Reactor", "TestSupport"]
        ),
        .testTarget(name: "BridgeConfigTests", dependencies: ["BridgeConfig", "BinaryCoding"]),
        .testTarget(
            name: "BridgeCoreTests",
            dependencies: ["AdvertisementCodec", "BridgeCore", "BridgeConfig", "BridgeStore", "BinaryCoding", "DeviceProfiles", "GattLayout", "GoProCodec", "Reactor", "TestSupport",
                           .product(name: "MetricsTestKit", package: "swift-metrics")]
        ),
        .testTarget(name: "DeviceProfilesTests", dependencies: ["DeviceProfiles", "BridgeCore", "BridgeConfig", "CapsCodec", "GoProCodec", "BinaryCoding", "TestSupport"]),
        .testTarget(name: "FrontendTests", dependencies: ["Frontend"]),
        .testTarget(
            name: "BridgeRuntimeTests",
            dependencies: [
                "BridgeRuntime", "BridgeCore", "BridgeConfig", "BridgeStore", "Mosquitto", "BinaryCoding", "BlueZ", "DBus", "Reactor", "TestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(
            name: "DeviceSimulatorsTests",
            dependencies: ["DeviceSimulators", "AdvertisementCodec", "BlueZSimulator", "GoProCodec", "CapsCodec", "BinaryCoding", "GattLayout", "TestSupport",
                           .product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
        .testTarget(
            name: "PeripheralServerTests",
            dependencies: ["PeripheralServer", "DeviceSimulators", "BlueZSimulator", "BinaryCoding", "GoProCodec", "Reactor", "TestSupport"]
        ),
        .testTarget(name: "BridgeStoreTests", dependencies: ["BridgeStore", "BinaryCoding"]),
        .testTarget(
            name: "CLITests",
            dependencies: ["BinaryCoding", "DBus", "Mosquitto", "Reactor", "TestSupport", .product(name: "Yams", package: "Yams")],
            exclude: ["Bleak"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
