import BinaryCoding
import BridgeConfig
import Foundation
import Synchronization

/// This node's side of several bridges on one broker (docs/scale-out.md): what it knows
/// (``ClusterView``), what it sees itself, the commands it holds for a device nobody owns, and
/// which sessions it runs. The bridge's ``Bridge/clusterTick()`` and ``Bridge/handleCluster(_:)``
/// drive it.
final class ClusterState: Sendable {
    let settings: ClusterSettings
    let view: Mutex<ClusterView>
    /// This node's own sightings by address (the continuous scan).
    let local = Mutex<[String: (rssi: Int, at: ContinuousClock.Instant)]>([:])
    /// Commands held while a device has no owner, by device id.
    let held = Mutex<[String: [PendingCommand]]>([:])
    /// Commands that came while this node owned the device by its view but that view may be
    /// stale (suspended): no other node holds them, so this one answers them if it turns out
    /// another node owns the device now.
    let heldAsOwner = Mutex<[String: [PendingCommand]]>([:])
    /// This node read its own Will and not yet its own `online` again: the others took the
    /// commands meanwhile (the new owner, or held for it), so this node leaves them alone.
    let willSeen = Mutex(false)
    /// Devices whose session this node runs as their owner, with that session (a device
    /// reconfigured gets a new session, which starts not owning it).
    let active = Mutex<[String: ObjectIdentifier]>([:])
    /// Devices being handed over (their commands draining).
    let draining = Mutex<Set<String>>([])
    /// When the bridge started: decisions wait until the retained claims and reports are in.
    let started: Mutex<ContinuousClock.Instant?> = Mutex(nil)
    /// When this node last published what it sees.
    let lastReport: Mutex<ContinuousClock.Instant?> = Mutex(nil)
    /// Links this node's adapter holds to devices it does not own and no session of its uses
    /// (by device id, since when), those being closed, and when it last looked for them.
    let unusedLinks = Mutex<[String: ContinuousClock.Instant]>([:])
    let closingLinks = Mutex<Set<String>>([])
    let lastUnusedLinkCheck: Mutex<ContinuousClock.Instant?> = Mutex(nil)
    /// Devices whose handover note (this node's claim with `handover_to`) came back from the
    /// broker: commands ordered before it are still this node's to execute, those after it are
    /// held for the next owner (docs/scale-out.md, "Hand over").
    let noteEchoed = Mutex<Set<String>>([])
    /// This node's view may be stale: the broker connection is down, or it came back (or the
    /// node was frozen) less than `claim_settle` ago. Meanwhile the node executes no new command
    /// (they are held), decides nothing and republishes nothing; when it ends, what it still
    /// owns is republished and held commands are delivered or dropped by the fresh view.
    let disconnected = Mutex(false)
    let suspendedUntil: Mutex<ContinuousClock.Instant?> = Mutex(nil)
    let republishDue = Mutex(false)
    /// The last tick, to notice that the node was frozen (SIGSTOP, a stalled host).
    let lastTick: Mutex<ContinuousClock.Instant?> = Mutex(nil)
    /// Ownership changes of the sessions, carried out one at a time in order.
    let jobs: AsyncStream<@Sendable () async -> Void>
    let jobSink: AsyncStream<@Sendable () async -> Void>.Continuation

    /// This node's id.
    let node: String

    /// How long the continuous scan waits before it starts again after it failed or ended.
    static let scanRetry: Duration = .seconds(2)
    /// A loop that did not turn for this long was frozen (its ticks are 50 ms apart).
    static let stallLimit: Duration = .seconds(1)

    init(node: String, settings: ClusterSettings) {
        self.node = node
        self.settings = settings
        view = Mutex(ClusterView(me: node, parameters: .init(hysteresis: settings.hysteresis, handoverAfter: settings.handoverAfter,
                                                             lostAfter: settings.lostAfter, claimSettle: settings.claimSettle)))
        (jobs, jobSink) = AsyncStream.makeStream(of: (@Sendable () async -> Void).self)
    }
}

extension Bridge {
    /// The filters a node subscribes to besides the bridge's own.
    var clusterSubscriptions: [String] { cluster == nil ? [] : topics.clusterSubscriptions }

