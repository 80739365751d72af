import BinaryCoding
import BridgeCore
import Foundation
import Synchronization

/// What the web frontend (docs/frontend.md) sees of the bridge: every message the bridge
/// publishes on MQTT (handed over by ``FrontendTee``), with the last retained one per topic kept
/// so that a page that opens (or reconnects) gets a snapshot; and the way back in: browser
/// requests and commands become `InboundMessage`s for `Bridge.handle(_:)`, the same path as
/// those that arrive over MQTT. Made only when `frontend` is configured.
public final class FrontendHub: Sendable {
    /// One published message, numbered in publish order.
    public struct Item: Sendable, Equatable {
        public var seq: UInt64
        public var topic: String
        public var payload: [UInt8]
        public var retain: Bool
    }

    /// What an event stream gets: a message, or a heartbeat (an SSE comment).
    public enum Event: Sendable, Equatable {
        case item(Item)
        case ping
    }

    /// A new stream: what it must hear first, then the live messages.
    public struct Subscription: Sendable {
        public var id: Int
        /// True when the page must drop what it knows (first connect, another process since its
        /// last event, or too much missed): the snapshot is then complete.
        public var reset: Bool
        public var snapshot: [Item]
        public var events: AsyncStream<Event>
    }

    /// Topics of replies meant for one HTTP request: never forwarded to the broker. `$` topics
    /// are not ours to publish on MQTT, so no bridge topic can clash.
    static let replyPrefix = "$gatt2mqtt-frontend/"
    /// How many non-retained messages are kept for pages that reconnect (and the first snapshot).
    static let recentLimit = 400
    /// How many log lines are kept.
    static let logLimit = 200
    /// A stream that falls this far behind is closed (the page reconnects and gets a snapshot).
    static let streamBuffer = 2000

    /// This process' id in event ids (`<boot>-<seq>`): a page that reconnects to another
    /// process (after a restart) is told to reset.
    public let boot: String
    public let topics: Topics

    struct State {
        var seq: UInt64 = 0
        /// The last message per retained topic (an empty payload: cleared), by topic.
        var retained: [String: Item] = [:]
        /// The newest non-retained messages, oldest first.
        var recent: [Item] = []
        /// The newest `bridge/health` (published every minute; a page shows it at once).
        var health: Item?
        /// The newest log lines (``log(level:message:)``), oldest first: a ring of their own, so
        /// chatty debug logging does not push the events out.
        var logs: [Item] = []
        var subscribers: [Int: AsyncStream<Event>.Continuation] = [:]
        var nextID = 0
        var waiters: [String: CheckedContinuation<OutboundMessage?, Never>] = [:]
        var inject: (@Sendable (InboundMessage) -> Void)?
        var controls: (@Sendable (String) -> JSONValue?)?
    }

    let state = Mutex(State())

    public init(baseTopic: String) {
        topics = Topics(base: baseTopic)
        var bytes = [UInt8](repeating: 0, count: 4)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        boot = Hex.encode(bytes).lowercased()
    }

    // MARK: The bridge's side

    /// The bridge that requests go to (``BridgeService`` sets it when the bridge runs, and nil
    /// when it stops).
    /// `controls`: a device's command forms (`Bridge.controls(for:)`).
    public func attach(_ inject: (@Sendable (InboundMessage) -> Void)?, controls: (@Sendable (String) -> JSONValue?)? = nil) {
        state.withLock {
            $0.inject = inject
            $0.controls = controls
        }
    }

    /// The controls of a device (nil: no such device, or the bridge is not running).
    public func controls(for device: String) -> JSONValue? {
        state.withLock { $0.controls }?(device)
    }

