import ArgumentParser
import BridgeRuntime
import Foundation
import Logging
import ServiceLifecycle
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
        // Test only (the crash-loop end-to-end tests): die while handling a message on this topic.
        Bridge.crashOnTopicForTests.withLock { $0 = ProcessInfo.processInfo.environment["TEST_GATT2MQTT_CRASH_ON_TOPIC"] }
        let name = logLevel ?? configuration.logLevel.rawValue
        guard let level = Logger.Level(rawValue: name) else { throw CLIError("--log-level: '\(name)' is not a level") }
        let logging = RuntimeLogLevel(level)
        logging.bootstrap()
        let logger = Logger(label: "gatt2mqtt")
        let restart = RestartRequest()
        let path = config
        let control = BridgeControl(
            reloadConfiguration: { try loadConfiguration(path) },
            setLogLevel: { logging.current = $0.loggerLevel },
            restart: { restart.request() },
            configurationFile: path, logLevel: LogLevel(rawValue: name))
        // The web frontend (opt-in): its hub sees what the bridge publishes.
        let hub = configuration.frontend.map { _ in FrontendHub(baseTopic: configuration.mqtt.baseTopic) }
        // Waits (retrying, one fix line per problem) until the bus, org.bluez and the adapter are ready.
        let service = BlueZBridgeService(configuration: configuration, logger: logger, control: control, frontend: hub)
        // The HTTP servers (opt-in) first: made before the bridge (they bootstrap swift-metrics),
        // stopped after it. The frontend serves /metrics too; on the same address it is the only one.
        var servers: [any Service] = []
        if let settings = configuration.frontend, let hub {
            servers.append(try FrontendServer(settings: settings, hub: hub, metrics: configuration.metrics != nil, logger: logger))
        }
        if let metrics = configuration.metrics, metrics.listen != configuration.frontend?.listen {
            servers.append(try MetricsServer(settings: metrics, logger: logger))
        }
        let group = ServiceGroup(configuration: .init(
            services: servers + [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await withThrowingDiscardingTaskGroup { tasks in
            tasks.addTask {
                for await _ in restart.requests {
                    logger.notice("restarting (bridge/request/restart)")
                    await group.triggerGracefulShutdown()
                    break
                }
            }
            try await group.run()
            tasks.cancelAll()
        }
        if restart.isRequested {
            let error = RestartRequest.reexecute()
            throw CLIError("restart: execv(/proc/self/exe) failed: \(String(cString: strerror(error)))")
        }
    }
}