    /// The filters on which the node must receive its own publishes too (MQTT 5 no-local off):
    /// the claims, so that a handover note's echo tells where the broker ordered it.
    /// The node states too: a node that was cut off reads its own Will among the messages its
    /// broker kept for it, and so knows which commands the others took as its device's owner's.
    public var ownPublishesWanted: Set<String> {
        cluster == nil ? [] : ["\(topics.base)/bridge/owners/+", "\(topics.base)/bridge/nodes/+/state"]
    }

    /// Whether the node's view may be stale now (``ClusterState/disconnected``).
    func suspended(_ cluster: ClusterState, at now: ContinuousClock.Instant) -> Bool {
        if cluster.disconnected.withLock({ $0 }) { return true }
        return cluster.suspendedUntil.withLock { $0.map { now < $0 } ?? false }
    }

    /// The broker connection is gone: the node's Will may be out, another node may claim its
    /// devices; until it is back and has read the claims again it executes nothing new.
    public func brokerDisconnected() {
        guard let cluster else { return }
        cluster.disconnected.withLock { $0 = true }
        logger.info("cluster: broker connection lost; holding commands until the claims are read again")
    }

    /// Suspends the node for `claim_settle` from now: the retained claims and reports come in again.
    func resync(_ cluster: ClusterState, at now: ContinuousClock.Instant) {
        cluster.suspendedUntil.withLock { $0 = now + cluster.settings.claimSettle }
        cluster.republishDue.withLock { $0 = true }
    }

    /// A node whose loop did not turn for a while (frozen: SIGSTOP, a stalled host) may have
    /// missed its own Will and another node's claim: it resynchronises before it acts.
    func noticeStall(at now: ContinuousClock.Instant) {
        guard let cluster, let last = cluster.lastTick.withLock({ $0 }), now - last > ClusterState.stallLimit else { return }
        cluster.lastTick.withLock { $0 = now }
        if !suspended(cluster, at: now) {
            logger.warning("cluster: this node did not run for \(now - last); holding commands until the claims are read again")
        }
        resync(cluster, at: now)
    }

    /// A message on a cluster topic (node state, node report, ownership claim); false when the
    /// message is not one.
    func handleCluster(_ m: InboundMessage) -> Bool {
        noticeStall(at: clock.now())
        guard let cluster, let route = topics.clusterRoute(m.topic) else { return false }
        let now = clock.now()
        let json = m.payload.isEmpty ? nil : try? JSONValue(parsing: m.payload)
        switch route {
        case let .nodeState(node):
            // `{"state":"online"|"offline",…}`; an empty payload (the retained state cleared) is
            // a node gone. Anything else is somebody else's garbage: said, and ignored.
            let state = m.payload.isEmpty ? "offline" : json?.objectValue?["state"]?.stringValue
            guard state == "online" || state == "offline" else {
                logger.warning("ignoring a malformed node state (expected {\"state\":\"online\"|\"offline\"})",
                               metadata: ["topic": "\(m.topic)", "payload": "\(String(decoding: m.payload.prefix(200), as: UTF8.self))"])
                break
            }
            let online = state == "online"
            if node == cluster.node, !m.payload.isEmpty {
                // Our own Will (offline) among the messages kept for us: what follows until our
                // own `online` the other nodes took as if we were gone; our `online` ends that.
                cluster.willSeen.withLock { $0 = !online }
            }
            cluster.view.withLock { $0.node(node, online: online) }
        case let .nodeSeen(node):
            guard node != cluster.node else { break }  // this node's own report is applied as it is made
            guard let devices = json?.objectValue?["devices"]?.objectValue ?? (m.payload.isEmpty ? [:] : nil) else {
                logger.warning("ignoring a malformed node report (expected {\"devices\":{…}})", metadata: ["topic": "\(m.topic)"])
                break
            }
            // Every number range-checked: a report with garbage in it is said and ignored whole
            // (the node's previous report stands).
            switch ClusterView.sightings(devices, at: now) {
            case let .success(seen): cluster.view.withLock { $0.report(from: node, seen) }
            case let .failure(error):
                logger.warning("ignoring a malformed node report", metadata: ["topic": "\(m.topic)", "error": "\(error)"])
            }
        case let .owner(device):
            guard let json, let claim = OwnershipClaim(json: json) else {
                if !m.payload.isEmpty {
                    logger.warning("ignoring a malformed ownership claim (expected {\"node\":…,\"epoch\":0…\(OwnershipClaim.maxEpoch)})",
                                   metadata: ["topic": "\(m.topic)", "payload": "\(String(decoding: m.payload.prefix(200), as: UTF8.self))"])
                }
                break
            }
            let me = cluster.node
            let (accepted, current) = cluster.view.withLock { v in (v.receive(claim, for: device, at: now), v.claims[device]) }
            // The echo of this node's handover note: commands the broker ordered after it are
            // the next owner's.
            if claim.node == me, claim.handoverTo != nil, current == claim {
                cluster.noteEchoed.withLock { _ = $0.insert(device) }
            }
            // A claim that lost to this node's (a competing one of the same epoch, or an older one
            // a node republished): make the retained one ours again, so a node that starts later
            // reads the claim in force.
            if !accepted, let current, current.node == me, claim != current, !suspended(cluster, at: now) {
                publishClaim(current, for: device)
            }
        }
        clusterUpdate()
        return true
    }

