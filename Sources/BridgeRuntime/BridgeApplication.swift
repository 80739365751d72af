import BridgeConfig
import BridgeCore
import Foundation
import Logging
import Reactor
import ServiceLifecycle

/// `gatt2mqtt run`, assembled (``build(configuration:control:logger:)``) and run (``run()``):
/// the event loop everything runs on, and one ordered `ServiceGroup` over it — the HTTP servers
/// (opt-in: ``FrontendServer``, ``MetricsServer``), the MQTT client (``MQTTClientService``),
/// the bridge on BlueZ (``BlueZBridgeService``). They start in that order and stop in reverse
/// on SIGTERM/SIGINT or `bridge/request/restart`: the bridge publishes `offline`, the client
/// sends what is queued and disconnects, the servers close. It owns the loop (shut down after
/// the group) and the restart request (after which the process starts again: ``run()``).
public struct BridgeApplication: Sendable {
    let group: ServiceGroup
    let loop: EventLoop
    let restart: RestartRequest
    let logger: Logger

    /// Makes the services for `configuration` (nothing is started). `control`'s `restart` is the
    /// application's own. Throws ``StartupError`` when a server cannot listen or the MQTT
    /// options are refused.
    public static func build(configuration: Configuration, control: BridgeControl, logger: Logger) throws -> BridgeApplication {
        let restart = RestartRequest()
        var control = control
        control.restart = { restart.request() }
        // The web frontend (opt-in): its hub sees what the bridge publishes.
        let hub = configuration.frontend.map { _ in FrontendHub(baseTopic: configuration.mqtt.baseTopic) }
        // The HTTP servers (opt-in) first: made before the bridge (they bootstrap swift-metrics),
        // stopped after it. The frontend serves /metrics too; on the same address it is the only one.
        var services: [any Service] = []
        if let settings = configuration.frontend, let hub {
            services.append(try FrontendServer(settings: settings, hub: hub, metrics: configuration.metrics != nil, logger: logger))
        }
        if let metrics = configuration.metrics, metrics.listen != configuration.frontend?.listen {
            services.append(try MetricsServer(settings: metrics, logger: logger))
        }
        // One event loop thread (docs/architecture.md "Threads"): the MQTT client, the D-Bus
        // connection, the AcquireNotify sockets, the device sessions and their timers.
        let loop = EventLoop(name: "gatt2mqtt")
        let mqtt: MQTTClientService
        do { mqtt = try MQTTClientService(configuration: configuration, logger: logger, loop: loop) } catch {
            loop.shutdown()
            throw error
        }
        services.append(mqtt)
        // Waits (retrying, one fix line per problem) until the bus, org.bluez and the adapter are ready.
        services.append(BlueZBridgeService(configuration: configuration, mqtt: mqtt, loop: loop, logger: logger, control: control, frontend: hub))
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        return BridgeApplication(group: group, loop: loop, restart: restart, logger: logger)
    }

    /// Runs until a signal or a restart request has stopped every service; then shuts the loop
    /// down. On a restart request the process replaces itself with a fresh start of the same
    /// command line (``RestartRequest/reexecute()``): this returns only when it was not asked
    /// for, and throws when `execv` failed.
    public func run() async throws {
        defer { loop.shutdown() }  // after the services (the MQTT client and the D-Bus client are closed)
        try await withThrowingDiscardingTaskGroup { tasks in
            tasks.addTask { [group, restart, logger] in
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
            loop.shutdown()
            let error = RestartRequest.reexecute()
            throw StartupError("restart: execv(/proc/self/exe) failed: \(String(cString: strerror(error)))")
        }
    }
}
