import BinaryCoding
/// The QoS 1 messages handled lately, to recognise one the broker delivers again.
///
/// QoS 1 is at least once: when the connection drops after the bridge took a command but before
/// its PUBACK reached the broker (the process frozen, the network gone), the broker delivers the
/// command again after the reconnect, with the same packet identifier (MQTT 5 §4.4). Executing
/// it twice would break the bridge's at-most-once promise. A message is a redelivery when one
/// with the same packet identifier, topic and payload was handled within ``window``; the broker
/// numbers a client's messages in turn (65 535 before a number comes back), so a new message
/// matching all three within that time is not a thing that happens. A value, no I/O.
///
/// Only a digest of each message is kept (its packet identifier, length and a 64-bit FNV-1a hash
/// of topic and payload: ``entryBytes`` each), never the payload, and at most as many as fit in
/// the byte budget (`limits.redelivery_cache`), so a flood of large messages costs no memory
/// here. Two different messages with the same identifier, length and hash within the window
/// (a chance of 2⁻⁶⁴) would make the second one taken for a redelivery.
public struct Redeliveries: Sendable {
    struct Key: Hashable {
        var packetID: Int
        var length: Int
        var digest: UInt64
    }

    /// How long a handled message is remembered.
    public static let window: Duration = .seconds(300)
    /// What one remembered message costs, counted generously (its key and instant in the table
    /// and in the order, with the table's spare room).
    public static let entryBytes = 128
    /// The default byte budget (`limits.redelivery_cache`).
    public static let defaultBudget = 1024 * 1024

    /// At most this many are remembered (the oldest go first).
    public let capacity: Int
    private var seen: [Key: BridgeInstant] = [:]
    private var order: [(Key, BridgeInstant)] = []
    private var head = 0

    /// - Parameter budget: the bytes the remembered messages may take (0: none is remembered,
    ///   no message is ever taken for a redelivery).
    public init(budget: Int = Redeliveries.defaultBudget) {
        capacity = max(0, budget / Self.entryBytes)
    }

    /// How many messages are remembered now.
    public var count: Int { order.count - head }

    /// Records `message` as handled at `now`; true when it is a redelivery of one handled before
    /// (then it must not be acted on again). Messages without a packet identifier are never one.
    public mutating func isRedelivery(_ message: InboundMessage, at now: BridgeInstant) -> Bool {
        guard let id = message.packetID, capacity > 0 else { return false }
        forget(before: now - Self.window)
        let key = Key(packetID: id, length: message.payload.count, digest: Self.digest(message.topic, message.payload))
        if seen[key] != nil { return true }
        seen[key] = now
        order.append((key, now))
        if order.count - head > capacity { drop() }
        return false
    }

    /// 64-bit FNV-1a over the topic's bytes, a 0 byte (never in a topic) and the payload.
    static func digest(_ topic: String, _ payload: [UInt8]) -> UInt64 {
        var h = FNV1a()
        h.add(topic.utf8)
        h.add(0)
        h.add(payload)
        return h.value
    }

    private mutating func forget(before limit: BridgeInstant) {
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