    /// Where a command for `device` goes: into its session (this node owns it), nowhere (another
    /// node owns it and executes it), or held until a node claims it.
    func routeCommand(_ command: PendingCommand, to session: DeviceSession, device: String) {
        guard let cluster else { return session.submit(command) }
        let now = clock.now()
        noticeStall(at: now)
        var role = cluster.view.withLock { $0.role(of: device, at: now) }
        if cluster.willSeen.withLock({ $0 }) {
            logger.debug("command ordered after this node's Will: the other nodes take it", metadata: ["device": "\(device)"])
            return
        }
        if suspended(cluster, at: now), case .owner = role {
            // Ours by a view that may be stale: nobody else holds it; decided after the resync.
            let full = cluster.heldAsOwner.withLock { held -> Bool in
                guard held[device, default: []].count < BridgeDefaults.heldCommands else { return true }
                held[device, default: []].append(command)
                return false
            }
            if full {
                output.respond(command, device: device, .error,
                               error: CommandError(.deviceOffline, "\(device): this bridge is reconnecting and \(BridgeDefaults.heldCommands) commands wait already"))
            }
            return
        }
        // Handing over: what the broker ordered before the note is still this node's to execute.
        if case .handingOver = role, !cluster.noteEchoed.withLock({ $0.contains(device) }) { role = .owner }
        switch role {
        case .owner:
            session.submit(command)
        case let .other(node):
            logger.debug("command for a device another node owns", metadata: ["device": "\(device)", "owner": "\(node)"])
        case .claiming, .unowned, .handingOver:
            let full = cluster.held.withLock { held -> Bool in
                guard held[device, default: []].count < BridgeDefaults.heldCommands else { return true }
                held[device, default: []].append(command)
                return false
            }
            // Bounded: past the limit the command is refused (once, by the leader), not kept.
            if full, answers(for: nil) {
                output.respond(command, device: device, .error,
                               error: CommandError(.deviceOffline, "no bridge owns \(device) yet and \(BridgeDefaults.heldCommands) commands wait for it already"))
            }
        }
    }

    /// Whether this node answers a command for `device` that no session takes (a bad or
    /// unknown one): always alone; in a cluster the device's owner, or the leader when none.
    func answers(for device: String?) -> Bool {
        guard let cluster else { return true }
        return cluster.view.withLock { v in
            if let device, let owner = v.owner(of: device) { return owner == v.me }
            return v.leader == v.me
        }
    }

    /// After a resynchronisation (the broker back, which may have lost its retained messages):
    /// the claims this node holds in force and the retained topics of the devices it runs.
    func republishOwned() {
        guard let cluster else { return }
        let mine = cluster.view.withLock { v in v.claims.filter { $0.value.node == v.me && v.owner(of: $0.key) == v.me } }
        for (device, claim) in mine { publishClaim(claim, for: device) }
        let running = cluster.active.withLock { $0 }
        for r in registry.withLock({ Array($0.values) }) where running[r.config.id] == ObjectIdentifier(r.session) {
            cluster.jobSink.yield { await r.session.republish() }
        }
    }

