import BinaryCoding
import BridgeConfig
import Foundation
import Synchronization

// The node's ticker and the sessions' ownership: its own sightings and report, the decisions
// (claim, hand over, keep, release), held commands past their deadline, handovers.

extension ClusterExtension {
    /// Devices this node can compare sightings of: those with an address.
    var devices: [(id: String, address: String, session: DeviceSession)] {
        bridge.registry.withLock { r in
            r.values.compactMap { x in x.config.address.map { (x.config.id, $0.uppercased(), x.session) } }
        }
    }

    /// The cluster is ticked every `tick` of the bridge (its stall watch counts on it).
    var ticks: Bool { true }

    /// The bridge's timer, every `tick`: this node's own sightings into the view, its report
    /// when due, the decisions (claim, hand over, keep, release), held commands past their
    /// deadline, and the sessions' ownership.
    func tick() {
        guard let started = state.withLock({ $0.started }) else { return }
        let now = self.now
        noticeStall(at: now)
        let (suspended, republish) = state.withLock { s -> (Bool, Bool) in
            s.lastTick = now
            if s.suspended(at: now) { return (true, false) }
            defer { s.republishDue = false }
            return (false, s.republishDue)
        }
        if suspended { return }
        if republish { republishOwned() }
        let devices = self.devices
        let linked = Set(devices.filter { $0.session.linked.withLock { $0 } }.map(\.address))
        // Asked only of a device neither linked nor heard recently, at the tick (50 ms): a look
        // through the BlueZ object cache, not a D-Bus call.
        let control = bridge.central.adapterControl
        let local = state.withLock { $0.local }
        let mine = Self.ownSightings(devices.map(\.address), linked: linked, local: local, lostAfter: settings.lostAfter, at: now) {
            control?.linkedThroughAnotherAdapter($0, keeping: []) == true
        }
        let reportDue = state.withLock { s in
            s.withView { $0.report(from: node, mine) }
            return s.reportDue(Set(mine.keys), at: now)
        }
        if reportDue { publishSeen(mine, at: now) }
        // Until the retained claims and reports have had time to arrive, decide nothing.
        if now - started >= settings.claimSettle {
            for d in state.withLock({ $0.decide(devices.map { ($0.id, $0.address) }, at: now) }) {
                publishClaim(d.claim, for: d.device)
                event(d.kind, device: d.device, d.claim)
            }
            closeUnusedLinks(devices, at: now)
        }
        expireHeld(at: now)
        update()
    }

    /// What this node sees now: a linked device at its last advertised RSSI (BlueZ reports no
    /// RSSI for a connected LE device; -127 when none was seen), others from the scan while recent.
    /// A device for which `nearby` says yes (linked through another adapter of this node's
    /// Bluetooth daemon: it advertises to nobody; asked only of a device neither linked nor heard
    /// recently) is seen now at -127, "no RSSI": in reach, so
    /// this node can claim it when nobody owns it, but never seen better than an owner
    /// (``ClusterView/decide(_:address:at:)`` hands over to a measured RSSI only).
    static func ownSightings(_ addresses: [String], linked: Set<String>,
                             local: [String: (rssi: Int, at: BridgeInstant)],
                             lostAfter: Duration, at now: BridgeInstant,
                             nearby: (String) -> Bool = { _ in false }) -> [String: ClusterView.Sighting] {
        var out: [String: ClusterView.Sighting] = [:]
        for address in addresses {
            if linked.contains(address) {
                out[address] = ClusterView.Sighting(rssi: local[address]?.rssi ?? ClusterView.Sighting.noRSSI, at: now, connected: true)
            } else if let s = local[address], now - s.at <= lostAfter {
                out[address] = ClusterView.Sighting(rssi: s.rssi, at: s.at, connected: false)
            } else if nearby(address) {
                out[address] = ClusterView.Sighting(rssi: ClusterView.Sighting.noRSSI, at: now, connected: false)
            }
        }
        return out
    }

    /// `<base>/bridge/nodes/<node>/seen`, retained.
    func publishSeen(_ seen: [String: ClusterView.Sighting], at now: BridgeInstant) {
        var devices = JSONObject()
        for address in seen.keys.sorted() {
            let s = seen[address]!
            let age = max(0, (now - s.at).wholeMilliseconds)
            devices[address] = ["rssi": .int(Int64(s.rssi)), "age_ms": .int(age), "connected": .bool(s.connected)]
        }
        bridge.mqtt.send(OutboundMessage(topic: topics.nodeSeen(node), json: ["node": .string(node), "devices": .object(devices)],
                                         qos: 0, retain: true))
    }

