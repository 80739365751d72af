import ArgumentParser
import BridgeRuntime
import Foundation
import Logging
import Reactor
import BridgeConfig
import BridgeCore

/// `gatt2mqtt run`: the bridge. Graceful shutdown on SIGTERM/SIGINT (offline published,
/// outbox persisted, links closed).
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the bridge (MQTT ↔ BlueZ devices) with a configuration file."
    )

    @Option(name: .shortAndLong, help: "The YAML configuration (environment: GATT2MQTT_CONFIG).")
    var config: String = ProcessInfo.processInfo.environment["GATT2MQTT_CONFIG"] ?? "config/gatt2mqtt.yaml"

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default: the configuration's log_level, or GATT2MQTT_LOG_LEVEL, or info).")
    var logLevel: String?

    func run() async throws {
        let configuration = try loadConfiguration(config)
        // Each phase of start-up gives back the code it ran (docs/benchmarks.md, "Start-up's pages
        // given back"): here the argument parser's and the YAML reader's.
        CodePages.releaseMappedPages()
        // Test only (the crash-loop end-to-end tests): die while handling a message on this topic.
        Bridge.crashOnTopicForTests.withLock { $0 = ProcessInfo.processInfo.environment["TEST_GATT2MQTT_CRASH_ON_TOPIC"] }
        let name = logLevel ?? configuration.logLevel.rawValue
        guard let level = Logger.Level(rawValue: name) else { throw CLIError("--log-level: '\(name)' is not a level") }
        let logging = RuntimeLogLevel(level)
        logging.bootstrap()
        let logger = Logger(label: "gatt2mqtt")
        let path = config
        let control = BridgeControl(
            reloadConfiguration: { try loadConfiguration(path) },
            setLogLevel: { logging.current = $0.loggerLevel },
            configurationFile: path, logLevel: logLevel.flatMap { LogLevel(rawValue: $0) })  // the flag wins over options set over MQTT
        try await BridgeApplication.build(configuration: configuration, control: control, logger: logger).run()
    }
}