    func publishClaim(_ claim: OwnershipClaim, for device: String) {
        mqtt.send(OutboundMessage(topic: topics.owner(device), json: claim.json, qos: 1, retain: true))
    }

    func publishNodeState(online: Bool) {
        guard let cluster else { return }
        let node = cluster.node
        mqtt.send(OutboundMessage(topic: topics.nodeState(node), json: ["state": online ? "online" : "offline", "node": .string(node)],
                                  qos: 1, retain: true))
    }

    /// Devices this node can compare sightings of: those with an address.
    var clusterDevices: [(id: String, address: String, session: DeviceSession)] {
        registry.withLock { r in
            r.values.compactMap { x in x.config.address.map { (x.config.id, $0.uppercased(), x.session) } }
        }
    }

    /// The bridge's ticker: this node's own sightings into the view, its report when due, the
    /// decisions (claim, hand over, keep, release), held commands past their deadline, and the
    /// sessions' ownership.
    func clusterTick() {
        guard let cluster, let started = cluster.started.withLock({ $0 }) else { return }
        let now = clock.now()
        noticeStall(at: now)
        cluster.lastTick.withLock { $0 = now }
        if suspended(cluster, at: now) { return }
        if cluster.republishDue.withLock({ s in defer { s = false }; return s }) { republishOwned() }
        let devices = clusterDevices
        let mine = ownSightings(devices, at: now)
        cluster.view.withLock { $0.report(from: cluster.node, mine) }
        if cluster.lastReport.withLock({ $0.map { now - $0 >= cluster.settings.seenInterval } ?? true }) {
            cluster.lastReport.withLock { $0 = now }
            publishSeen(mine, at: now)
        }
        // Until the retained claims and reports have had time to arrive, decide nothing.
        if now - started >= cluster.settings.claimSettle {
            for d in devices {
                guard let decision = cluster.view.withLock({ $0.decide(d.id, address: d.address, at: now) }) else { continue }
                let claim: OwnershipClaim
                let kind: String
                switch decision {
                case let .claim(c): (claim, kind) = (c, "device_claimed")
                case let .handOver(c):
                    (claim, kind) = (c, "handover_started")
                    cluster.noteEchoed.withLock { _ = $0.remove(d.id) }
                case let .keep(c): (claim, kind) = (c, "handover_cancelled")
                case let .release(c): (claim, kind) = (c, "device_released")
                }
                cluster.view.withLock { _ = $0.receive(claim, for: d.id, at: now) }
                publishClaim(claim, for: d.id)
                clusterEvent(kind, device: d.id, claim)
            }
            closeUnusedLinks(devices, at: now)
        }
        expireHeld(at: now)
        clusterUpdate()
    }

    /// How long a link this node does not use must last before the node closes it: longer than
    /// bluetoothd's own Disconnect (about 2 s, spec/bluez.md behaviour 5), so that the link of a
    /// session of this node that is closing it is not taken for one left behind.
    static let unusedLinkGrace: Duration = .seconds(3)

