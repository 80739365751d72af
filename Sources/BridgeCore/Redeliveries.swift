/// The QoS 1 messages handled lately, to recognise one the broker delivers again.
///
/// QoS 1 is at least once: when the connection drops after the bridge took a command but before
/// its PUBACK reached the broker (the process frozen, the network gone), the broker delivers the
/// command again after the reconnect, with the same packet identifier (MQTT 5 §4.4). Executing
/// it twice would break the bridge's at-most-once promise. A message is a redelivery when one
/// with the same packet identifier, topic and payload was handled within ``window``; the broker
/// numbers a client's messages in turn (65 535 before a number comes back), so a new message
/// matching all three within that time is not a thing that happens. A value, no I/O.
public struct Redeliveries: Sendable {
    struct Key: Hashable {
        var packetID: Int
        var topic: String
        var payload: [UInt8]
    }

    /// How long a handled message is remembered.
    public static let window: Duration = .seconds(300)
    /// At most this many are remembered (the oldest go first).
    public static let capacity = 4096

    private var seen: [Key: ContinuousClock.Instant] = [:]
    private var order: [(Key, ContinuousClock.Instant)] = []
    private var head = 0

    public init() {}

    /// Records `message` as handled at `now`; true when it is a redelivery of one handled before
    /// (then it must not be acted on again). Messages without a packet identifier are never one.
    public mutating func isRedelivery(_ message: InboundMessage, at now: ContinuousClock.Instant) -> Bool {
        guard let id = message.packetID else { return false }
        forget(before: now - Self.window)
        let key = Key(packetID: id, topic: message.topic, payload: message.payload)
        if seen[key] != nil { return true }
        seen[key] = now
        order.append((key, now))
        if order.count - head > Self.capacity { drop() }
        return false
    }

    private mutating func forget(before limit: ContinuousClock.Instant) {
        while head < order.count, order[head].1 < limit { drop() }
    }

    private mutating func drop() {
        let (key, at) = order[head]
        if seen[key] == at { seen[key] = nil }
        head += 1
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
