import BridgeConfig
import BridgeCore
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

    /// The client for the configuration's `mqtt` section (``mqttOptions(_:)``) on
    /// `loop`; nothing is sent before the bridge connects.
    public init(configuration: Configuration, logger: Logger, loop: EventLoop) throws(StartupError) {
        do {
            client = try MQTTClient(options: try Self.mqttOptions(configuration), logger: logger, loop: loop)
        } catch {
            throw StartupError("MQTT: \(error)")
        }
        port = MosquittoPort(client: client, logger: logger)
        self.loop = loop
    }

    /// The MQTT client options the configuration describes (Will = `bridge/state` offline; with
    /// `cluster.enabled`, this node's `bridge/nodes/<node>/state` offline, which releases its
    /// devices: docs/scale-out.md).
    public static func mqttOptions(_ c: Configuration) throws -> MQTTConnectOptions {
        let m = c.mqtt
        var o = MQTTConnectOptions(host: m.host, port: m.port, clientID: m.clientID,
                                   protocolVersion: m.protocolVersion == .v5 ? .v5 : .v311,
                                   keepAlive: Int(m.keepAlive.components.seconds), cleanSession: false)
        if m.protocolVersion == .v5 {
            o.sessionExpiryInterval = 7 * 24 * 3600
            // No CONNECT Maximum Packet Size (`limits.max_payload` is checked here instead):
            // mosquitto 2.0.11 (Debian 12) keeps a QoS 1 message larger than a client's maximum in
            // that client's in-flight window instead of dropping it, and after `max_inflight`
            // (20) of them it delivers nothing more to the client — twenty oversized messages
            // from a stranger would cut the bridge off (docs/mqtt.md, "Limits";
            // HostileInputTests.floodOfLargeMessagesLeavesMemoryFlat).
        }
        let topics = Topics(base: m.baseTopic)
        if c.cluster.enabled {
            o.will = MQTTWill(topic: topics.nodeState(c.nodeID), payload: Array(#"{"state":"offline","node":"\#(c.nodeID)"}"#.utf8),
                              qos: .atLeastOnce, retain: true)
        } else {
            o.will = MQTTWill(topic: topics.bridgeState, payload: Array(#"{"state":"offline"}"#.utf8), qos: .atLeastOnce, retain: true)
        }
        o.reconnect = MQTTReconnectPolicy(minimumDelay: m.reconnectMin, maximumDelay: m.reconnectMax, retryInitialConnect: true)
        if let user = m.username {
            let password: MQTTPassword? = m.passwordFile.map { .file($0) } ?? m.passwordEnvironment.map { .environment($0) }
            o.credentials = MQTTCredentials(username: user, password: password)
        }
        if m.useTLS {
            let t = m.tls ?? MQTTSettings.TLS()
            o.tls = MQTTTLSOptions(caFile: t.caFile, caDirectory: t.caDirectory ?? (t.caFile == nil ? "/etc/ssl/certs" : nil),
                                   certificateFile: t.certificateFile, keyFile: t.keyFile, version: t.version,
                                   verifyHostname: t.verifyHostname)
        }
        return o
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
