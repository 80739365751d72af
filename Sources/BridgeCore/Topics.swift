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
        var topic = topic
        return topic.withUTF8 { t -> Route? in
            guard let parts = Self.levels(t, after: base) else { return nil }
            func name(_ r: Range<Int>) -> String { String(decoding: UnsafeBufferPointer(rebasing: t[r]), as: UTF8.self) }
            func level(_ i: Int, is word: StaticString) -> Bool {
                t[parts[i]].elementsEqual(UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount))
            }
            if level(0, is: "bridge") {
                if parts.count >= 3, level(1, is: "request") { return .bridgeRequest(operation: name(parts[2].lowerBound..<t.count)) }
                return nil
            }
            switch parts.count {
            case 2 where level(1, is: "set"): return .set(device: name(parts[0]))
            case 2 where level(1, is: "get"): return .get(device: name(parts[0]))
            case 3 where level(1, is: "set"): return .setAttribute(device: name(parts[0]), attribute: name(parts[2]))
            case 3 where level(2, is: "write"): return .write(device: name(parts[0]), characteristic: name(parts[1]))
            default: return nil
            }
        }
    }

    /// Where the levels of `topic` after `prefix` and a `/` lie (MQTT's level separator is that
    /// byte, whatever follows it); nil when the topic does not start so, or a level is empty. On
    /// the UTF-8 bytes, without an array: every inbound message is routed, several times.
    static func levels(_ topic: UnsafeBufferPointer<UInt8>, after prefix: String) -> Levels? {
        let slash = UInt8(ascii: "/")
        var prefix = prefix
        let start = prefix.withUTF8 { p in topic.count > p.count + 1 && topic.starts(with: p) && topic[p.count] == slash ? p.count + 1 : nil }
        guard var from = start else { return nil }
        var levels = Levels()
        while true {
            let end = topic[from...].firstIndex(of: slash) ?? topic.count
            guard end > from else { return nil }  // an empty level
            levels.append(from..<end)
            if end == topic.count { return levels }
            from = end + 1
        }
    }

    /// The levels of a topic after a prefix (``levels(_:after:)``): how many there are, and where
    /// the first ``capacity`` lie — all routing looks at (the bridge API's operation is the rest
    /// of the topic from its third level).
    struct Levels {
        static let capacity = 4
        /// How many levels the topic has (more than ``capacity`` are counted, not kept).
        private(set) var count = 0
        private var first: (Range<Int>, Range<Int>, Range<Int>, Range<Int>) = (0..<0, 0..<0, 0..<0, 0..<0)

        mutating func append(_ level: Range<Int>) {
            switch count {
            case 0: first.0 = level
            case 1: first.1 = level
            case 2: first.2 = level
            case 3: first.3 = level
            default: break
            }
            count += 1
        }

        /// Level `i` (from 0); `i` must be below both `count` and ``capacity``.
        subscript(_ i: Int) -> Range<Int> {
            precondition(i >= 0 && i < min(count, Self.capacity), "level \(i) of \(count) (\(Self.capacity) kept)")
            switch i {
            case 0: return first.0
            case 1: return first.1
            case 2: return first.2
            default: return first.3
            }
        }
    }

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
        var topic = topic
        let parts = topic.withUTF8 { t -> [String]? in
            guard let levels = Self.levels(t, after: base + "/bridge"), levels.count <= 3 else { return nil }
            return (0..<levels.count).map { String(decoding: UnsafeBufferPointer(rebasing: t[levels[$0]]), as: UTF8.self) }
        }
        guard let parts else { return nil }
        switch (parts.count, parts.first) {
        case (3, "nodes") where parts[2] == "state": return .nodeState(parts[1])
        case (3, "nodes") where parts[2] == "seen": return .nodeSeen(parts[1])
        case (2, "owners"): return .owner(device: parts[1])
        default: return nil
        }
    }
}
