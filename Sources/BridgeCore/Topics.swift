/// The bridge's topic contract (`shared/spec/bridge.md`, "Topics"), for one base topic.
public struct Topics: Sendable, Equatable {
    public let base: String

    public init(base: String) { self.base = base }

    /// What an inbound topic asks for.
    public enum Route: Sendable, Equatable {
        /// `<base>/<device>/set` — a command object or an array of them.
        case set(device: String)
        /// `<base>/<device>/set/<attribute>` — a plain value shortcut.
        case setAttribute(device: String, attribute: String)
        /// `<base>/<device>/get` — refresh attributes from the device.
        case get(device: String)
        /// `<base>/<device>/<characteristic>/write` — a raw write through that mapping's codec.
        case write(device: String, characteristic: String)
        /// `<base>/bridge/request/<op>`; `op` may have levels (`device/add`, `config/reload`).
        case bridgeRequest(operation: String)
    }

    /// The filters the bridge subscribes to.
    public var subscriptions: [String] {
        ["\(base)/+/set", "\(base)/+/set/+", "\(base)/+/get", "\(base)/+/+/write", requestFilter]
    }

    /// The filter of the bridge API's requests.
    public var requestFilter: String { "\(base)/bridge/request/#" }

    /// Routes an inbound topic; nil for topics that are not ours to act on (including our own
    /// output topics, so the bridge ignores its own publishes).
    public func route(_ topic: String) -> Route? {
        guard let parts = Self.levels(of: topic, after: base) else { return nil }
        if parts[0].elementsEqual("bridge".utf8) {
            if parts.count >= 3, parts[1].elementsEqual("request".utf8) {
                return .bridgeRequest(operation: parts[2...].map(Self.name).joined(separator: "/"))
            }
            return nil
        }
        switch parts.count {
        case 2 where parts[1].elementsEqual("set".utf8): return .set(device: Self.name(parts[0]))
        case 2 where parts[1].elementsEqual("get".utf8): return .get(device: Self.name(parts[0]))
        case 3 where parts[1].elementsEqual("set".utf8): return .setAttribute(device: Self.name(parts[0]), attribute: Self.name(parts[2]))
        case 3 where parts[2].elementsEqual("write".utf8): return .write(device: Self.name(parts[0]), characteristic: Self.name(parts[1]))
        default: return nil
        }
    }

    /// The levels of `topic` after `prefix` and a `/` (MQTT's level separator is that byte,
    /// whatever follows it); nil when the topic does not start so, or a level is empty. On the
    /// UTF-8 bytes: every inbound message is routed, several times.
    static func levels(of topic: String, after prefix: String) -> [Substring.UTF8View]? {
        let slash = UInt8(ascii: "/")
        let u = topic.utf8
        guard u.count > prefix.utf8.count + 1, u.starts(with: prefix.utf8) else { return nil }
        let rest = u.dropFirst(prefix.utf8.count)
        guard rest.first == slash else { return nil }
        let parts = rest.dropFirst().split(separator: slash, omittingEmptySubsequences: false)
        return parts.contains(where: \.isEmpty) ? nil : parts
    }

    static func name(_ level: Substring.UTF8View) -> String { String(Substring(level)) }

    public func state(_ device: String) -> String { "\(base)/\(device)" }
    public func availability(_ device: String) -> String { "\(base)/\(device)/availability" }
    public func response(_ device: String) -> String { "\(base)/\(device)/response" }
    public func event(_ device: String) -> String { "\(base)/\(device)/event" }
    public func characteristic(_ device: String, _ name: String) -> String { "\(base)/\(device)/\(name)" }
    public var bridgeState: String { "\(base)/bridge/state" }
    public var bridgeInfo: String { "\(base)/bridge/info" }
    public var bridgeDevices: String { "\(base)/bridge/devices" }
    public var bridgeEvent: String { "\(base)/bridge/event" }
    public var bridgeHealth: String { "\(base)/bridge/health" }
    /// Devices seen by `bridge/request/scan`.
    public var bridgeScan: String { "\(base)/bridge/scan" }
    public func bridgeResponse(_ operation: String) -> String { "\(base)/bridge/response/\(operation)" }

    // Several bridges on one broker (docs/scale-out.md).

    /// A node's liveness, retained; its MQTT Will sets it offline.
    public func nodeState(_ node: String) -> String { "\(base)/bridge/nodes/\(node)/state" }
    /// What a node sees (address, RSSI, age), retained.
    public func nodeSeen(_ node: String) -> String { "\(base)/bridge/nodes/\(node)/seen" }
    /// A device's ownership claim, retained.
    public func owner(_ device: String) -> String { "\(base)/bridge/owners/\(device)" }
    /// The filters of a node in a cluster, besides ``subscriptions``.
    public var clusterSubscriptions: [String] {
        ["\(base)/bridge/nodes/+/state", "\(base)/bridge/nodes/+/seen", "\(base)/bridge/owners/+"]
    }

    /// What a cluster topic is about.
    public enum ClusterRoute: Sendable, Equatable {
        case nodeState(String)
        case nodeSeen(String)
        case owner(device: String)
    }

    public func clusterRoute(_ topic: String) -> ClusterRoute? {
        guard let levels = Self.levels(of: topic, after: base + "/bridge") else { return nil }
        let parts = levels.map(Self.name)
        switch (parts.count, parts.first) {
        case (3, "nodes") where parts[2] == "state": return .nodeState(parts[1])
        case (3, "nodes") where parts[2] == "seen": return .nodeSeen(parts[1])
        case (2, "owners"): return .owner(device: parts[1])
        default: return nil
        }
    }
}
