import ArgumentParser
import BridgeConfig
import BridgeRuntime
import Foundation
import Logging

/// `gatt2mqtt health`: asks the running bridge (the Dockerfile's `HEALTHCHECK`): exit 0 when it
/// answers `"healthy": true`, else 1 with the reason on stderr.
struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Ask the running bridge over MQTT (bridge/request/health_check); exit 0 when it answers healthy."
    )

    @Option(name: .shortAndLong, help: "The YAML configuration, as for run (environment: GATT2MQTT_CONFIG).")
    var config: String = ProcessInfo.processInfo.environment["GATT2MQTT_CONFIG"] ?? "config/gatt2mqtt.yaml"

    @Option(help: "Seconds to wait for the answer (default 10).")
    var timeout: Double = 10

    func run() async throws {
        let configuration = try loadConfiguration(config)
        let deadline = try CLIError.seconds("timeout", timeout, in: .milliseconds(1)...DurationLimits.maximum)
        var logger = Logger(label: "gatt2mqtt.health")
        logger.logLevel = .critical
        let outcome = await HealthProbe.check(configuration: configuration, timeout: deadline, logger: logger)
        guard outcome.healthy else { throw CLIError(outcome.message) }
        emit(outcome.message)
    }
}