    /// Closes the links this node's adapter holds to devices another node owns, or nobody, that
    /// no session of this node uses: left by a bridge of this host that was killed (bluetoothd
    /// keeps an LE link after the client that made it is gone, docs/bluez.md "The real stack").
    /// While such a link lasts, a device that stops advertising when connected (most do) is out
    /// of every other node's reach; the node that comes back on this host frees it. Looked for
    /// once a second; a link closes after ``unusedLinkGrace``, one at a time, in the ownership
    /// jobs' order.
    func closeUnusedLinks(_ devices: [(id: String, address: String, session: DeviceSession)], at now: ContinuousClock.Instant) {
        guard let cluster, let control = central.adapterControl else { return }
        let due = cluster.lastUnusedLinkCheck.withLock { last -> Bool in
            if let last, now - last < .seconds(1) { return false }
            last = now
            return true
        }
        guard due else { return }
        for d in devices {
            let owner: String?
            switch cluster.view.withLock({ $0.role(of: d.id, at: now) }) {
            case let .other(node): owner = node
            case .unowned: owner = nil
            case .owner, .handingOver, .claiming:
                cluster.unusedLinks.withLock { $0[d.id] = nil }
                continue
            }
            let used = cluster.active.withLock { $0[d.id] != nil } || cluster.draining.withLock { $0.contains(d.id) }
                || d.session.linked.withLock { $0 }
            guard !used, control.holdsUnusedLink(to: d.address) else {
                cluster.unusedLinks.withLock { $0[d.id] = nil }
                continue
            }
            let since = cluster.unusedLinks.withLock { u -> ContinuousClock.Instant in
                if let since = u[d.id] { return since }
                u[d.id] = now
                return now
            }
            guard now - since >= Self.unusedLinkGrace, cluster.closingLinks.withLock({ $0.insert(d.id).inserted }) else { continue }
            logger.warning("""
                cluster: closing a link this node's adapter holds to a device it does not own (left by a bridge that \
                stopped without closing it; while it lasts the device does not advertise to the node that owns it)
                """,
                metadata: ["device": "\(d.id)", "owner": "\(owner ?? "none")"])
            let (id, address) = (d.id, d.address)
            cluster.jobSink.yield {
                defer {
                    cluster.closingLinks.withLock { _ = $0.remove(id) }
                    cluster.unusedLinks.withLock { $0[id] = nil }
                }
                switch cluster.view.withLock({ $0.role(of: id, at: self.clock.now()) }) {
                case .other, .unowned: break
                case .owner, .handingOver, .claiming: return  // this node's now: its session adopts the link
                }
                do throws(BLEError) {
                    try await control.closeUnusedLink(to: address)
                } catch {
                    self.logger.warning("cluster: closing the link failed", metadata: ["device": "\(id)", "error": "\(error)"])
                }
            }
        }
    }

    func clusterEvent(_ kind: String, device: String, _ claim: OwnershipClaim) {
        guard let cluster else { return }
        var o: JSONObject = ["type": .string(kind), "device": .string(device), "node": .string(cluster.node), "epoch": .int(Int64(claim.epoch))]
        if let to = claim.handoverTo { o["handover_to"] = .string(to) }
        mqtt.send(OutboundMessage(topic: topics.bridgeEvent, json: .object(o), qos: 0, retain: false))
        logger.info("\(kind)", metadata: ["device": "\(device)", "epoch": "\(claim.epoch)", "handover_to": "\(claim.handoverTo ?? "-")"])
    }

    /// What this node sees now: a linked device at its last advertised RSSI (BlueZ reports no
    /// RSSI for a connected LE device; -127 when none was seen), others from the scan while recent.
    func ownSightings(_ devices: [(id: String, address: String, session: DeviceSession)],
                      at now: ContinuousClock.Instant) -> [String: ClusterView.Sighting] {
        guard let cluster else { return [:] }
        let local = cluster.local.withLock { $0 }
        var out: [String: ClusterView.Sighting] = [:]
        for d in devices {
            if d.session.linked.withLock({ $0 }) {
                out[d.address] = ClusterView.Sighting(rssi: local[d.address]?.rssi ?? -127, at: now, connected: true)
            } else if let s = local[d.address], now - s.at <= cluster.settings.lostAfter {
                out[d.address] = ClusterView.Sighting(rssi: s.rssi, at: s.at, connected: false)
            }
        }
        return out
    }

    /// `<base>/bridge/nodes/<node>/seen`, retained.
    func publishSeen(_ seen: [String: ClusterView.Sighting], at now: ContinuousClock.Instant) {
        guard let cluster else { return }
        var devices = JSONObject()
        for address in seen.keys.sorted() {
            let s = seen[address]!
            let age = max(0, (now - s.at).wholeMilliseconds)
            devices[address] = ["rssi": .int(Int64(s.rssi)), "age_ms": .int(age), "connected": .bool(s.connected)]
        }
        mqtt.send(OutboundMessage(topic: topics.nodeSeen(cluster.node), json: ["node": .string(cluster.node), "devices": .object(devices)],
                                  qos: 0, retain: true))
    }

