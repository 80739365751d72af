import BridgeCore
import Logging
import Mosquitto
import Reactor
import Synchronization

/// The bridge core's `MQTTPort` over the Mosquitto client. `send` hands the message to
/// libmosquitto on the caller's thread (`publishDetached`) and returns: messages go out in the
/// order they were sent — so retained state on a topic always ends with its newest value — and
/// none waits for the acknowledgement of the one before (a command's response and its state
/// leave back to back). QoS ≥ 1 messages issued while the broker is away are queued by the
/// client (bounded) and go out after the reconnect, ahead of newer ones.
///
/// It owns the count of messages handed over and not yet acknowledged (or failed), and the
/// waiters for that count to reach zero (``drained(within:on:)``), as one value behind one lock.
final class MosquittoPort: MQTTPort {
    let client: MQTTClient
    let logger: Logger
    private let outstanding = Mutex(Outstanding())

    /// The messages in flight and who waits for none to be.
    struct Outstanding {
        var count = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0

        /// One message acknowledged (or failed): the waiters to resume when it was the last.
        mutating func settled() -> [CheckedContinuation<Void, Never>] {
            count -= 1
            guard count == 0 else { return [] }
            defer { waiters = [:] }
            return Array(waiters.values)
        }
    }

    init(client: MQTTClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    func send(_ message: OutboundMessage) {
        var properties = MQTTPublishProperties()
        if let c = message.correlationData, client.options.protocolVersion == .v5 { properties.correlationData = c }
        outstanding.withLock { $0.count += 1 }
        let logger = self.logger
        let topic = message.topic
        client.publishDetached(topic: message.topic, payload: message.payload, qos: MQTTQoS(rawValue: message.qos) ?? .atLeastOnce,
                               retain: message.retain, properties: properties) { [self] result in
            for waiter in outstanding.withLock({ $0.settled() }) { waiter.resume() }
            if case let .failure(error) = result {
                logger.warning("publish failed", metadata: ["topic": "\(topic)", "error": "\(error)"])
            }
        }
    }

    /// How many messages are handed over and not yet acknowledged (or failed).
    var outstandingCount: Int { outstanding.withLock { $0.count } }

    /// Returns once every message sent so far is acknowledged (or failed), or after `timeout`
    /// (the loop's timer), or when the task is cancelled.
    func drained(within timeout: Duration, on loop: EventLoop) async {
        _ = await withDeadline(timeout, sleep: { try await loop.sleep(for: $0) }) { () async -> Void? in
            await self.waitUntilNoneOutstanding()
            return ()
        }
    }

    /// Returns when no message is outstanding (at once if none is), or when the task is cancelled.
    private func waitUntilNoneOutstanding() async {
        let id = outstanding.withLock { o in
            o.nextWaiter += 1
            return o.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = outstanding.withLock { o -> Bool in
                    guard o.count > 0, !Task.isCancelled else { return true }
                    o.waiters[id] = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            outstanding.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
