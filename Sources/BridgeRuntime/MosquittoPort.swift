import BridgeCore
import Logging
import Mosquitto

/// The bridge core's `MQTTPort` over the Mosquitto client: `send` hands a message to an ordered
/// queue (returns at once); `run()` publishes them one after another, so retained state on a
/// topic always ends with its newest value. QoS ≥ 1 messages issued while the broker is away are
/// queued by the client (bounded) and go out after the reconnect.
final class MosquittoPort: MQTTPort {
    let client: MQTTClient
    let logger: Logger
    let outbox: AsyncStream<OutboundMessage>
    let sink: AsyncStream<OutboundMessage>.Continuation

    init(client: MQTTClient, logger: Logger) {
        self.client = client
        self.logger = logger
        (outbox, sink) = AsyncStream.makeStream(of: OutboundMessage.self, bufferingPolicy: .bufferingOldest(100_000))
    }

    func send(_ message: OutboundMessage) {
        if case .dropped = sink.yield(message) {
            logger.error("outgoing MQTT queue full: dropped a message", metadata: ["topic": "\(message.topic)"])
        }
    }

    /// Stops accepting messages; `run()` returns once the queue is empty.
    func finish() { sink.finish() }

    /// Publishes queued messages in order until `finish()`.
    func run() async {
        for await m in outbox {
            var properties = MQTTPublishProperties()
            if let c = m.correlationData, client.options.protocolVersion == .v5 { properties.correlationData = c }
            do {
                try await client.publish(topic: m.topic, payload: m.payload, qos: MQTTQoS(rawValue: m.qos) ?? .atLeastOnce,
                                         retain: m.retain, properties: properties)
            } catch {
                logger.warning("publish failed", metadata: ["topic": "\(m.topic)", "error": "\(error)"])
            }
        }
    }
}
