import BlueZ
import BlueZPort
import BridgeConfig
import BridgeCore
import Logging
import Reactor
import ServiceLifecycle

/// `gatt2mqtt run` on the real BlueZ: the start-up self-check (``BluetoothSelfCheck``, retried
/// until Bluetooth is ready, `shared/spec/bridge.md` point 8), then ``BridgeService`` over a
/// `BlueZCentral`. A graceful shutdown while still waiting for Bluetooth ends it cleanly.
///
/// Everything runs on one `Reactor.EventLoop` thread (docs/architecture.md "Threads"): the MQTT
/// client, the D-Bus connection, the AcquireNotify sockets, the device sessions and their timers.
public struct BlueZBridgeService: Service {
    let configuration: Configuration
    let logger: Logger
    let busAddress: String?
    let control: BridgeControl
    let frontend: FrontendHub?

    public init(configuration: Configuration, logger: Logger, control: BridgeControl = BridgeControl(), frontend: FrontendHub? = nil) {
        self.configuration = configuration
        self.frontend = frontend
        self.control = control
        self.logger = logger
        busAddress = configuration.bluetooth.busAddress
    }

    public func run() async throws {
        let loop = EventLoop(name: "gatt2mqtt")
        defer { loop.shutdown() }  // after the clients below are closed
        try await withTaskExecutorPreference(loop) {
            let selfCheck = BluetoothSelfCheck(busAddress: busAddress, adapter: configuration.bluetooth.adapter, loop: loop)
            let ready = await cancelWhenGracefulShutdown { await selfCheck.waitUntilReady(logger: logger) }
            guard let (client, adapter) = ready else { return }
            defer { client.close() }
            try await BridgeService(configuration: configuration, central: BlueZCentral(client: client, adapter: adapter,
                                                                                             notifyMethod: configuration.bluetooth.notify == .start ? .startNotify : .automatic,
                                                                                             onRecovery: { [logger] in logger.warning("\($0)") }),
                                    logger: logger, loop: loop, control: control, frontend: frontend).run()
        }
    }
}
