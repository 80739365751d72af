import BinaryCoding
import BridgeStore
import Foundation

/// A command waiting in a device session's queue (user command, raw write, or internal request).
struct PendingCommand: Sendable {
    enum Payload: Sendable {
        case command(JSONObject)
        case write(topic: String, payload: [UInt8])
        case `internal`(DeviceRequest)
    }
    /// What the command came in with, which stays as it is for its whole life.
    struct Origin: Sendable {
        var payload: Payload
        var transaction: JSONValue?
        var responseTopic: String?
        var correlationData: [UInt8]?
        var deadline: BridgeInstant?
        var received: BridgeInstant?
    }
    /// ``Origin`` held by reference: a command is copied a dozen times on its way (admission,
    /// the queue, the dispatch, the answer), and each copy of these fields inline cost a copy and
    /// a retain of each (its payload alone: ~50 retains per command). Read-only, but for the
    /// payload (a raw write read back from the outbox), whose setter replaces the box.
    private final class Box: Sendable {
        let origin: Origin
        let texts: Texts
        init(_ origin: Origin) {
            self.origin = origin
            texts = Texts(transaction: origin.transaction?.jsonText, command: PendingCommand.commandJSON(of: origin.payload)?.jsonText)
        }
    }
    private var box: Box

    /// The JSON texts of ``transaction`` and ``commandJSON``, made once: the outbox stores them and
    /// every response carries them (``CommandResponse/jsonBytes(texts:)``).
    struct Texts: Sendable {
        var transaction: String?
        var command: String?
    }
    var texts: Texts { box.texts }

    var payload: Payload {
        get { box.origin.payload }
        set {
            var o = box.origin
            o.payload = newValue
            box = Box(o)
        }
    }
    var transaction: JSONValue? { box.origin.transaction }
    var responseTopic: String? { box.origin.responseTopic }
    var correlationData: [UInt8]? { box.origin.correlationData }
    /// When it expires unsent (`expired`), on the bridge's clock; nil: never (internal requests).
    var deadline: BridgeInstant? { box.origin.deadline }
    /// When it came in over MQTT, on the bridge's clock (nil: resumed from the outbox, or
    /// internal), for its latency.
    var received: BridgeInstant? { box.origin.received }

    var outboxID: Int64?
    var attribute: String?
    /// `queued` was published (the command waited), so `sent` carries news too.
    var announced = false
    /// Whether it may go out while the driver is busy (learnt when it was validated; an internal
    /// request says so itself, a raw write never may).
    var bypassesBusyGate = false
    /// Its request, when it was encoded (by the driver itself, for the link it goes out on) at
    /// once because nothing was ahead of it: dispatch uses it instead of encoding again.
    var encoded: DeviceRequest?

    init(payload: Payload, outboxID: Int64? = nil, transaction: JSONValue? = nil, responseTopic: String? = nil,
         correlationData: [UInt8]? = nil, deadline: BridgeInstant?, attribute: String? = nil,
         received: BridgeInstant? = nil) {
        box = Box(Origin(payload: payload, transaction: transaction, responseTopic: responseTopic, correlationData: correlationData,
                         deadline: deadline, received: received))
        self.outboxID = outboxID
        self.attribute = attribute
        if case let .internal(r) = payload { bypassesBusyGate = r.bypassesBusyGate }
    }

    /// A command found in the outbox (at start, or when its session was replaced), its
    /// deadline moved from the wall clock to the bridge's clock (`now` and `wallNow` are the same
    /// moment on each). Nil when the stored command is not a JSON object (the entry is dropped).
    init?(outboxEntry entry: OutboxEntry, now: BridgeInstant, wallNow: Date) {
        guard let body = (try? JSONValue(parsing: entry.command))?.objectValue else { return nil }
        self.init(payload: .command(body), outboxID: entry.id, transaction: entry.transaction.flatMap { try? JSONValue(parsing: $0) },
                  responseTopic: entry.responseTopic, correlationData: entry.correlationData.map { Array($0) },
                  deadline: BridgeClock.instant(of: entry.deadline, now: now, wallNow: wallNow), attribute: entry.attribute)
        // A raw write is stored as `{"write": topic, "payload": text}` (``commandJSON``).
        if let w = body["write"]?.stringValue, let p = body["payload"]?.stringValue {
            payload = .write(topic: w, payload: Array(p.utf8))
        }
    }

    /// Its outbox entry for `device` with `status`, created at `wallNow` (its deadline moved from
    /// the bridge's clock, where it is `now`, to the wall clock; none: due at once).
    func outboxEntry(device: String, _ status: OutboxEntry.Status, now: BridgeInstant, wallNow: Date) -> OutboxEntry {
        let deadline = deadline.map { BridgeClock.date(of: $0, now: now, wallNow: wallNow) } ?? wallNow
        return OutboxEntry(deviceID: device, transaction: texts.transaction, command: texts.command ?? "{}",
                           attribute: attribute, status: status, createdAt: wallNow, deadline: deadline,
                           responseTopic: responseTopic, correlationData: correlationData.map { Data($0) })
    }

    var isInternal: Bool { if case .internal = payload { return true }; return false }
    /// What the response's `command` says and the outbox stores (a raw write as
    /// `{"write": topic, "payload": text}`; nil for an internal request).
    var commandJSON: JSONValue? { Self.commandJSON(of: payload) }

    private static func commandJSON(of payload: Payload) -> JSONValue? {
        switch payload {
        case let .command(o): return .object(o)
        case let .write(topic, payload): return ["write": .string(topic), "payload": .string(String(decoding: payload, as: UTF8.self))]
        case .internal: return nil
        }
    }
}
