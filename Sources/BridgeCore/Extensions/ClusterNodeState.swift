import BridgeConfig

/// Everything this node of several bridges on one broker knows and has decided
/// (docs/scale-out.md), as one value: the pure ``ClusterView`` (claims, reports, who is online),
/// its own sightings, the commands it holds, the sessions it runs as owner, the handovers under
/// way, the links it found left behind, and whether its view may be stale. ``ClusterExtension``
/// keeps it behind one lock; each mutation returns what the extension is to do.
struct ClusterNodeState: Sendable {
    /// A command for a device, and what to do with it (``route(device:at:)``).
    enum CommandRoute: Sendable, Equatable {
        /// This node owns the device: the session takes it.
        case submit
        /// Ordered after this node's own Will: the other nodes took it.
        case afterWill
        /// Another node owns the device and executes it.
        case other(String)
        /// Held until a node claims the device (``held``) or the view is fresh again (``heldAsOwner``).
        case hold(asOwner: Bool)
        /// As `hold`, but the device's hold is full: the command is refused.
        case full(asOwner: Bool)
    }

    /// What ``update(_:at:)`` decided for one device.
    enum OwnershipAction: Sendable {
        /// Held commands of a device this node runs already: delivered now.
        case deliver(id: String, [PendingCommand])
        /// This node now owns the device: its session starts owning it, then gets these.
        case activate(id: String, [PendingCommand])
        /// The device is being handed over to `to`: its commands drain first.
        case handOver(id: String, to: String)
        /// Another node took the device: `dropped` are removed, `refused` answered, the session
        /// stops owning it when `deactivate`. `winnerHolds`: this node lost a claim made at the
        /// same epoch as the winner's (both claimed at once and this one settled before the
        /// other's claim came): the winner, claiming meanwhile, held every command, so the
        /// session's waiting commands are dropped, not answered (the winner answers them).
        case lost(id: String, to: String, dropped: [PendingCommand], refused: [PendingCommand], deactivate: Bool, winnerHolds: Bool)
        /// Nobody owns the device now: its session stops owning it.
        case released(id: String)
    }

    /// A device as ``update(_:at:)`` sees it: its id and the session that runs it.
    struct Running: Sendable {
        var id: String
        var session: ObjectIdentifier
    }

    let settings: ClusterSettings
    private(set) var view: ClusterView
    /// This node's own sightings by address (the continuous scan).
    var local: [String: (rssi: Int, at: BridgeInstant)] = [:]
    /// Commands held while a device has no owner, by device id.
    private(set) var held: [String: [PendingCommand]] = [:]
    /// Commands that came while this node owned the device by its view but that view may be
    /// stale (suspended): no other node holds them, so this one answers them if it turns out
    /// another node owns the device now.
    private(set) var heldAsOwner: [String: [PendingCommand]] = [:]
    /// This node read its own Will and not yet its own `online` again: the others took the
    /// commands meanwhile (the new owner, or held for it), so this node leaves them alone.
    var willSeen = false
    /// Devices whose session this node runs as their owner, with that session (a device
    /// reconfigured gets a new session, which starts not owning it).
    var active: [String: ObjectIdentifier] = [:]
    /// The epoch of the claim under which each ``active`` device was activated.
    var activeEpoch: [String: Int] = [:]
    /// Devices being handed over (their commands draining).
    var draining: Set<String> = []
    /// When the bridge started: decisions wait until the retained claims and reports are in.
    var started: BridgeInstant?
    /// When this node last published what it sees, and the addresses that report gave.
    var lastReport: BridgeInstant?
    var reported: Set<String> = []
    /// Links this node's adapter holds to devices it does not own and no session of its uses
    /// (by device id, since when), those being closed, and when it last looked for them.
    var unusedLinks: [String: BridgeInstant] = [:]
    var closingLinks: Set<String> = []
    var lastUnusedLinkCheck: BridgeInstant?
    /// Devices whose handover note (this node's claim with `handover_to`) came back from the
    /// broker: commands ordered before it are still this node's to execute, those after it are
    /// held for the next owner (docs/scale-out.md, "Hand over").
    var noteEchoed: Set<String> = []
    /// This node's view may be stale: the broker connection is down, or it came back (or the
    /// node was frozen) less than `claim_settle` ago. Meanwhile the node executes no new command
    /// (they are held), decides nothing and republishes nothing; when it ends, what it still
    /// owns is republished and held commands are delivered or dropped by the fresh view.
    var disconnected = false
    var suspendedUntil: BridgeInstant?
    var republishDue = false
    /// The last tick, to notice that the node was frozen (SIGSTOP, a stalled host).
    var lastTick: BridgeInstant?