    /// One message the bridge publishes. A reply to an HTTP request is handed to that request
    /// and not published (returns true); anything else is kept and streamed to every page.
    @discardableResult
    public func observe(_ m: OutboundMessage) -> Bool {
        if m.topic.hasPrefix(Self.replyPrefix) {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: m.topic) }
            waiter?.resume(returning: m)
            return true
        }
        // The pages show the bridge's own topics (not, e.g., the Home Assistant discovery).
        guard m.topic.hasPrefix(topics.base + "/") else { return false }
        state.withLock { s in
            s.seq += 1
            let item = Item(seq: s.seq, topic: m.topic, payload: m.payload, retain: m.retain)
            if m.retain {
                s.retained[m.topic] = item
            } else if m.topic == topics.bridgeHealth {
                s.health = item
            } else {
                s.recent.append(item)
                if s.recent.count > Self.recentLimit { s.recent.removeFirst(s.recent.count - Self.recentLimit) }
            }
            Self.broadcast(item, &s)
        }
        return false
    }

    /// The log tail's topic: `<base>/bridge/logging`, `{"level","message"}`. Shown by the pages
    /// only: the bridge does not publish its log on MQTT.
    public var loggingTopic: String { "\(topics.base)/bridge/logging" }

    /// One log line, for the pages' log tail.
    public func log(level: String, message: String) {
        let payload: JSONValue = ["level": .string(level), "message": .string(message)]
        state.withLock { s in
            s.seq += 1
            let item = Item(seq: s.seq, topic: loggingTopic, payload: Array(payload.jsonText.utf8), retain: false)
            s.logs.append(item)
            if s.logs.count > Self.logLimit { s.logs.removeFirst(s.logs.count - Self.logLimit) }
            Self.broadcast(item, &s)
        }
    }

    /// Hands `item` to every stream; one that is full is closed (its page reconnects).
    private static func broadcast(_ item: Item, _ s: inout State) {
        var overflowed: [Int] = []
        for (id, c) in s.subscribers {
            if case .dropped = c.yield(.item(item)) { overflowed.append(id) }
        }
        for id in overflowed { s.subscribers.removeValue(forKey: id)?.finish() }
    }

    // MARK: The pages' side

    /// Opens a stream. `lastEventID` is the SSE `Last-Event-ID` of a page that reconnects: when
    /// it is this process' and nothing it needs was dropped since, only what came after it is
    /// replayed; otherwise the page resets and gets the full snapshot (every retained topic with
    /// a value, the last health, the recent messages), in publish order.
    public func subscribe(lastEventID: String?) -> Subscription {
        let (events, sink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingOldest(Self.streamBuffer))
        return state.withLock { s in
            let id = s.nextID
            s.nextID += 1
            s.subscribers[id] = sink
            var after: UInt64?
            if let lastEventID, let dash = lastEventID.lastIndex(of: "-"), lastEventID[..<dash] == boot,
               let seq = UInt64(lastEventID[lastEventID.index(after: dash)...]), seq <= s.seq {
                // The recent list must reach back to it, or a message in between may be lost.
                if seq >= (s.recent.first.map { $0.seq - 1 } ?? 0) || s.recent.count < Self.recentLimit { after = seq }
            }
            var items = Array(s.retained.values) + s.recent + s.logs + (s.health.map { [$0] } ?? [])
            if let after {
                items = items.filter { $0.seq > after }
            } else {
                items = items.filter { !$0.payload.isEmpty }  // a cleared topic is news only to who saw its value
            }
            items.sort { $0.seq < $1.seq }
            return Subscription(id: id, reset: after == nil, snapshot: items, events: events)
        }
    }

    public func unsubscribe(_ id: Int) {
        let sink = state.withLock { $0.subscribers.removeValue(forKey: id) }
        sink?.finish()
    }

    /// A heartbeat on one stream.
    public func ping(_ id: Int) {
        _ = state.withLock { $0.subscribers[id]?.yield(.ping) }
    }

    /// Streams open now.
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Every retained topic's value, the last health and the recent messages, in publish order
    /// (`GET /api/state`).
    public func snapshot() -> [Item] { subscribeOnce() }

    private func subscribeOnce() -> [Item] {
        state.withLock { s in
            (Array(s.retained.values.filter { !$0.payload.isEmpty }) + s.recent + s.logs + (s.health.map { [$0] } ?? [])).sorted { $0.seq < $1.seq }
        }
    }

    /// Why a message could not be handed to the bridge.
    public enum InjectError: Error, Equatable {
        /// The bridge is not running (yet, or any more).
        case notRunning
    }

    /// Hands a message to the bridge as if it had arrived over MQTT.
    public func inject(_ m: InboundMessage) throws(InjectError) {
        guard let inject = state.withLock({ $0.inject }) else { throw .notRunning }
        inject(m)
    }

    /// `<base>/bridge/request/<action>` with `payload`, its answer sent to a private response
    /// topic and returned here (nil: none within `timeout`).
    public func request(_ action: String, payload: [UInt8], timeout: Duration) async throws(InjectError) -> OutboundMessage? {
        guard let inject = state.withLock({ $0.inject }) else { throw .notRunning }
        let topic = Self.replyPrefix + UUID().uuidString.lowercased()
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.state.withLock { $0.waiters.removeValue(forKey: topic) }?.resume(returning: nil)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { c in
            state.withLock { $0.waiters[topic] = c }
            inject(InboundMessage(topic: "\(topics.base)/bridge/request/\(action)", payload: payload, responseTopic: topic))
        }
    }
}

/// The bridge's `MQTTPort` when the frontend is on: every message goes to the broker as before
/// (through `inner`) and to the ``FrontendHub``; replies to the frontend's own requests go to the
/// hub only.
final class FrontendTee: MQTTPort {
    let inner: any MQTTPort
    let hub: FrontendHub

    init(inner: any MQTTPort, hub: FrontendHub) {
        self.inner = inner
        self.hub = hub
    }

    func send(_ message: OutboundMessage) {
        if hub.observe(message) { return }
        inner.send(message)
    }
}
