import BlueZ
import BlueZPort
import BridgeConfig
import BridgeCore
import Foundation
import Logging
import Reactor
import ServiceLifecycle

/// `gatt2mqtt run` on the real BlueZ: the start-up self-check (``BluetoothSelfCheck``, retried
/// until Bluetooth is ready, `shared/spec/bridge.md` point 8), then ``BridgeService`` over a
/// `BlueZCentral` — with several adapters (`bluetooth.adapters`, issue 14 §1) over an
/// `AdapterSet` of one `BlueZCentral` per adapter, all on the self-check's client. A graceful
/// shutdown while still waiting for Bluetooth ends it cleanly.
///
/// Everything runs on the application's one `Reactor.EventLoop` thread (docs/architecture.md
/// "Threads"): the MQTT client, the D-Bus connection, the AcquireNotify sockets, the device
/// sessions and their timers.
public struct BlueZBridgeService: Service {
    let configuration: Configuration
    let mqtt: MQTTClientService
    let loop: EventLoop
    let logger: Logger
    let busAddress: String?
    let control: BridgeControl
    let frontend: FrontendHub?

    /// - Parameter mqtt: the bridge's MQTT client (before this service in the group), on `loop`.
    public init(configuration: Configuration, mqtt: MQTTClientService, loop: EventLoop, logger: Logger,
                control: BridgeControl = BridgeControl(), frontend: FrontendHub? = nil) {
        self.configuration = configuration
        self.mqtt = mqtt
        self.loop = loop
        self.frontend = frontend
        self.control = control
        self.logger = logger
        busAddress = configuration.bluetooth.busAddress
    }

    public func run() async throws {
        // `health_check` asks the Bluetooth side again each time (a client of its own).
        let health = BluetoothSelfCheck(busAddress: busAddress, adapters: configuration.bluetooth.adapters, retryMin: .seconds(1),
                                        retryMax: .seconds(1), loop: loop)
        var adjusted = self.control
        adjusted.checkBluetooth = { await health.health() }
        if let path = adjusted.configurationFile {
            // `backup` takes the configuration file as it is on disk.
            adjusted.readConfigurationFile = { @Sendable (limit: Int) throws -> [UInt8] in try BlueZBridgeService.readFile(path, limit: limit) }
        }
        let control = adjusted
        try await withTaskExecutorPreference(loop) {
            guard configuration.bluetooth.adapters.count > 1 else {
                let selfCheck = BluetoothSelfCheck(busAddress: busAddress, adapter: configuration.bluetooth.adapter, loop: loop)
                let ready = await cancelWhenGracefulShutdown { await selfCheck.waitUntilReady(logger: logger) }
                guard let (client, adapter) = ready else { return }
                CodePages.releaseMappedPages()  // the self-check's code (the phase is over)
                defer { client.close() }
                try await BridgeService(configuration: configuration, central: central(client, adapter), mqtt: mqtt,
                                        logger: logger, loop: loop, control: control, frontend: frontend).run()
                return
            }
            let selfCheck = BluetoothSelfCheck(busAddress: busAddress, adapters: configuration.bluetooth.adapters, loop: loop)
            let found = await cancelWhenGracefulShutdown { await selfCheck.waitUntilAdaptersReady(logger: logger) }
            guard let found else { return }
            CodePages.releaseMappedPages()  // the self-check's code (the phase is over)
            defer { found.client.close() }
            try await BridgeService(configuration: configuration, central: adapterSet(found, loop: loop), mqtt: mqtt,
                                    logger: logger, loop: loop, control: control, frontend: frontend).run()
        }
    }

    /// The central for one adapter.
    func central(_ client: BlueZClient, _ adapter: BlueZAdapter) -> BlueZCentral {
        BlueZCentral(client: client, adapter: adapter, notifyMethod: configuration.bluetooth.notify == .start ? .startNotify : .automatic,
                     onRecovery: { [logger] in logger.warning("\($0)") })
    }

    /// One central per configured adapter, in the configuration's order, on one client. An
    /// adapter missing or powered off at start is a member all the same (a warning says so):
    /// connects through it fail until it is there, and the set tries another.
    func adapterSet(_ found: BluetoothAdapters, loop: EventLoop) -> AdapterSet {
        for name in found.missing {
            let available = found.available.joined(separator: ", ")
            logger.warning("Bluetooth adapter \(name) is missing (found: \(available)): devices connect through the other adapters until it appears")
        }
        for name in found.off {
            logger.warning("Bluetooth adapter \(name) is powered off: devices connect through the other adapters until it is on (`bluetoothctl power on`)")
        }
        for id in configuration.pinsWithoutAddress {
            logger.warning("device \(id) has an adapter but no address: the adapter is chosen for it (a pin needs the address)")
        }
        let members = configuration.bluetooth.adapters.map { name in
            AdapterSet.Member(name: name, central: central(found.client, BlueZAdapter(name: name)),
                              maxConnections: configuration.bluetooth.maxConnections)
        }
        return AdapterSet(members, pins: configuration.adapterPins, logger: logger, clock: .eventLoop(loop))
    }
}

extension BlueZBridgeService {
    /// The bytes of the file at `path`, at most `limit` of them: an error naming the file otherwise.
    static func readFile(_ path: String, limit: Int) throws(StartupError) -> [UInt8] {
        let size = ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
        guard size <= limit else { throw StartupError("\(path) is \(size) bytes, above the limit of \(limit) bytes") }
        guard let data = FileManager.default.contents(atPath: path) else { throw StartupError("cannot read \(path)") }
        return Array(data)
    }
}
