import BinaryCoding
import BridgeConfig

/// A device's ownership claim, as retained on `<base>/bridge/owners/<device>`
/// (docs/scale-out.md): the node that owns it (nil: released), an epoch that only grows, and,
/// while the owner hands it over, the node it goes to.
public struct OwnershipClaim: Sendable, Equatable {
    public var node: String?
    public var epoch: Int
    public var handoverTo: String?

    public init(node: String?, epoch: Int, handoverTo: String? = nil) {
        self.node = node
        self.epoch = epoch
        self.handoverTo = handoverTo
    }

    /// The highest epoch a claim may carry: 2^53, the largest integer every JSON reader takes
    /// exactly. A claim above it (or below 0) is garbage, ignored; a node's next epoch stops at it
    /// (a claim per millisecond would take 285 000 years to get there).
    public static let maxEpoch = 1 << 53

    /// The epoch after this claim's, for the next claim of the device: never past ``maxEpoch``
    /// (no overflow, whatever a retained claim said).
    public var nextEpoch: Int { epoch < Self.maxEpoch ? epoch + 1 : Self.maxEpoch }

    public var json: JSONValue {
        var o: JSONObject = ["node": node.map { .string($0) } ?? .null, "epoch": .int(Int64(epoch))]
        if let handoverTo { o["handover_to"] = .string(handoverTo) }
        return .object(o)
    }

    /// Parses a retained claim; nil for anything else (an empty payload clears the topic), an
    /// epoch out of 0…``maxEpoch`` included.
    public init?(json: JSONValue) {
        guard let o = json.objectValue, case let .int(e)? = o["epoch"], e >= 0, e <= Self.maxEpoch else { return nil }
        switch o["node"] {
        case let .string(n)?: node = n
        case .null?, nil: node = nil
        default: return nil
        }
        epoch = Int(e)  // 0…2^53: exact
        handoverTo = o["handover_to"]?.stringValue
    }

    /// Whether a claim received after `current` replaces it. Every node applies the same rule to
    /// the same messages, so they agree on the owner whatever order two competing claims arrive
    /// in: a higher epoch wins; in one epoch the current owner's own update (a handover note)
    /// replaces its claim, and of two nodes claiming at once the lower node id wins.
    public func supersedes(_ current: OwnershipClaim?) -> Bool {
        guard let current else { return true }
        if epoch != current.epoch { return epoch > current.epoch }
        if node == current.node { return self != current }
        guard let mine = node else { return false }
        guard let theirs = current.node else { return true }
        return mine < theirs
    }
}

/// What one node knows of the others and of who owns which device, and what it should do
/// about it (docs/scale-out.md). A pure value: instants are passed in, decisions are returned
/// for the bridge's ``ClusterExtension`` to publish and carry out.
public struct ClusterView: Sendable {
    public struct Parameters: Sendable, Equatable {
        /// dB by which another node must see a device better than its owner.
        public var hysteresis: Int
        /// How long another node must see it that much better before the owner hands it over.
        public var handoverAfter: Duration
        /// A sighting older than this no longer counts; an owner without a link or a sighting this
        /// recent releases the device.
        public var lostAfter: Duration
        /// How long a claimant waits for a competing claim before it acts as the owner.
        public var claimSettle: Duration
        /// How often every node reports what it sees (`seen_interval`): the first claim of a
        /// device waits at most this long for the other online nodes' reports
        /// (``decide(_:address:at:)``); zero: it does not wait.
        public var seenInterval: Duration

        public init(hysteresis: Int, handoverAfter: Duration, lostAfter: Duration, claimSettle: Duration, seenInterval: Duration) {
            self.hysteresis = hysteresis
            self.handoverAfter = handoverAfter
            self.lostAfter = lostAfter
            self.claimSettle = claimSettle
            self.seenInterval = seenInterval
        }
    }

    /// One node's latest sighting of an address.
    public struct Sighting: Sendable, Equatable {
        /// The RSSI a report may give, in dBm: Bluetooth's -127 (none) to +20.
        public static let rssiRange = -127...20
        /// -127: a sighting without a measured RSSI (a link BlueZ reports none for, a device in
        /// reach through another adapter of the node's daemon).
        public static let noRSSI = -127
        /// How old a reported sighting may be, in milliseconds: 0 to the longest duration
        /// (``DurationLimits/maximum``); older ones never count anyway (`lost_after`).
        public static let ageRange: ClosedRange<Int64> = 0...(DurationLimits.maximumSeconds * 1000)

