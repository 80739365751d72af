import BinaryCoding
import BridgeConfig
import Foundation
import Logging
import Synchronization

/// This node's side of several bridges on one broker (`cluster.enabled`, docs/scale-out.md):
/// the node's state (``ClusterNodeState``, one value behind one lock), the cluster topics it
/// reads and publishes, the route of every command (only the device's owner runs it), the
/// sessions' ownership, handovers, and the continuous scan behind its reports. Created only when
/// the cluster is enabled; otherwise a command goes straight to its session.
final class ClusterExtension: BridgeExtension, CommandRouting {
    unowned let bridge: Bridge
    /// This node's id.
    let node: String
    let settings: ClusterSettings
    let state: Mutex<ClusterNodeState>
    /// Ownership changes of the sessions, carried out one at a time in order.
    let jobs: AsyncStream<@Sendable () async -> Void>
    let jobSink: AsyncStream<@Sendable () async -> Void>.Continuation

    /// How long the continuous scan waits before it starts again after it failed or ended.
    static let scanRetry: Duration = .seconds(2)

    init(bridge: Bridge, node: String, settings: ClusterSettings) {
        self.bridge = bridge
        self.node = node
        self.settings = settings
        state = Mutex(ClusterNodeState(node: node, settings: settings))
        (jobs, jobSink) = AsyncStream.makeStream(of: (@Sendable () async -> Void).self)
    }

    var topics: Topics { bridge.topics }
    var logger: Logger { bridge.logger }
    var now: BridgeInstant { bridge.clock.now() }

    // MARK: Hooks

    var subscriptions: [String] { topics.clusterSubscriptions }

    /// The claims, so that a handover note's echo tells where the broker ordered it. The node
    /// states too: a node that was cut off reads its own Will among the messages its broker kept
    /// for it, and so knows which commands the others took as its device's owner's.
    var ownPublishesWanted: Set<String> { ["\(topics.base)/bridge/owners/+", "\(topics.base)/bridge/nodes/+/state"] }

    /// With several bridges, the bridge is offline when the last of them stops.
    var keepsBridgeOnline: Bool { state.withLock { $0.view.online.count > 1 } }

    func info(into o: inout JSONObject) {
        o["node_id"] = .string(node)
        o["cluster"] = .object(["enabled": true, "nodes_online": .array(state.withLock { $0.view.online.sorted() }.map { .string($0) })])
    }

    func announce() {
        if state.withLock({ $0.started }) != nil { publishNodeState(online: true) }
    }

    /// The tasks of a node: the ownership jobs and the continuous scan for the reports.
    func start(in group: inout DiscardingTaskGroup) {
        let now = self.now
        state.withLock { $0.started = now }
        publishNodeState(online: true)
        if bridge.registry.withLock({ $0.values.contains { $0.config.address == nil } }) {
            logger.warning("cluster: devices without an address are never claimed (ownership compares sightings by address)")
        }
        group.addTask {
            for await job in self.jobs { await job() }
        }
        group.addTask { await self.scan() }
    }

    func stop() async { publishNodeState(online: false) }

    /// The broker came back: the claims and reports are read again before this node acts or
    /// republishes anything of its devices (its view may be stale: its Will may be out).
    func brokerReconnected() -> Bool {
        let now = self.now
        state.withLock {
            $0.disconnected = false
            $0.resync(at: now)
        }
        return true
    }

    /// The broker connection is gone: the node's Will may be out, another node may claim its
    /// devices; until it is back and has read the claims again it executes nothing new.
    func brokerDisconnected() {
        state.withLock { $0.disconnected = true }
        logger.info("cluster: broker connection lost; holding commands until the claims are read again")
    }

    /// A node whose loop did not turn for a while resynchronises before it acts (said once).
    func noticeStall(at now: BridgeInstant) {
        if let frozen = state.withLock({ $0.noticeStall(at: now) }) {
            logger.warning("cluster: this node did not run for \(frozen); holding commands until the claims are read again")
        }
    }

