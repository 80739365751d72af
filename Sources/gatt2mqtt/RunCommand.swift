import ArgumentParser
import BridgeRuntime
import Foundation
import Logging
import ServiceLifecycle

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
        let name = logLevel ?? configuration.logLevel.rawValue
        guard let level = Logger.Level(rawValue: name) else { throw CLIError("--log-level: '\(name)' is not a level") }
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = level
            return h
        }
        let logger = Logger(label: "gatt2mqtt")
        // Waits (retrying, one fix line per problem) until the bus, org.bluez and the adapter are ready.
        let service = BlueZBridgeService(configuration: configuration, logger: logger)
        // The metrics endpoint (opt-in) first: made before the bridge (it bootstraps swift-metrics),
        // stopped after it.
        let metrics = try configuration.metrics.map { [try MetricsServer(settings: $0, logger: logger)] } ?? []
        let group = ServiceGroup(configuration: .init(
            services: metrics + [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
