import Foundation
import Mosquitto
import Synchronization

/// The device both nodes bridge: the emulators' heart-rate sensor, with the control point 2A39 as `control`.
enum Sensor {
    static let device = "heart"
    static let address = "C0:FF:EE:00:00:01"
}

/// A message the hub saw and when, parsed as far as the benchmark needs.
struct Seen: Sendable {
    let at: ContinuousClock.Instant
    let topic: String
    let payload: String
    /// A claim's, a node state's, a seen report's or a response's node.
    var node: String?
    var epoch: Int?
    var handoverTo: String?
    /// A node state's `state`.
    var state: String?
    var status: String?
    var transaction: String?
    var code: String?
    /// A seen report's entry for the sensor.
    var rssi: Int?
    var connected: Bool?

    init(_ m: MQTTMessage, at: ContinuousClock.Instant) {
        self.at = at
        topic = m.topic
        payload = m.payloadString
        guard let o = try? JSONSerialization.jsonObject(with: Data(m.payload)) as? [String: Any] else { return }
        node = o["node"] as? String
        epoch = o["epoch"] as? Int
        handoverTo = o["handover_to"] as? String
        state = o["state"] as? String
        status = o["status"] as? String
        transaction = o["transaction"] as? String
        code = (o["error"] as? [String: Any])?["code"] as? String
        if let s = (o["devices"] as? [String: Any])?[Sensor.address] as? [String: Any] {
            rssi = s["rssi"] as? Int
            connected = s["connected"] as? Bool
        }
    }

    var isClaim: Bool { topic == "gatt2mqtt/bridge/owners/\(Sensor.device)" }
    var isState: Bool { topic.hasPrefix("gatt2mqtt/bridge/nodes/") && topic.hasSuffix("/state") }
    var isReport: Bool { topic.hasPrefix("gatt2mqtt/bridge/nodes/") && topic.hasSuffix("/seen") }
    var isResponse: Bool { topic == "gatt2mqtt/\(Sensor.device)/response" }
    var isFinal: Bool { isResponse && ["ok", "error", "expired"].contains(status ?? "") }
    /// A claim in force by `node` (not a handover note).
    func isClaim(by node: String) -> Bool { isClaim && self.node == node && handoverTo == nil }
}

/// Everything the hub saw, in order, and waits for what it has not seen yet.
final class Timeline: Sendable {
    private struct Waiter {
        let predicate: @Sendable (Seen) -> Bool
        let continuation: CheckedContinuation<Seen?, Never>
    }

    private struct State {
        var events: [Seen] = []
        var waiters: [UInt64: Waiter] = [:]
        var expired: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    var count: Int { state.withLock { $0.events.count } }
    var events: [Seen] { state.withLock { $0.events } }

    func append(_ e: Seen) {
        let ready = state.withLock { s -> [CheckedContinuation<Seen?, Never>] in
            s.events.append(e)
            let matched = s.waiters.filter { $0.value.predicate(e) }
            for id in matched.keys { s.waiters[id] = nil }
            return matched.values.map(\.continuation)
        }
        for c in ready { c.resume(returning: e) }
    }

    /// The first event from index `index` on that satisfies `predicate`, waiting for it at most
    /// `timeout`; nil when none came.
    func first(from index: Int, timeout: Duration, _ predicate: @escaping @Sendable (Seen) -> Bool) async -> Seen? {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        let deadline = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.expire(id)
        }
        defer { deadline.cancel() }
        return await withCheckedContinuation { c in
            let found = state.withLock { s -> Seen?? in
                if let e = s.events[min(index, s.events.count)...].first(where: predicate) { return .some(e) }
                if s.expired.remove(id) != nil { return .some(nil) }
                s.waiters[id] = Waiter(predicate: predicate, continuation: c)
                return .none
            }
            if let found { c.resume(returning: found) }
        }
    }

    private func expire(_ id: UInt64) {
        let waiter = state.withLock { s -> Waiter? in
            guard let w = s.waiters.removeValue(forKey: id) else {
                s.expired.insert(id)
                return nil
            }
            return w
        }
        waiter?.continuation.resume(returning: nil)
    }
}

/// The commands published, in order.
final class SentCommands: Sendable {
    struct Command: Sendable {
        let transaction: String
        /// The bytes written, in hex.
        let value: String
        let at: ContinuousClock.Instant
    }

    let list = Mutex<[Command]>([])

    func add(_ c: Command) { list.withLock { $0.append(c) } }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
