import BinaryCoding
import BridgeConfig
import BridgeCore
import Glibc
import Logging
import Mosquitto
import Reactor

/// `gatt2mqtt health` (the container's `HEALTHCHECK`): asks the running bridge over MQTT. It
/// connects to the configured broker as its own client (`<client_id>-health-<pid>`, clean
/// session, no Will), sends `bridge/request/health_check` with a transaction, and waits for the
/// answer on `bridge/response/health_check` with that transaction.
public enum HealthProbe {
    /// The default deadline for the whole exchange.
    public static let defaultTimeout: Duration = .seconds(10)

    public struct Outcome: Sendable, Equatable {
        /// The bridge answered `"healthy": true`.
        public let healthy: Bool
        /// One line for the person or the supervisor reading it.
        public let message: String
    }

    /// Asks the bridge `configuration` describes; never waits more than `timeout`.
    public static func check(configuration c: Configuration, timeout: Duration = defaultTimeout, logger: Logger) async -> Outcome {
        let topics = Topics(base: c.mqtt.baseTopic)
        let transaction = "health-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var options: MQTTConnectOptions
        do { options = try MQTTClientService.mqttOptions(c) } catch { return Outcome(healthy: false, message: "MQTT: \(error)") }
        // Not the bridge's client id: the broker would take the bridge's session away.
        options.clientID = "\(c.mqtt.clientID)-health-\(getpid())"
        options.cleanSession = true
        options.sessionExpiryInterval = nil
        options.will = nil
        options.reconnect = MQTTReconnectPolicy(enabled: false, retryInitialConnect: false)
        let loop = EventLoop(name: "health")
        defer { loop.shutdown() }
        let client: MQTTClient
        do { client = try MQTTClient(options: options, logger: logger, loop: loop) } catch {
            return Outcome(healthy: false, message: "MQTT: \(error)")
        }
        let broker = "\(c.mqtt.host):\(c.mqtt.port)"
        let response = topics.bridgeResponse("health_check")
        let outcome = await withDeadline(timeout, sleep: { [loop] in try await loop.sleep(for: $0) }) { () async -> Outcome? in
            do {
                try await client.connect()
            } catch {
                return Outcome(healthy: false, message: "cannot reach the broker \(broker): \(error)")
            }
            do {
                let answers = try await client.subscribe(response, qos: .atLeastOnce)
                try await client.publish(topic: "\(topics.base)/bridge/request/health_check", payload: Array(#"{"transaction":"\#(transaction)"}"#.utf8),
                                         qos: .atLeastOnce)
                for await m in answers {
                    if let outcome = Self.outcome(of: m.payload, transaction: transaction) { return outcome }
                }
                return nil
            } catch {
                return Outcome(healthy: false, message: "broker \(broker): \(error)")
            }
        }
        await client.disconnect()
        return outcome ?? Outcome(healthy: false, message: """
            no answer on \(response) within \(secondsText(timeout)) (is the bridge running on \(broker), with mqtt.api not off?)
            """)
    }

    /// The outcome a response gives, or nil when it is not the answer to `transaction`.
    static func outcome(of payload: [UInt8], transaction: String) -> Outcome? {
        guard let o = try? JSONValue(parsing: payload).objectValue, o["transaction"]?.stringValue == transaction else { return nil }
        guard o["status"]?.stringValue == "ok", let data = o["data"]?.objectValue else {
            return Outcome(healthy: false, message: "the bridge refused health_check: \(o["error"]?.stringValue ?? JSONValue.object(o).jsonText)")
        }
        var rest = data
        rest["healthy"] = nil
        if data["healthy"]?.boolValue == true { return Outcome(healthy: true, message: "healthy \(JSONValue.object(rest).jsonText)") }
        return Outcome(healthy: false, message: "not healthy: \(JSONValue.object(rest).jsonText)")
    }
}