    /// After a resynchronisation (the broker back, which may have lost its retained messages):
    /// the claims this node holds in force and the retained topics of the devices it runs.
    func republishOwned() {
        let (mine, running) = state.withLock { s in
            (s.view.claims.filter { $0.value.node == s.view.me && s.view.owner(of: $0.key) == s.view.me }, s.active)
        }
        for (device, claim) in mine { publishClaim(claim, for: device) }
        for r in bridge.registry.withLock({ Array($0.values) }) where running[r.config.id] == ObjectIdentifier(r.session) {
            jobSink.yield { await r.session.republish() }
        }
    }

    /// Held commands past their deadline end: answered `expired` by the leader (the lowest
    /// online node id), dropped by the others, so one answer goes out.
    func expireHeld(at now: BridgeInstant) {
        let (expired, expiredOwn, leader) = state.withLock { s in
            let (unowned, own) = s.takeDue(at: now)
            return (unowned, own, s.view.leader == s.view.me)
        }
        let (store, output) = (bridge.store, bridge.output)
        for (device, cmd) in expiredOwn {
            if let id = cmd.outboxID { try? store.removeCommand(id) }
            output.respond(cmd, device: device, .expired, error: CommandError(.deviceOffline, "\(device) was not back before the deadline"))
        }
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
    func update() {
        let now = self.now
        let registered = bridge.registry.withLock { $0 }
        let running = registered.values.map { ClusterNodeState.Running(id: $0.config.id, session: ObjectIdentifier($0.session)) }
        let actions = state.withLock { $0.update(running, at: now) }
        let (store, output, central) = (bridge.store, bridge.output, bridge.central)
        for action in actions {
            switch action {
            case let .deliver(id, held):
                guard let session = registered[id]?.session else { continue }
                for cmd in held { session.submit(cmd) }
            case let .activate(id, held):
                guard let r = registered[id] else { continue }
                bridge.deviceOwned(r.config)
                let (session, address) = (r.session, r.config.address)
                jobSink.yield { [logger] in
                    // A link another bridge on this Bluetooth daemon left up would keep the device from us.
                    if let address, let control = central.adapterControl {
                        let closed = await control.takeOver(address: address, keeping: [])
                        if !closed.isEmpty {
                            logger.warning("cluster: closed a link another bridge left to the device through this Bluetooth daemon's \(closed.joined(separator: ", "))",
                                           metadata: ["device": "\(id)"])
                        }
                    }
                    await session.setOwned(true, failingQueuedWith: nil)
                    for cmd in held { session.submit(cmd) }
                }
            case let .handOver(id, to):
                guard let session = registered[id]?.session else { continue }
                jobSink.yield { await self.handOver(id, session, to: to) }
            case let .lost(id, node, dropped, refused, deactivate, winnerHolds):
                for cmd in dropped { if let o = cmd.outboxID { try? store.removeCommand(o) } }
                // Taken while this node thought it owned the device: nobody else will answer them.
                for cmd in refused {
                    if let o = cmd.outboxID { try? store.removeCommand(o) }
                    output.respond(cmd, device: id, .error, error: CommandError(
                        .interrupted, "\(self.node) was cut off from the broker when the command came and \(id) is \(node)'s now: not executed"))
                }
                if deactivate, let session = registered[id]?.session {
                    // Lost to a claim of the same epoch: the winner held the commands and answers them.
                    let error = winnerHolds ? nil : CommandError(.interrupted, "\(id) moved to \(node) before the command was sent (not repeated)")
                    if winnerHolds {
                        logger.info("cluster: a claim made at the same time won; the commands waiting here are left to its node",
                                    metadata: ["device": "\(id)", "node": "\(node)"])
                    }
                    jobSink.yield { await session.setOwned(false, failingQueuedWith: error) }
                }
            case let .released(id):
                guard let session = registered[id]?.session else { continue }
                let error = CommandError(.deviceOffline, "\(id) was released (no link and no sighting for cluster.lost_after) before the command was sent")
                jobSink.yield { await session.setOwned(false, failingQueuedWith: error) }
            }
        }
    }

    /// A voluntary handover: the commands under way and waiting finish (up to `drain_timeout`),
    /// the session gives the device up (what still waits ends with an error, the link closes and
    /// availability goes offline), then the claim names the next owner.
    func handOver(_ id: String, _ session: DeviceSession, to next: String) async {
        let deadline = now + settings.drainTimeout
        // Until the note's echo, commands still come to this node; then what it took finishes.
        while now < deadline {
            let echoed = state.withLock { $0.noteEchoed.contains(id) }
            if echoed, await session.isIdle() { break }
            try? await bridge.sleep(min(.milliseconds(50), settings.drainTimeout))
        }
        await session.setOwned(false, failingQueuedWith: CommandError(.interrupted, "\(id) was handed over to \(next) before the command was sent (not repeated)"))
        let now = self.now
        if let claim = state.withLock({ $0.handedOver(id, to: next, at: now) }) {
            publishClaim(claim, for: id)
            event("handover_done", device: id, claim)
        }
        update()
    }
}