    /// A message on a cluster topic (node state, node report, ownership claim).
    func handle(_ m: InboundMessage) -> Bool {
        noticeStall(at: now)
        guard let route = topics.clusterRoute(m.topic) else { return false }
        let now = self.now
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
            self.state.withLock { s in
                if node == self.node, !m.payload.isEmpty {
                    // Our own Will (offline) among the messages kept for us: what follows until our
                    // own `online` the other nodes took as if we were gone; our `online` ends that.
                    s.willSeen = !online
                }
                s.withView { $0.node(node, online: online) }
            }
        case let .nodeSeen(node):
            guard node != self.node else { break }  // this node's own report is applied as it is made
            guard let devices = json?.objectValue?["devices"]?.objectValue ?? (m.payload.isEmpty ? [:] : nil) else {
                logger.warning("ignoring a malformed node report (expected {\"devices\":{…}})", metadata: ["topic": "\(m.topic)"])
                break
            }
            // Every number range-checked: a report with garbage in it is said and ignored whole
            // (the node's previous report stands).
            switch ClusterView.sightings(devices, at: now) {
            case let .success(seen): state.withLock { $0.withView { $0.report(from: node, seen) } }
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
            let me = node
            let reassert = state.withLock { s -> OwnershipClaim? in
                let accepted = s.withView { $0.receive(claim, for: device, at: now) }
                let current = s.view.claims[device]
                // The echo of this node's handover note: commands the broker ordered after it are
                // the next owner's.
                if claim.node == me, claim.handoverTo != nil, current == claim { s.noteEchoed.insert(device) }
                // A claim that lost to this node's (a competing one of the same epoch, or an older
                // one a node republished): make the retained one ours again, so a node that starts
                // later reads the claim in force.
                guard !accepted, let current, current.node == me, claim != current, !s.suspended(at: now) else { return nil }
                return current
            }
            if let reassert { publishClaim(reassert, for: device) }
        }
        update()
        return true
    }

    // MARK: Commands

    /// Where a command for `device` goes: into its session (this node owns it), nowhere (another
    /// node owns it and executes it), or held until a node claims it.
    func route(_ command: PendingCommand, to session: DeviceSession, device: String) {
        let now = self.now
        noticeStall(at: now)
        let (route, answers) = state.withLock { s in (s.route(command, device: device, at: now), s.answers(for: nil)) }
        switch route {
        case .submit:
            session.submit(command)
        case .afterWill:
            logger.debug("command ordered after this node's Will: the other nodes take it", metadata: ["device": "\(device)"])
        case let .other(node):
            logger.debug("command for a device another node owns", metadata: ["device": "\(device)", "owner": "\(node)"])
        case .hold:
            break
        case .full(asOwner: true):
            bridge.output.respond(command, device: device, .error,
                                  error: CommandError(.deviceOffline, "\(device): this bridge is reconnecting and \(BridgeDefaults.heldCommands) commands wait already"))
        case .full(asOwner: false):
            // Bounded: past the limit the command is refused (once, by the leader), not kept.
            if answers {
                bridge.output.respond(command, device: device, .error,
                                      error: CommandError(.deviceOffline, "no bridge owns \(device) yet and \(BridgeDefaults.heldCommands) commands wait for it already"))
            }
        }
    }

    func answers(for device: String?) -> Bool { state.withLock { $0.answers(for: device) } }

    func owns(_ device: String) -> Bool { state.withLock { $0.view.owner(of: device) == node } }

    // MARK: Publishing

    func publishClaim(_ claim: OwnershipClaim, for device: String) {
        bridge.mqtt.send(OutboundMessage(topic: topics.owner(device), json: claim.json, qos: 1, retain: true))
    }

    func publishNodeState(online: Bool) {
        bridge.mqtt.send(OutboundMessage(topic: topics.nodeState(node), json: ["state": online ? "online" : "offline", "node": .string(node)],
                                         qos: 1, retain: true))
    }

    func event(_ kind: String, device: String, _ claim: OwnershipClaim) {
        var o: JSONObject = ["device": .string(device), "node": .string(node), "epoch": .int(Int64(claim.epoch))]
        if let to = claim.handoverTo { o["handover_to"] = .string(to) }
        bridge.mqtt.send(OutboundMessage(topic: topics.bridgeEvent, json: BridgeEvent.json(kind, o), qos: 0, retain: false))
        logger.info("\(kind)", metadata: ["device": "\(device)", "epoch": "\(claim.epoch)", "handover_to": "\(claim.handoverTo ?? "-")"])
    }
}