    /// Takes the held commands whose deadline passed, by device.
    static func takeDue(_ held: borrowing Mutex<[String: [PendingCommand]]>, at now: ContinuousClock.Instant) -> [(String, PendingCommand)] {
        held.withLock { held in
            var out: [(String, PendingCommand)] = []
            for (device, commands) in held {
                let due = { (c: PendingCommand) in c.deadline.map { $0 <= now } ?? false }
                out += commands.filter(due).map { (device, $0) }
                let kept = commands.filter { !due($0) }
                held[device] = kept.isEmpty ? nil : kept
            }
            return out
        }
    }

    /// Held commands past their deadline end: answered `expired` by the leader (the lowest
    /// online node id), dropped by the others, so one answer goes out.
    func expireHeld(at now: ContinuousClock.Instant) {
        guard let cluster else { return }
        let expired = Self.takeDue(cluster.held, at: now)
        let expiredOwn = Self.takeDue(cluster.heldAsOwner, at: now)
        for (device, cmd) in expiredOwn {
            if let id = cmd.outboxID { try? store.removeCommand(id) }
            output.respond(cmd, device: device, .expired, error: CommandError(.deviceOffline, "\(device) was not back before the deadline"))
        }
        guard !expired.isEmpty else { return }
        let leader = cluster.view.withLock { $0.leader == $0.me }
        for (device, cmd) in expired {
            if let id = cmd.outboxID { try? store.removeCommand(id) }
            if leader {
                output.respond(cmd, device: device, .expired,
                               error: CommandError(.deviceOffline, "no bridge took \(device) before the deadline"))
            }
        }
    }

    /// Brings the sessions in line with the roles: a device this node now owns gets its session
    /// going and its held commands; one it hands over drains and then passes to the next owner;
    /// one it lost stops (its waiting commands end, its link closes). Held commands of a device
    /// another node took are dropped (that node delivers its own).
    func clusterUpdate() {
        guard let cluster else { return }
        let now = clock.now()
        for r in registry.withLock({ Array($0.values) }) {
            let id = r.config.id
            let session = r.session
            var role = cluster.view.withLock { $0.role(of: id, at: now) }
            // A stale view changes nothing: what it says will be read again first.
            if suspended(cluster, at: now) { role = .claiming }
            let isActive = cluster.active.withLock { $0[id] == ObjectIdentifier(session) }
            switch role {
            case .owner:
                guard !isActive else {
                    // Held while the node resynchronised: still ours, so delivered now.
                    let held = (cluster.heldAsOwner.withLock { $0.removeValue(forKey: id) } ?? [])
                        + (cluster.held.withLock { $0.removeValue(forKey: id) } ?? [])
                    for cmd in held { session.submit(cmd) }
                    continue
                }
                cluster.active.withLock { $0[id] = ObjectIdentifier(session) }
                let held = (cluster.heldAsOwner.withLock { $0.removeValue(forKey: id) } ?? [])
                    + (cluster.held.withLock { $0.removeValue(forKey: id) } ?? [])
                let address = r.config.address
                cluster.jobSink.yield { [central] in
                    // A link another bridge on this Bluetooth daemon left up would keep the device from us.
                    if let address, let control = central.adapterControl {
                        let closed = await control.takeOver(address: address, keeping: [])
                        if !closed.isEmpty {
                            self.logger.warning("cluster: closed a link another bridge left to the device through this Bluetooth daemon's \(closed.joined(separator: ", "))",
                                                metadata: ["device": "\(id)"])
                        }
                    }
                    await session.setOwned(true, failingQueuedWith: nil)
                    for cmd in held { session.submit(cmd) }
                }
            case let .handingOver(to):
                guard isActive, cluster.draining.withLock({ $0.insert(id).inserted }) else { continue }
                cluster.jobSink.yield { await self.handOver(id, session, to: to) }
            case .claiming:
                continue
            case let .other(node):
                let dropped = cluster.held.withLock { $0.removeValue(forKey: id) } ?? []
                for cmd in dropped { if let o = cmd.outboxID { try? store.removeCommand(o) } }
                // Taken while this node thought it owned the device: nobody else will answer them.
                for cmd in cluster.heldAsOwner.withLock({ $0.removeValue(forKey: id) }) ?? [] {
                    if let o = cmd.outboxID { try? store.removeCommand(o) }
                    output.respond(cmd, device: id, .error, error: CommandError(
                        .interrupted, "\(cluster.node) was cut off from the broker when the command came and \(id) is \(node)'s now: not executed"))
                }
                if isActive { deactivate(id, session, CommandError(.interrupted, "\(id) moved to \(node) before the command was sent (not repeated)")) }
            case .unowned:
                if isActive {
                    deactivate(id, session, CommandError(.deviceOffline, "\(id) was released (no link and no sighting for cluster.lost_after) before the command was sent"))
                }
            }
        }
    }

