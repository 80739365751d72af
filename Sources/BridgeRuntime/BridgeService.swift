import BinaryCoding
import BridgeConfig
import BridgeCore
import BridgeStore
import DeviceProfiles
import Foundation
import Logging
import Mosquitto
import Reactor
import ServiceLifecycle
import UnixSignals

/// Errors that stop the bridge from starting, each saying what to fix.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// `gatt2mqtt run`: the bridge core over the MQTT client of an ``MQTTClientService`` and a BLE
/// central, as one `Service` (after the client's in the `ServiceGroup`). Start: subscribe
/// (before connecting, so a persistent session's queued commands find their route), connect,
/// announce, run the device sessions. Graceful shutdown (SIGTERM/SIGINT): stop the sessions
/// (links closed), publish `offline` and return — the client's service, stopped next, waits for
/// the acknowledgements and disconnects.
public struct BridgeService: Service {
    let configuration: Configuration
    let central: any BLECentral
    let mqtt: MQTTClientService
    let logger: Logger
    let databasePath: String
    let loop: EventLoop
    let control: BridgeControl
    /// The web frontend's hub (nil: the frontend is off): it sees every message the bridge
    /// publishes, and hands the pages' requests to the bridge.
    let frontend: FrontendHub?

    /// - Parameter loop: the event loop to run on (the MQTT client on it, the bridge's tasks
    ///   preferring it, waits on its timers).
    /// - Parameter control: restart, reload and log-level hooks for the bridge's requests.
    /// - Parameter mqtt: the client to publish and subscribe through (on `loop`).
    public init(configuration: Configuration, central: any BLECentral, mqtt: MQTTClientService, logger: Logger, loop: EventLoop,
                control: BridgeControl = BridgeControl(), frontend: FrontendHub? = nil) {
        self.configuration = configuration
        self.mqtt = mqtt
        self.frontend = frontend
        self.control = control
        self.central = central
        self.logger = logger
        self.loop = loop
        databasePath = configuration.database.path ?? BridgeService.defaultDatabasePath()
    }

    /// `$STATE_DIRECTORY/gatt2mqtt.sqlite` (systemd) or `~/.local/state/gatt2mqtt/gatt2mqtt.sqlite`.
    public static func defaultDatabasePath() -> String {
        let env = ProcessInfo.processInfo.environment
        if let dir = env["STATE_DIRECTORY"], !dir.isEmpty { return dir + "/gatt2mqtt.sqlite" }
        let home = env["HOME"] ?? NSHomeDirectory()
        return home + "/.local/state/gatt2mqtt/gatt2mqtt.sqlite"
    }

    public func run() async throws {
        try await withTaskExecutorPreference(loop) { try await runBridge() }
    }

