import BlueZ
import BridgeConfig
import Logging
import ServiceLifecycle

/// `gatt2mqtt run` on the real BlueZ: the start-up self-check (``BluetoothSelfCheck``, retried
/// until Bluetooth is ready, `shared/spec/bridge.md` point 8), then ``BridgeService`` over a
/// `BlueZCentral`. A graceful shutdown while still waiting for Bluetooth ends it cleanly.
public struct BlueZBridgeService: Service {
    let configuration: Configuration
    let logger: Logger
    let selfCheck: BluetoothSelfCheck

    public init(configuration: Configuration, logger: Logger, selfCheck: BluetoothSelfCheck? = nil) {
        self.configuration = configuration
        self.logger = logger
        self.selfCheck = selfCheck ?? BluetoothSelfCheck(busAddress: configuration.bluetooth.busAddress,
                                                         adapter: configuration.bluetooth.adapter)
    }

    public func run() async throws {
        let ready = await cancelWhenGracefulShutdown { await selfCheck.waitUntilReady(logger: logger) }
        guard let (client, adapter) = ready else { return }
        defer { client.close() }
        try await BridgeService(configuration: configuration, central: BlueZCentral(client: client, adapter: adapter),
                                logger: logger).run()
    }
}