    /// A loop that did not turn for this long was frozen (its ticks are 50 ms apart).
    static let stallLimit: Duration = .seconds(1)

    init(node: String, settings: ClusterSettings) {
        self.settings = settings
        view = ClusterView(me: node, parameters: .init(hysteresis: settings.hysteresis, handoverAfter: settings.handoverAfter,
                                                       lostAfter: settings.lostAfter, claimSettle: settings.claimSettle,
                                                       seenInterval: settings.seenInterval))
    }

    /// Changes the view (a node's state or report, a claim received or made).
    mutating func withView<T>(_ body: (inout ClusterView) -> T) -> T { body(&view) }

    /// Whether this node publishes its report now, seeing `addresses`: every `seen_interval`, and
    /// at once when it sees a device its last report did not give — the other nodes wait for that
    /// before they first claim it (docs/scale-out.md, "Cold start"). Records the report when due.
    mutating func reportDue(_ addresses: Set<String>, at now: BridgeInstant) -> Bool {
        let periodic = lastReport.map { now - $0 >= settings.seenInterval } ?? true
        guard periodic || !addresses.isSubset(of: reported) else { return false }
        lastReport = now
        reported = addresses
        return true
    }

    /// Whether the node's view may be stale now (``disconnected``, or resynchronising).
    func suspended(at now: BridgeInstant) -> Bool {
        disconnected || suspendedUntil.map { now < $0 } ?? false
    }

    /// Suspends the node for `claim_settle` from now: the retained claims and reports come in again.
    mutating func resync(at now: BridgeInstant) {
        suspendedUntil = now + settings.claimSettle
        republishDue = true
    }

    /// A loop that did not turn for a while (frozen: SIGSTOP, a stalled host) may have missed its
    /// own Will and another node's claim: the node resynchronises. Returns how long it was
    /// frozen when that is news (it was not suspended already), for the log.
    mutating func noticeStall(at now: BridgeInstant) -> Duration? {
        guard let last = lastTick, now - last > Self.stallLimit else { return nil }
        lastTick = now
        let news = !suspended(at: now)
        resync(at: now)
        return news ? now - last : nil
    }

    /// Where a command for `device` goes now (the stall already noticed). Held commands are
    /// bounded: `full` when the device's hold is (the command is refused).
    mutating func route(_ command: PendingCommand, device: String, at now: BridgeInstant) -> CommandRoute {
        var role = view.role(of: device, at: now)
        if willSeen { return .afterWill }
        if suspended(at: now), case .owner = role {
            // Ours by a view that may be stale: nobody else holds it; decided after the resync.
            guard heldAsOwner[device, default: []].count < BridgeDefaults.heldCommands else { return .full(asOwner: true) }
            heldAsOwner[device, default: []].append(command)
            return .hold(asOwner: true)
        }
        // Handing over: what the broker ordered before the note is still this node's to execute.
        if case .handingOver = role, !noteEchoed.contains(device) { role = .owner }
        switch role {
        case .owner: return .submit
        case let .other(node): return .other(node)
        case .claiming, .unowned, .handingOver:
            guard held[device, default: []].count < BridgeDefaults.heldCommands else { return .full(asOwner: false) }
            held[device, default: []].append(command)
            return .hold(asOwner: false)
        }
    }

    /// Whether this node answers a command for `device` that no session takes: the device's
    /// owner, or the leader when none.
    func answers(for device: String?) -> Bool {
        if let device, let owner = view.owner(of: device) { return owner == view.me }
        return view.leader == view.me
    }

    /// Takes the held commands whose deadline passed: those held for no owner (answered by the
    /// leader only) and those held as owner (answered by this node).
    mutating func takeDue(at now: BridgeInstant) -> (unowned: [(String, PendingCommand)], own: [(String, PendingCommand)]) {
        (Self.takeDue(&held, at: now), Self.takeDue(&heldAsOwner, at: now))
    }

