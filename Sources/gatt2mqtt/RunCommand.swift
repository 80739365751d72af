import ArgumentParser
import BlueZ
import BridgeRuntime
import DBus
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

    @Option(help: "Log level: trace, debug, info, notice, warning, error.")
    var logLevel: String = "info"

    func run() async throws {
        let configuration = try loadConfiguration(config)
        guard let level = Logger.Level(rawValue: logLevel) else { throw CLIError("--log-level: '\(logLevel)' is not a level") }
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = level
            return h
        }
        let logger = Logger(label: "gatt2mqtt")
        let bus: DBusBus = configuration.bluetooth.busAddress.map { .address($0) } ?? .system
        let client: BlueZClient
        do { client = try await BlueZClient.connect(bus) } catch {
            throw CLIError("BlueZ is not reachable on the \(configuration.bluetooth.busAddress.map { "bus \($0)" } ?? "system bus"): \(error) (is bluetoothd running? in a container, mount /run/dbus/system_bus_socket)")
        }
        defer { client.close() }
        let adapter: BlueZAdapter
        do { adapter = try client.adapter(named: configuration.bluetooth.adapter) } catch {
            throw CLIError("bluetooth.adapter: \(error)")
        }
        let service = BridgeService(configuration: configuration, central: BlueZCentral(client: client, adapter: adapter), logger: logger)
        let group = ServiceGroup(configuration: .init(
            services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
