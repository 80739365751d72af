import BinaryCoding
import BridgeConfig

// What the bridge takes from the broker at all, before any message is parsed or routed
// (issue 20): `limits.max_payload`, retained `bridge/request/…` (answered, cleared, never run),
// and `mqtt.api` (who may use `bridge/request/…`). docs/bridge-api.md, docs/configuration.md.

/// The bridge's own clears of retained requests, so their echo (an empty payload on the same
/// topic, delivered back when the subscription does not exclude the bridge's own messages) is
/// not taken for an empty request (which means `{}`).
struct OwnClears: Sendable {
    /// How long an echo is waited for.
    static let window: Duration = .seconds(10)
    /// At most this many clears are remembered (a flood of retained requests on made-up actions).
    static let capacity = 1024

    private var until: [String: BridgeInstant] = [:]

    mutating func cleared(_ topic: String, at now: BridgeInstant) {
        if until.count >= Self.capacity { until = until.filter { $0.value > now } }
        if until.count >= Self.capacity { return }
        until[topic] = now + Self.window
    }

    /// Whether an empty payload on `topic` now is the echo of the bridge's own clear (then
    /// forgotten: the next one is a request).
    mutating func isEcho(_ topic: String, at now: BridgeInstant) -> Bool {
        guard let end = until.removeValue(forKey: topic) else { return false }
        return now <= end
    }
}

extension Bridge {
    /// The actions `mqtt.api: read_only` allows: they only read.
    static let readOnlyActions: Set<String> = ["info", "devices", "health_check"]

    /// Whether `message` goes on to be routed; false when it was dealt with here: refused as too
    /// large, a retained request (answered `retained_request` and cleared), or a clear. `route`:
    /// its topic's (``Topics/route(_:)``).
    func admit(_ m: InboundMessage, _ route: Topics.Route?) -> Bool {
        if case let .bridgeRequest(action)? = route {
            // An empty payload that is a clear (a retained one, or the echo of the bridge's own)
            // is no request.
            if m.payload.isEmpty, m.retain || ownClears.withLock({ $0.isEcho(m.topic, at: clock.now()) }) { return false }
            if m.retain {
                refuseRetained(action, m)
                return false
            }
        }
        guard m.payload.count > limits.maxPayload else { return true }
        let text = "the payload is \(m.payload.count) bytes, above limits.max_payload (\(limits.maxPayload) bytes); not parsed"
        logger.warning("dropping an MQTT message above limits.max_payload",
                       metadata: ["topic": "\(m.topic)", "bytes": "\(m.payload.count)", "limit": "\(limits.maxPayload)"])
        switch route {
        case let .bridgeRequest(action)?:
            Reply(bridge: self, action: action, message: m).error(text, code: .payloadTooLarge)
        case let .set(device)?, let .setAttribute(device, _)?, let .get(device)?, let .write(device, _)?:
            // A retained command is never answered (it is ignored at every start).
            if !m.retain {
                reject(device: session(device) == nil ? nil : device, m, transaction: nil, error: CommandError(.payloadTooLarge, text))
            }
        case nil:
            break  // cluster topics, Home Assistant's status, anything else: dropped
        }
        return false
    }

    /// A retained `bridge/request/<action>`: answered `retained_request`, not run, and cleared
    /// (an empty retained message on its topic) so the broker stops handing it out.
    func refuseRetained(_ action: String, _ m: InboundMessage) {
        logger.warning("a retained bridge request is never run: clearing it", metadata: ["topic": "\(m.topic)"])
        var reply = Reply(bridge: self, action: action, message: m)
        if m.payload.count <= limits.maxPayload, let o = (try? JSONValue(parsing: m.payload))?.objectValue {
            reply.transaction = o["transaction"]
        }
        // The clear first: the answer goes out after it on the same connection, so whoever sees
        // the answer finds the request gone from the broker.
        ownClears.withLock { $0.cleared(m.topic, at: clock.now()) }
        mqtt.send(OutboundMessage(topic: m.topic, payload: [], qos: 1, retain: true))
        reply.error("retained requests are not run (one would run again at every start); publish it without the retain flag",
                    code: .retainedRequest)
    }

    /// Why `mqtt.api` refuses `action`, or nil when it allows it.
    func forbidden(_ action: String) -> String? {
        switch api {
        case .full: return nil
        case .readOnly:
            if Self.readOnlyActions.contains(action) { return nil }
            return "'\(action)' is not allowed: mqtt.api is read_only (allowed: \(Self.readOnlyActions.sorted().joined(separator: ", ")))"
        case .off:
            return "'\(action)' is not allowed: mqtt.api is off"
        }
    }

    /// Whether `message` on `route` was handled before (``Redeliveries``). Only messages the
    /// bridge acts on are remembered: a known device's and bridge requests.
    func isRedelivery(_ message: InboundMessage, _ route: Topics.Route) -> Bool {
        switch route {
        case let .set(device), let .setAttribute(device, _), let .get(device), let .write(device, _):
            guard session(device) != nil else { return false }
        case .bridgeRequest:
            break
        }
        return redeliveries.withLock { $0.isRedelivery(message, at: clock.now()) }
    }
}