    private static func takeDue(_ held: inout [String: [PendingCommand]], at now: BridgeInstant) -> [(String, PendingCommand)] {
        var out: [(String, PendingCommand)] = []
        for (device, commands) in held {
            let due = { (c: PendingCommand) in c.deadline.map { $0 <= now } ?? false }
            out += commands.filter(due).map { (device, $0) }
            let kept = commands.filter { !due($0) }
            held[device] = kept.isEmpty ? nil : kept
        }
        return out
    }

    /// Brings the sessions' ownership in line with the roles (a stale view changes nothing):
    /// what to do for each device, in `devices`' order.
    mutating func update(_ devices: [Running], at now: BridgeInstant) -> [OwnershipAction] {
        var actions: [OwnershipAction] = []
        let stale = suspended(at: now)
        for d in devices {
            let id = d.id
            let role = stale ? .claiming : view.role(of: id, at: now)
            let isActive = active[id] == d.session
            switch role {
            case .owner:
                let commands = (heldAsOwner.removeValue(forKey: id) ?? []) + (held.removeValue(forKey: id) ?? [])
                if isActive {
                    // Held while the node resynchronised: still ours, so delivered now.
                    if !commands.isEmpty { actions.append(.deliver(id: id, commands)) }
                } else {
                    active[id] = d.session
                    activeEpoch[id] = view.claims[id]?.epoch
                    actions.append(.activate(id: id, commands))
                }
            case let .handingOver(to):
                guard isActive, draining.insert(id).inserted else { continue }
                actions.append(.handOver(id: id, to: to))
            case .claiming:
                continue
            case let .other(node):
                var dropped = held.removeValue(forKey: id) ?? []
                var refused = heldAsOwner.removeValue(forKey: id) ?? []
                // Lost at the epoch it was won at: a competing claim of the same epoch won.
                let winnerHolds = isActive && activeEpoch[id] != nil && activeEpoch[id] == view.claims[id]?.epoch
                if winnerHolds { (dropped, refused) = (dropped + refused, []) }
                if isActive { (active[id], activeEpoch[id]) = (nil, nil) }
                if isActive || !dropped.isEmpty || !refused.isEmpty {
                    actions.append(.lost(id: id, to: node, dropped: dropped, refused: refused, deactivate: isActive, winnerHolds: winnerHolds))
                }
            case .unowned:
                if isActive {
                    (active[id], activeEpoch[id]) = (nil, nil)
                    actions.append(.released(id: id))
                }
            }
        }
        return actions
    }

    /// A handover ended: the device is no longer this node's, and the claim naming the next
    /// owner, when this node's note is still the claim in force.
    mutating func handedOver(_ id: String, to next: String, at now: BridgeInstant) -> OwnershipClaim? {
        (active[id], activeEpoch[id]) = (nil, nil)
        draining.remove(id)
        noteEchoed.remove(id)
        guard let c = view.claims[id], c.node == view.me, c.handoverTo == next else { return nil }
        let claim = OwnershipClaim(node: next, epoch: c.nextEpoch)
        view.receive(claim, for: id, at: now)
        return claim
    }

    /// The node's own decisions for its devices (claim, hand over, keep, release), each claim
    /// already in the view, with the kind of its `bridge/event`.
    mutating func decide(_ devices: [(id: String, address: String)], at now: BridgeInstant) -> [(device: String, claim: OwnershipClaim, kind: String)] {
        var out: [(device: String, claim: OwnershipClaim, kind: String)] = []
        for d in devices {
            guard let decision = view.decide(d.id, address: d.address, at: now) else { continue }
            let claim: OwnershipClaim
            let kind: String
            switch decision {
            case let .claim(c): (claim, kind) = (c, "device_claimed")
            case let .handOver(c):
                (claim, kind) = (c, "handover_started")
                noteEchoed.remove(d.id)
            case let .keep(c): (claim, kind) = (c, "handover_cancelled")
            case let .release(c): (claim, kind) = (c, "device_released")
            }
            _ = view.receive(claim, for: d.id, at: now)
            out.append((d.id, claim, kind))
        }
        return out
    }
}
