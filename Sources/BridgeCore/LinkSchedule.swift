/// A device's link over time, without I/O: when it was last heard (availability), when the
/// keep-alive and each poll are due (none while the link is down). Driven by events and the
/// bridge's clock's instants; whether the link is up is ``LinkStateMachine``'s.
struct LinkSchedule: Sendable {
    /// The last good exchange with the device (link up, a write returned, a notification).
    private(set) var lastHeard: BridgeInstant
    private(set) var nextKeepAlive: BridgeInstant?
    /// When each of the driver's polls is due next (empty while the link is down).
    private(set) var nextPolls: [BridgeInstant] = []

    init(now: BridgeInstant) { lastHeard = now }

    /// The link came up at `now`: the keep-alive is due one interval later, every poll at once
    /// (a connect re-reads them).
    mutating func up(at now: BridgeInstant, keepAlive: Duration?, polls: Int) {
        lastHeard = now
        nextKeepAlive = keepAlive.map { now + $0 }
        nextPolls = Array(repeating: now, count: polls)
    }

    /// The link went down: nothing is due until it is up again.
    mutating func down() {
        nextKeepAlive = nil
        nextPolls = []
    }

    /// A good exchange with the device at `now`.
    mutating func heard(at now: BridgeInstant) { lastHeard = now }

    /// Whether the device has been silent for longer than `timeout` (asked while the link is up).
    func silent(at now: BridgeInstant, timeout: Duration) -> Bool { now - lastHeard > timeout }

    /// When ``silent(at:timeout:)`` turns true: the first instant past `timeout` after the
    /// last exchange.
    @inline(__always) func silence(timeout: Duration) -> BridgeInstant { lastHeard + timeout + .nanoseconds(1) }

    /// The earliest instant a poll or the keep-alive is due (nil: none while the link is down).
    var nextDue: BridgeInstant? { earliest(nextPolls.min(), nextKeepAlive) }

    /// Hands `body` the requests of the polls due at `now`, in order (each is due again one
    /// interval later).
    mutating func duePolls(at now: BridgeInstant, _ polls: [(interval: Duration, request: DeviceRequest)],
                           _ body: (DeviceRequest) -> Void) {
        for i in nextPolls.indices where i < polls.count && now >= nextPolls[i] {
            nextPolls[i] = now + polls[i].interval
            body(polls[i].request)
        }
    }

    /// Whether the keep-alive is due at `now` (then it is due again one `interval` later).
    mutating func keepAliveDue(at now: BridgeInstant, interval: Duration?) -> Bool {
        guard let interval, let next = nextKeepAlive, now >= next else { return false }
        nextKeepAlive = now + interval
        return true
    }
}

/// The earlier of two instants, either of which may be absent (no array: it runs after every
/// event of a session).
@inline(__always) func earliest(_ a: BridgeInstant?, _ b: BridgeInstant?) -> BridgeInstant? {
    guard let a else { return b }
    guard let b else { return a }
    return min(a, b)
}

/// The wait between attempts (a device's connects, the start-up check of Bluetooth): from `min`,
/// doubled after each failure up to `max`, back to `min` after a success; each wait is scaled by
/// a jitter in 0.5…1 (1: none). The MQTT client's reconnect has the same shape in its own layer
/// (`MQTTReconnectPolicy`, in the Mosquitto wrapper, which does not see the core).
public struct Backoff: Sendable {
    public let min: Duration
    public let max: Duration
    public private(set) var current: Duration

    public init(min: Duration, max: Duration) {
        self.min = min
        self.max = max
        current = min
    }

    public mutating func reset() { current = min }

    /// The wait before the next attempt, for `jitter` in 0.5…1; the one after it doubles.
    public mutating func next(jitter: Double) -> Duration {
        defer { current = Swift.min(current * 2, max) }
        return current * jitter
    }
}