    private func runBridge() async throws {
        let store: BridgeStore
        do { store = try BridgeStore(path: databasePath) } catch { throw StartupError("\(error)") }
        CodePages.releaseMappedPages()  // opening and migrating the store is over
        let client = mqtt.client
        let port = mqtt.port
        // Wall-clock nanoseconds; a clock set before 1970 (or absurdly late) reads 0, not a trap.
        let clock = { @Sendable () -> UInt64 in UInt64(exactly: (max(0, Date().timeIntervalSince1970) * 1e9).rounded(.down)) ?? 0 }
        let bridgePort: any MQTTPort = frontend.map { FrontendTee(inner: port, hub: $0) } ?? port
        let bridge = try Bridge(configuration: configuration, store: store, mqtt: bridgePort,
                                central: central,
                                profiles: DeviceProfiles.catalog(context: DriverContext(now: clock)), logger: logger,
                                clock: .eventLoop(loop), control: control,
                                batchCommits: true, loop: SessionLoop(executor: loop, inCallback: { loop.inCallback }))
        // The answers handled in one loop turn are committed together before the loop sleeps,
        // then their responses and states published (AnswerBatch). Publishing from a hook queues
        // packets after the MQTT client's flush hook may have run: an empty job makes the loop
        // go round once more, so its hooks run again before it sleeps.
        let commitHook = loop.addHook { [loop] in if bridge.commitBatch() { loop.execute {} } }
        defer { loop.removeHook(commitHook) }
        // Test only (SystemdWatchdogTests): a message on this topic blocks the event loop for the
        // payload's seconds (at most 30), as a frozen loop would.
        let freezeTopic = ProcessInfo.processInfo.environment["TEST_GATT2MQTT_FREEZE_ON_TOPIC"]
        for filter in bridge.subscriptions {
            // Handed to the bridge where the message arrives (the event loop): routing is quick and the device sessions take the commands through their
            // own queues.
            let noLocal = !bridge.ownPublishesWanted.contains(filter)
            try await mqtt.subscribe(filter, noLocal: noLocal) { m in
                CrashTrace.noteMessage(topic: m.topic, payload: m.payload)
                if m.topic == freezeTopic { Self.freezeForTests(m.payload) }
                bridge.handle(InboundMessage(topic: m.topic, payload: m.payload, retain: m.retain,
                                             responseTopic: m.properties.responseTopic, correlationData: m.properties.correlationData,
                                             packetID: m.packetID))
            }
        }
        // The frontend's requests and commands go the way MQTT's do.
        frontend?.attach({ bridge.handle($0) }, controls: { bridge.controls(for: $0) })
        defer { frontend?.attach(nil) }
        let events = client.connectionEvents()
        do { try await client.connect() } catch { throw StartupError("MQTT broker \(configuration.mqtt.host):\(configuration.mqtt.port): \(error)") }
        logger.info("connected to the broker", metadata: ["host": "\(configuration.mqtt.host)", "port": "\(configuration.mqtt.port)"])
        // The log on MQTT (bridge/logging), through the bridge's port, from here to the stop.
        let logging = MQTTLogForwarder(port: bridgePort, topic: configuration.mqtt.baseTopic + "/bridge/logging",
                                       backlog: { (port.outstandingCount, client.statistics.isConnected) })
        LogTap.shared.setMQTT { logging.forward($0) }
        defer { LogTap.shared.setMQTT(nil) }
        // Bluetooth answered before this service started (BlueZBridgeService's self-check) and the
        // broker accepted us: ready for systemd (`Type=notify`, config/gatt2mqtt.service).
        CodePages.releaseMappedPages()  // the bridge's set-up and the broker's connect are over
        SystemdNotify.send("READY=1\nSTATUS=connected to \(configuration.mqtt.host):\(configuration.mqtt.port)")
        // `WatchdogSec=`: WATCHDOG=1 from the event loop's own timer, so a loop that no longer
        // turns stops the pings and systemd restarts the bridge.
        let watchdog = SystemdNotify.watchdogInterval(ProcessInfo.processInfo.environment).map { SystemdWatchdog(loop: loop, interval: $0) }
        if let watchdog {
            logger.info("systemd watchdog on", metadata: ["interval": "\(watchdog.interval)"])
            watchdog.start()
        }

        await withDiscardingTaskGroup { group in

            group.addTask {
                // SIGHUP: reload the configuration file (as bridge/request/config/reload).
                for await _ in await UnixSignalsSequence(trapping: .sighup) { bridge.reloadConfiguration() }
            }
            group.addTask {
                var first = true
                for await e in events {
                    switch e {
                    case .connected:
                        if first { first = false } else { bridge.metrics.mqttReconnects.increment(); await bridge.brokerReconnected() }
                    case .disconnected:
                        bridge.brokerDisconnected()
                    default:
                        break
                    }
                }
            }
            // The bridge runs until graceful shutdown; then it publishes `offline` and returns
            // (the client's service then sends what is queued and disconnects).
            await cancelWhenGracefulShutdown { await bridge.run() }
            watchdog?.stop()
            SystemdNotify.send("STOPPING=1")
            group.cancelAll()
        }
        logger.info("stopped")
    }
}

extension BridgeService {
    /// Blocks the calling thread (the event loop) for the payload's seconds, at most 30.
    static func freezeForTests(_ payload: [UInt8]) {
        guard let d = try? checkedDuration(String(decoding: payload, as: UTF8.self), in: .zero ... .seconds(30)) else { return }
        FileHandle.standardError.write(Data("test hook: the event loop blocked for \(d)\n".utf8))
        var t = timespec(tv_sec: Int(d.components.seconds), tv_nsec: Int(d.components.attoseconds / 1_000_000_000))
        var left = timespec()
        while nanosleep(&t, &left) != 0, errno == EINTR { t = left }
    }
}

extension BridgeClock {
    /// The runtime's clock: the continuous clock, waited on with the event loop's timers.
    static func eventLoop(_ loop: EventLoop) -> BridgeClock {
        .continuous(sleep: Sleep { [loop] in try await loop.sleep(for: $0) })
    }
}