    func deactivate(_ id: String, _ session: DeviceSession, _ error: CommandError?) {
        guard let cluster else { return }
        cluster.active.withLock { $0[id] = nil }
        cluster.jobSink.yield { await session.setOwned(false, failingQueuedWith: error) }
    }

    /// A voluntary handover: the commands under way and waiting finish (up to `drain_timeout`),
    /// the session gives the device up (what still waits ends with an error, the link closes and
    /// availability goes offline), then the claim names the next owner.
    func handOver(_ id: String, _ session: DeviceSession, to next: String) async {
        guard let cluster else { return }
        let deadline = clock.now() + cluster.settings.drainTimeout
        // Until the note's echo, commands still come to this node; then what it took finishes.
        while clock.now() < deadline {
            let echoed = cluster.noteEchoed.withLock { $0.contains(id) }
            if echoed, await session.isIdle() { break }
            try? await sleep(min(.milliseconds(50), cluster.settings.drainTimeout))
        }
        await session.setOwned(false, failingQueuedWith: CommandError(.interrupted, "\(id) was handed over to \(next) before the command was sent (not repeated)"))
        cluster.active.withLock { $0[id] = nil }
        cluster.draining.withLock { _ = $0.remove(id) }
        cluster.noteEchoed.withLock { _ = $0.remove(id) }
        let now = clock.now()
        let claim = cluster.view.withLock { v -> OwnershipClaim? in
            guard let c = v.claims[id], c.node == v.me, c.handoverTo == next else { return nil }
            let claim = OwnershipClaim(node: next, epoch: c.nextEpoch)
            v.receive(claim, for: id, at: now)
            return claim
        }
        if let claim {
            publishClaim(claim, for: id)
            clusterEvent("handover_done", device: id, claim)
        }
        clusterUpdate()
    }

    /// The tasks of a node: the ownership jobs and the continuous scan for the reports.
    func runCluster(in group: inout DiscardingTaskGroup) {
        guard let cluster else { return }
        cluster.started.withLock { $0 = clock.now() }
        publishNodeState(online: true)
        if registry.withLock({ $0.values.contains { $0.config.address == nil } }) {
            logger.warning("cluster: devices without an address are never claimed (ownership compares sightings by address)")
        }
        group.addTask {
            for await job in cluster.jobs { await job() }
        }
        group.addTask { await self.clusterScan() }
    }

    /// Scans all the time, for the reports: the RSSI of each configured device this node sees.
    func clusterScan() async {
        guard let cluster else { return }
        guard let adapter = central.adapterControl else {
            logger.warning("cluster: this Bluetooth central cannot scan; this node reports only its links")
            return
        }
        while !Task.isCancelled {
            do throws(BLEError) {
                let scan = try await adapter.scan()
                await withTaskCancellationHandler {
                    for await ad in scan.advertisements {
                        guard let rssi = ad.rssi else { continue }
                        let address = ad.address.uppercased()
                        cluster.local.withLock { $0[address] = (rssi, clock.now()) }
                    }
                } onCancel: {
                    Task { await scan.stop() }
                }
                await scan.stop()
            } catch {
                logger.warning("cluster: scan failed", metadata: ["error": "\(error)"])
            }
            if Task.isCancelled { break }
            try? await sleep(ClusterState.scanRetry)
        }
    }
}
