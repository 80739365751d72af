import BridgeCore
import Synchronization

/// The bridge's MQTT side as a test double: records every message the bridge sends, and lets a
/// test wait — without polling — until the ones it expects are there.
public final class FakeMQTT: MQTTPort {
    private let log = WaitableLog<OutboundMessage>()
    /// Called with each message as it is sent, before it is recorded (to look at the store then).
    public let onSend = Mutex<(@Sendable (OutboundMessage) -> Void)?>(nil)

    public init() {}

    public func send(_ message: OutboundMessage) {
        onSend.withLock { $0 }?(message)
        log.append(message)
    }

    /// Every message sent so far, in order.
    public var sent: [OutboundMessage] { log.elements }

    /// How many waits are suspended now (``WaitableLog/waiting``).
    public var waiting: Int { log.waiting }

    public func messages(_ topic: String) -> [OutboundMessage] { sent.filter { $0.topic == topic } }

    /// Waits (up to `timeout`) until `count` messages on `topic` were sent; returns them all.
    public func wait(for topic: String, count: Int = 1, timeout: Duration = .seconds(30)) async throws(WaitTimeout) -> [OutboundMessage] {
        try await wait(for: topic, timeout: timeout, "\(count) message(s)") { $0.count >= count }
    }

    /// Waits (up to `timeout`) until the messages sent on `topic` satisfy `ready`; returns them.
    public func wait(for topic: String, timeout: Duration = .seconds(30), _ what: String = "the expected messages",
                     until ready: @escaping @Sendable ([OutboundMessage]) -> Bool) async throws(WaitTimeout) -> [OutboundMessage] {
        let onTopic: @Sendable ([OutboundMessage]) -> [OutboundMessage] = { $0.filter { $0.topic == topic } }
        return onTopic(try await wait(timeout: timeout, "\(what) on \(topic)") { ready(onTopic($0)) })
    }

    /// Waits (up to `timeout`) until all the messages sent satisfy `ready`; returns them.
    public func wait(timeout: Duration = .seconds(30), _ what: String,
                     until ready: @escaping @Sendable ([OutboundMessage]) -> Bool) async throws(WaitTimeout) -> [OutboundMessage] {
        guard let all = await log.wait(timeout: timeout, until: ready) else {
            throw WaitTimeout("waited \(timeout) for \(what); have: \(sent.map { "\($0.topic) \($0.text)" })")
        }
        return all
    }
}

/// A wait of a test double that ended at its deadline (or was cancelled) before what it waited for.
public struct WaitTimeout: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