        public var rssi: Int
        public var at: BridgeInstant
        /// The node holds a link to it (its RSSI is the last one seen before connecting).
        public var connected: Bool

        public init(rssi: Int, at: BridgeInstant, connected: Bool) {
            self.rssi = rssi
            self.at = at
            self.connected = connected
        }
    }

    /// Where a device stands for this node.
    public enum Role: Sendable, Equatable {
        /// This node owns it (its claim settled): it runs the device and executes its commands.
        case owner
        /// This node owns it and is handing it over to `to`: it finishes what it holds, takes nothing new.
        case handingOver(to: String)
        /// This node claimed it and waits for the claim to settle.
        case claiming
        /// Another node owns it.
        case other(String)
        /// Nobody owns it, or its owner is handing it over: commands are held for the next owner.
        case unowned
    }

    /// A claim this node should publish.
    public enum Decision: Sendable, Equatable {
        /// Nobody owns it and this node sees it best.
        case claim(OwnershipClaim)
        /// Another node has seen it clearly better for long enough: start handing it over.
        case handOver(OwnershipClaim)
        /// The handover's target went offline: keep it.
        case keep(OwnershipClaim)
        /// This node has lost it (no link, no recent sighting).
        case release(OwnershipClaim)
    }

    public let me: String
    public let parameters: Parameters
    /// Nodes whose retained state says online (this node is always one).
    public private(set) var online: Set<String>
    /// Every node's sightings, by node and address.
    public private(set) var sightings: [String: [String: Sighting]] = [:]
    /// The claim in force per device id.
    public private(set) var claims: [String: OwnershipClaim] = [:]
    /// When this node's claim of a device took effect (for the settle time).
    private var claimedAt: [String: BridgeInstant] = [:]
    /// The other node that has seen a device better than this node (its owner), and since when.
    private var betterSince: [String: (node: String, since: BridgeInstant)] = [:]
    /// How many reports each node has made (as received).
    private var reportCount: [String: Int] = [:]
    /// Devices never claimed that this node sees best: since when it waits to claim one, and
    /// how many reports each node had made then (``decide(_:address:at:)``).
    private var firstClaimWait: [String: (since: BridgeInstant, reports: [String: Int])] = [:]

    public init(me: String, parameters: Parameters) {
        self.me = me
        self.parameters = parameters
        online = [me]
    }

    /// The lowest online node id: the one that answers for devices nobody owns.
    public var leader: String { online.min() ?? me }

    /// A node's retained state (`online` or not). This node is always online to itself.
    public mutating func node(_ node: String, online isOnline: Bool) {
        guard node != me else { return }
        if isOnline { online.insert(node) } else { online.remove(node) }
    }

    /// A node's report of what it sees (replaces its previous one).
    public mutating func report(from node: String, _ seen: [String: Sighting]) {
        sightings[node] = seen
        reportCount[node, default: 0] += 1
    }

    /// The devices of a node's report (`{"<address>":{"rssi","age_ms","connected"}}`) as
    /// sightings at `now`, or what is wrong with it: every number range-checked (``Sighting/rssiRange``,
    /// ``Sighting/ageRange``), so garbage is refused whole rather than taken in part.
    public static func sightings(_ devices: JSONObject, at now: BridgeInstant) -> Result<[String: Sighting], ReportError> {
        var seen: [String: Sighting] = [:]
        for (address, value) in devices {
            guard let o = value.objectValue else { return .failure(ReportError("\(address): expected {\"rssi\",\"age_ms\",\"connected\"}")) }
            guard let rssi = o["rssi"]?.int64Value, let r = Int(exactly: rssi), Sighting.rssiRange.contains(r) else {
                return .failure(ReportError("\(address).rssi: \(o["rssi"]?.jsonText ?? "missing") is not a whole number of dBm in \(Sighting.rssiRange.lowerBound)…\(Sighting.rssiRange.upperBound)"))
            }
            var age: Int64 = 0
            if let a = o["age_ms"] {
                guard let ms = a.int64Value, Sighting.ageRange.contains(ms) else {
                    return .failure(ReportError("\(address).age_ms: \(a.jsonText) is not a whole number of milliseconds in 0…\(Sighting.ageRange.upperBound)"))
                }
                age = ms
            }
            seen[address.uppercased()] = Sighting(rssi: r, at: now - .milliseconds(age), connected: o["connected"]?.boolValue ?? false)
        }
        return .success(seen)
    }

