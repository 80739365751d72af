import BridgeConfig
import Logging
import Mosquitto
import Reactor
import ServiceLifecycle
import Synchronization

/// The bridge's MQTT client as a service of the application's ordered `ServiceGroup`
/// (``BridgeApplication``), placed before ``BlueZBridgeService``: it owns the `MQTTClient` (made
/// on the application's event loop, not yet connected), the core's port over it
/// (``MosquittoPort``) and the bridge's subscriptions. The bridge subscribes, connects and
/// publishes through it. A graceful shutdown stops the services in reverse order, so the
/// bridge has stopped (its `offline` handed to the port) before this one is asked to: it then
/// waits until every message handed to the port is acknowledged (at most ``drainTimeout``),
/// and disconnects.
public final class MQTTClientService: Service, Sendable {
    /// How long a graceful shutdown waits for outstanding acknowledgements.
    public static let drainTimeout: Duration = .seconds(5)

    let client: MQTTClient
    let port: MosquittoPort
    let loop: EventLoop
    /// The bridge's subscriptions, held until the client disconnects: a subscription dropped
    /// earlier would be unsubscribed at the broker, and the persistent session would lose the
    /// route its queued commands come back by.
    private let subscriptions = Mutex<[MQTTSubscription]>([])

    /// The client for the configuration's `mqtt` section (``BridgeService/mqttOptions(_:)``) on
    /// `loop`; nothing is sent before the bridge connects.
    public init(configuration: Configuration, logger: Logger, loop: EventLoop) throws(StartupError) {
        do {
            client = try MQTTClient(options: try BridgeService.mqttOptions(configuration), logger: logger, loop: loop)
        } catch {
            throw StartupError("MQTT: \(error)")
        }
        port = MosquittoPort(client: client, logger: logger)
        self.loop = loop
    }

    /// Subscribes `filter`, each message to `handler` on the loop; held until the disconnect.
    func subscribe(_ filter: String, noLocal: Bool, handler: @escaping @Sendable (MQTTMessage) -> Void) async throws(MQTTError) {
        let s = try await client.subscribe(filter, qos: .atLeastOnce, options: MQTTSubscribeOptions(noLocal: noLocal), handler: handler)
        subscriptions.withLock { $0.append(s) }
    }

    /// Until graceful shutdown (or cancellation); then the outstanding acknowledgements, then
    /// DISCONNECT.
    public func run() async {
        try? await gracefulShutdown()
        await port.drained(within: Self.drainTimeout, on: loop)
        await client.disconnect()
        subscriptions.withLock { $0.removeAll() }
    }
}
