import BridgeCore
import Logging
import Mosquitto
import Synchronization

/// The bridge core's `MQTTPort` over the Mosquitto client. `send` hands the message to
/// libmosquitto on the caller's thread (`publishDetached`) and returns: messages go out in the
/// order they were sent — so retained state on a topic always ends with its newest value — and
/// none waits for the acknowledgement of the one before (a command's response and its state
/// leave back to back). QoS ≥ 1 messages issued while the broker is away are queued by the
/// client (bounded) and go out after the reconnect, ahead of newer ones.
final class MosquittoPort: MQTTPort {
    let client: MQTTClient
    let logger: Logger
    /// Messages handed over and not yet acknowledged (or failed).
    private let pending = Atomic<Int>(0)
    private let finished: AsyncStream<Void>
    private let finishSink: AsyncStream<Void>.Continuation

    init(client: MQTTClient, logger: Logger) {
        self.client = client
        self.logger = logger
        (finished, finishSink) = AsyncStream.makeStream(of: Void.self)
    }

    func send(_ message: OutboundMessage) {
        var properties = MQTTPublishProperties()
        if let c = message.correlationData, client.options.protocolVersion == .v5 { properties.correlationData = c }
        pending.add(1, ordering: .relaxed)
        let logger = self.logger
        let topic = message.topic
        client.publishDetached(topic: message.topic, payload: message.payload, qos: MQTTQoS(rawValue: message.qos) ?? .atLeastOnce,
                               retain: message.retain, properties: properties) { [self] result in
            self.pending.subtract(1, ordering: .relaxed)
            if case let .failure(error) = result {
                logger.warning("publish failed", metadata: ["topic": "\(topic)", "error": "\(error)"])
            }
        }
    }

    /// Stops the port: `run()` returns once what was sent is acknowledged (at most 5 s).
    func finish() { finishSink.finish() }

    /// Runs until `finish()`, then waits for outstanding acknowledgements.
    func run() async {
        for await _ in finished {}
        let deadline = ContinuousClock.now + .seconds(5)
        while pending.load(ordering: .relaxed) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}