    /// What is wrong with a node's report.
    public struct ReportError: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// A claim arrived (or this node publishes one). Returns whether it is now the claim in
    /// force, and whether the owner changed.
    @discardableResult
    public mutating func receive(_ claim: OwnershipClaim, for device: String, at now: BridgeInstant) -> Bool {
        let current = claims[device]
        guard claim.supersedes(current) else { return false }
        claims[device] = claim
        if claim.node == me, current?.node != me || current?.epoch != claim.epoch {
            claimedAt[device] = now
        }
        if claim.node != me { claimedAt[device] = nil }
        if current?.node != claim.node || current?.epoch != claim.epoch { betterSince[device] = nil }
        firstClaimWait[device] = nil
        return true
    }

    /// The owner in force: the claim's node while that node is online.
    public func owner(of device: String) -> String? {
        guard let n = claims[device]?.node, online.contains(n) else { return nil }
        return n
    }

    public func role(of device: String, at now: BridgeInstant) -> Role {
        guard let owner = owner(of: device), let claim = claims[device] else { return .unowned }
        if owner == me {
            if let to = claim.handoverTo { return .handingOver(to: to) }
            if let at = claimedAt[device], now - at < parameters.claimSettle { return .claiming }
            return .owner
        }
        return claim.handoverTo == nil ? .other(owner) : .unowned
    }

    /// The sightings of `address` that count at `now`: online nodes, recent enough.
    func candidates(_ address: String, at now: BridgeInstant) -> [(node: String, rssi: Int)] {
        var out: [(node: String, rssi: Int)] = []
        for (node, seen) in sightings where online.contains(node) {
            guard let s = seen[address], now - s.at <= parameters.lostAfter else { continue }
            out.append((node, s.rssi))
        }
        // Strongest first; of equal ones the lower node id, as every node orders them.
        return out.sorted { ($0.rssi, $1.node) > ($1.rssi, $0.node) }
    }

    /// Whether this node, which sees `device` best and has never seen it claimed, has heard from
    /// every other online node (docs/scale-out.md, "Cold start"): a report of theirs that gives
    /// the device, or any report made since this node began to wait — so a node that started at
    /// the same time and sees the device better is not claimed over, then handed the device a
    /// moment later. Bounded: after ``Parameters/seenInterval`` of waiting (every node reports
    /// that often) it claims anyway.
    mutating func othersHaveReported(_ device: String, address: String, at now: BridgeInstant) -> Bool {
        guard parameters.seenInterval > .zero else { return true }
        let wait: (since: BridgeInstant, reports: [String: Int])
        if let w = firstClaimWait[device] {
            wait = w
        } else {
            wait = (now, reportCount)
            firstClaimWait[device] = wait
        }
        if now - wait.since >= parameters.seenInterval { return true }
        return online.allSatisfy { node in
            node == me || sightings[node]?[address] != nil || reportCount[node, default: 0] > wait.reports[node, default: 0]
        }
    }

    /// What this node should publish about `device` (at `address`) now, if anything.
    public mutating func decide(_ device: String, address: String, at now: BridgeInstant) -> Decision? {
        let claim = claims[device]
        let seen = candidates(address, at: now)
        guard let owner = owner(of: device), let claim else {
            // Nobody owns it: the node that sees it best claims it.
            guard seen.first?.node == me else {
                firstClaimWait[device] = nil
                return nil
            }
            if claim == nil, !othersHaveReported(device, address: address, at: now) { return nil }
            firstClaimWait[device] = nil
            return .claim(OwnershipClaim(node: me, epoch: claim?.nextEpoch ?? 1))
        }
        guard owner == me else { return nil }
        if let to = claim.handoverTo {
            return online.contains(to) ? nil : .keep(OwnershipClaim(node: me, epoch: claim.epoch))
        }
        guard let mine = seen.first(where: { $0.node == me }) else {
            // Neither a link nor a recent sighting: let another node have it.
            if let at = claimedAt[device], now - at < parameters.lostAfter { return nil }
            return .release(OwnershipClaim(node: nil, epoch: claim.nextEpoch))
        }
        // Only a measured RSSI can be clearly better (with `hysteresis: 0`, -127 against an
        // owner's -127 would hand the device to a node that has not heard it at all).
        guard let best = seen.first(where: { $0.node != me }), best.rssi > Sighting.noRSSI,
              best.rssi >= mine.rssi + parameters.hysteresis else {
            betterSince[device] = nil
            return nil
        }
        guard let since = betterSince[device], since.node == best.node else {
            betterSince[device] = (best.node, now)
            return nil
        }
        guard now - since.since >= parameters.handoverAfter else { return nil }
        return .handOver(OwnershipClaim(node: me, epoch: claim.epoch, handoverTo: best.node))
    }
}
