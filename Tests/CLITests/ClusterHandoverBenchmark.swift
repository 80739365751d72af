import Foundation
import Mosquitto
import Reactor
import Synchronization
import TestSupport
import Testing

/// Issue 14's figures (docs/scale-out.md, "Figures"): N forced handovers on the two-node cluster
/// of ``Cluster`` (one broker), commands sent all along, and what became of each command. Not
/// part of the normal run; one kind at a time:
///
///     GATT2MQTT_HANDOVER_BENCH=100 swift test --skip-build --filter 'ClusterHandoverBenchmark/killed'
///
/// - `killed`: kill -9 of the owner (its socket closes: the broker sends its Will at once), then
///   it starts again.
/// - `paused`: SIGSTOP of the owner (the socket stays open: the Will comes when the keep-alive
///   runs out, 1.5 × 5 s), then SIGCONT once the other node has claimed the sensor.
/// - `rssi`: the emulators' RSSI change so that the other node sees the sensor 15 dB better: the
///   owner hands it over (a voluntary handover).
///
/// Both emulators see the sensor at −60 dBm in `killed` and `paused`, with a hysteresis of 30 dB,
/// so that only the owner's death moves it. Two streams of commands run throughout:
/// - one every 100 ms (`c-N`), each writing its own two bytes (N in base 255, digits 1…255) to
///   the control point 2A39, so that the emulators' records (`Received`) tell which command each
///   write was. The emulated
///   sensor records a write, then refuses any value but 01 with ATT error 0x80: a `c-` command
///   the sensor executed ends `error`, code `bluetooth_error`.
/// - one at a time (`f-N`), writing 01 (ends `ok`), each sent 100 ms after the previous one
///   ended, or after a claim came after it (the old owner may have taken it with it), or 10 s.
///
/// GATT2MQTT_HANDOVER_BENCH_LOGS=DIR keeps the bridges' logs there (`<kind>-a.log`, …);
/// GATT2MQTT_HANDOVER_BENCH_LOG_LEVEL sets the bridges' log level (default info).
@Suite(.serialized, .enabled(if: HandoverBench.count != nil, "set GATT2MQTT_HANDOVER_BENCH=N to run"))
struct ClusterHandoverBenchmark {
    @Test(.timeLimit(.minutes(40))) func killed() async throws { try await HandoverBench.run(.killed) }
    @Test(.timeLimit(.minutes(40))) func paused() async throws { try await HandoverBench.run(.paused) }
    @Test(.timeLimit(.minutes(40))) func rssi() async throws { try await HandoverBench.run(.rssi) }
}

/// A message the hub saw and when, parsed as far as the benchmark needs.
struct Seen: Sendable {
    let at: ContinuousClock.Instant
    let topic: String
    let payload: String
    /// A claim's, a node state's, a seen report's or a response's node.
    var node: String?
    var epoch: Int?
    var handoverTo: String?
    /// A node state's `state`.
    var state: String?
    var status: String?
    var transaction: String?
    var code: String?
    /// A seen report's entry for the sensor.
    var rssi: Int?
    var connected: Bool?

    init(_ m: MQTTMessage, at: ContinuousClock.Instant) {
        self.at = at
        topic = m.topic
        payload = m.payloadString
        guard let o = Cluster.object(m) else { return }
        node = o["node"] as? String
        epoch = o["epoch"] as? Int
        handoverTo = o["handover_to"] as? String
        state = o["state"] as? String
        status = o["status"] as? String
        transaction = o["transaction"] as? String
        code = (o["error"] as? [String: Any])?["code"] as? String
        if let s = (o["devices"] as? [String: Any])?[Cluster.address] as? [String: Any] {
            rssi = s["rssi"] as? Int
            connected = s["connected"] as? Bool
        }
    }

    var isClaim: Bool { topic == "gatt2mqtt/bridge/owners/\(Cluster.device)" }
    var isState: Bool { topic.hasPrefix("gatt2mqtt/bridge/nodes/") && topic.hasSuffix("/state") }
    var isReport: Bool { topic.hasPrefix("gatt2mqtt/bridge/nodes/") && topic.hasSuffix("/seen") }
    var isResponse: Bool { topic == "gatt2mqtt/\(Cluster.device)/response" }
    var isFinal: Bool { isResponse && ["ok", "error", "expired"].contains(status ?? "") }
    /// A claim in force by `node` (not a handover note).
    func isClaim(by node: String) -> Bool { isClaim && self.node == node && handoverTo == nil }
}

/// Everything the hub saw, in order, and waits for what it has not seen yet.
final class Timeline: Sendable {
    private struct Waiter {
        let predicate: @Sendable (Seen) -> Bool
        let continuation: CheckedContinuation<Seen?, Never>
    }

    private struct State {
        var events: [Seen] = []
        var waiters: [UInt64: Waiter] = [:]
        var expired: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    var count: Int { state.withLock { $0.events.count } }
    var events: [Seen] { state.withLock { $0.events } }

    func append(_ e: Seen) {
        let ready = state.withLock { s -> [CheckedContinuation<Seen?, Never>] in
            s.events.append(e)
            let matched = s.waiters.filter { $0.value.predicate(e) }
            for id in matched.keys { s.waiters[id] = nil }
            return matched.values.map(\.continuation)
        }
        for c in ready { c.resume(returning: e) }
    }

    /// The first event from index `index` on that satisfies `predicate`, waiting for it at most
    /// `timeout`; nil when none came.
    func first(from index: Int, timeout: Duration, _ predicate: @escaping @Sendable (Seen) -> Bool) async -> Seen? {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        let deadline = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.expire(id)
        }
        defer { deadline.cancel() }
        return await withCheckedContinuation { c in
            let found = state.withLock { s -> Seen?? in
                if let e = s.events[min(index, s.events.count)...].first(where: predicate) { return .some(e) }
                if s.expired.remove(id) != nil { return .some(nil) }
                s.waiters[id] = Waiter(predicate: predicate, continuation: c)
                return .none
            }
            if let found { c.resume(returning: found) }
        }
    }

    private func expire(_ id: UInt64) {
        let waiter = state.withLock { s -> Waiter? in
            guard let w = s.waiters.removeValue(forKey: id) else {
                s.expired.insert(id)
                return nil
            }
            return w
        }
        waiter?.continuation.resume(returning: nil)
    }
}

/// The commands published, in order.
final class SentCommands: Sendable {
    struct Command: Sendable {
        let transaction: String
        /// The bytes written, in hex.
        let value: String
        let at: ContinuousClock.Instant
    }

    let list = Mutex<[Command]>([])

    func add(_ c: Command) { list.withLock { $0.append(c) } }
}

/// One forced handover: what triggered it and when each step was seen by the hub.
struct Handover {
    var index: Int
    var from: String
    var to: String
    var trigger: ContinuousClock.Instant
    /// `paused`: the old owner's Will (node state offline).
    var will: ContinuousClock.Instant?
    /// `rssi`: the old owner's handover note (`handover_to`).
    var note: ContinuousClock.Instant?
    /// The new owner's claim.
    var claim: ContinuousClock.Instant?
    /// The new owner's first `ok` (an `f-` command) after the trigger.
    var firstOK: ContinuousClock.Instant?
    /// The new owner's first answer to a `c-` command the sensor executed (`bluetooth_error`).
    var firstExecuted: ContinuousClock.Instant?
    /// What needed help or went wrong, in words.
    var notes: [String] = []
}

enum HandoverBench {
    enum Kind: String { case killed, paused, rssi }

    static var count: Int? { ProcessInfo.processInfo.environment["GATT2MQTT_HANDOVER_BENCH"].flatMap(Int.init) }
    static var logs: String? { ProcessInfo.processInfo.environment["GATT2MQTT_HANDOVER_BENCH_LOGS"] }

    static func run(_ kind: Kind) async throws {
        let n = try #require(count)
        let rssi = kind == .rssi ? (a: -50, b: -90) : (a: -60, b: -60)
        try await Cluster.run(rssi: rssi, seconds: 3600, simulate: ["--advertising-interval", "0.2"], configure: {
            $0.hysteresis = kind == .rssi ? 6 : 30
            $0.logLevel = ProcessInfo.processInfo.environment["GATT2MQTT_HANDOVER_BENCH_LOG_LEVEL"] ?? "info"
        }) { cluster, hub in
            defer { keepLogs(cluster, kind) }
            let timeline = Timeline()
            var subscriptions: [MQTTSubscription] = []  // kept: a subscription dropped ends
            for filter in ["gatt2mqtt/\(Cluster.device)/response", "gatt2mqtt/\(Cluster.device)/availability", "gatt2mqtt/bridge/owners/\(Cluster.device)",
                           "gatt2mqtt/bridge/nodes/+/state", "gatt2mqtt/bridge/nodes/+/seen"] {
                subscriptions.append(try await hub.subscribe(filter, handler: { m in timeline.append(Seen(m, at: .now)) }))
            }
            defer { withExtendedLifetime(subscriptions) {} }
            let start = ContinuousClock.now
            let sent = SentCommands()
            let continuous = Task {
                var i = 0
                while !Task.isCancelled {
                    i += 1
                    // Two bytes, neither 0 (gdbus prints a byte array ending in 0 as a string).
                    let (tx, value) = ("c-\(i)", String(format: "%02x%02x", i / 255 % 255 + 1, i % 255 + 1))
                    sent.add(.init(transaction: tx, value: value, at: .now))
                    try? await hub.publish(topic: "gatt2mqtt/\(Cluster.device)/set",
                                           payload: Array(#"{"control":"\#(value)","transaction":"\#(tx)"}"#.utf8), qos: .atLeastOnce)
                    try? await Task.sleep(until: start + .milliseconds(100 * i), clock: .continuous)
                }
            }
            let oneAtATime = Task {
                var i = 0
                while !Task.isCancelled {
                    i += 1
                    let tx = "f-\(i)"
                    let mark = timeline.count
                    sent.add(.init(transaction: tx, value: "01", at: .now))
                    try? await hub.publish(topic: "gatt2mqtt/\(Cluster.device)/set",
                                           payload: Array(#"{"control":"01","transaction":"\#(tx)"}"#.utf8), qos: .atLeastOnce)
                    // Its answer; or a new owner's claim after it (the old owner may have taken
                    // the command with it: the next one goes to the new owner); or 10 s.
                    _ = await timeline.first(from: mark, timeout: .seconds(10)) {
                        ($0.isFinal && $0.transaction == tx) || ($0.isClaim && $0.node != nil && $0.handoverTo == nil)
                    }
                    // 10 a second at most, as the other stream: the emulator keeps the newest 10 000 calls.
                    try? await Task.sleep(for: .milliseconds(100))
                }
            }
            var handovers: [Handover] = []
            var aborted: String?
            do {
                guard let first = await timeline.first(from: 0, timeout: .seconds(15), { $0.isClaim && $0.node != nil && $0.handoverTo == nil }),
                      let owner = first.node,
                      await timeline.first(from: 0, timeout: .seconds(15), { $0.status == "ok" && $0.node == owner }) != nil
                else {
                    aborted = "no first owner answering within 15 s"
                    throw CancellationError()
                }
                var state = (owner: owner, epoch: first.epoch ?? 0, stale: -50)
                var previous = ContinuousClock.now
                for i in 1...n {
                    // Each handover from a steady state: the owner caught up with the c- stream
                    // (it answered the latest one), and 2 s at least after the previous handover
                    // (a bridge that just started decides nothing for claim_settle), plus up to
                    // 100 ms at random, so that handovers fall anywhere between two c- commands.
                    if let latest = sent.list.withLock({ $0.last { $0.transaction.hasPrefix("c-") } }),
                       await timeline.first(from: 0, timeout: .seconds(10), { $0.isFinal && $0.transaction == latest.transaction }) == nil {
                        print("handover #\(i): \(latest.transaction) unanswered after 10 s; going on")
                    }
                    try await Task.sleep(until: previous + .seconds(2) + .milliseconds(Int.random(in: 0..<100)), clock: .continuous)
                    var h = try await cycle(kind, i, cluster, timeline, &state)
                    previous = h.trigger
                    h.firstExecuted = timeline.events.first { $0.at > h.trigger && $0.node == h.to && $0.code == "bluetooth_error" }?.at
                    handovers.append(h)
                    print("handover #\(i) \(kind) \(h.from)→\(h.to): claim \(ms(h.claim, h.trigger)), first ok \(ms(h.firstOK, h.trigger))"
                          + (h.notes.isEmpty ? "" : "; \(h.notes.joined(separator: "; "))"))
                    if h.claim == nil || h.firstOK == nil {
                        aborted = "handover #\(i) did not complete"
                        break
                    }
                }
            } catch {
                aborted = aborted ?? "\(error)"
            }
            continuous.cancel()
            oneAtATime.cancel()
            await continuous.value
            await oneAtATime.value
            // Answers still under way: until every command has one, or 5 s without a new one.
            while true {
                let answered = Set(timeline.events.filter(\.isFinal).compactMap(\.transaction))
                if sent.list.withLock({ $0.allSatisfy { answered.contains($0.transaction) } }) { break }
                if await timeline.first(from: timeline.count, timeout: .seconds(5), { $0.isFinal }) == nil { break }
            }
            // The retained claim a node starting now would read, against the claim in force.
            let retained = try await cluster.withClient(on: 0) { late in
                await collect(try await late.subscribe("gatt2mqtt/bridge/owners/\(Cluster.device)"), count: 1, timeout: .seconds(5))
            }.first.map(\.payloadString) ?? "none"
            let claims = timeline.events.filter { $0.isClaim && $0.epoch != nil }
            let inForce = claims.last { $0.epoch == claims.map { $0.epoch! }.max() }
            var report = try tally(kind, n: n, handovers, sent.list.withLock { $0 }, timeline.events, cluster: cluster,
                                   duration: ContinuousClock.now - start, aborted: aborted)
            report += "\n  retained claim at the end: \(retained); the highest claim seen: \(inForce?.payload ?? "none")"
            print(report)
            if let logs {
                try? report.write(toFile: "\(logs)/\(kind)-report.txt", atomically: true, encoding: .utf8)
                // What the hub saw (but the seen reports) and when each command was sent, from the start.
                var lines = timeline.events.filter { !$0.isReport }.map { (at: $0.at, text: "\($0.topic) \($0.payload)") }
                lines += sent.list.withLock { $0 }.map { (at: $0.at, text: "sent \($0.transaction) \($0.value)") }
                lines += handovers.map { (at: $0.trigger, text: "HANDOVER #\($0.index) \(kind) \($0.from)→\($0.to)") }
                try? lines.sorted { $0.at < $1.at }.map { String(format: "%10.3f ", ($0.at - start).seconds) + $0.text }
                    .joined(separator: "\n").write(toFile: "\(logs)/\(kind)-timeline.txt", atomically: true, encoding: .utf8)
            }
            #expect(aborted == nil, "\(aborted ?? "")")
        }
    }

    /// One forced handover of `kind` away from `state.owner`; `state` becomes the new owner's.
    static func cycle(_ kind: Kind, _ i: Int, _ cluster: Cluster, _ timeline: Timeline,
                      _ state: inout (owner: String, epoch: Int, stale: Int)) async throws -> Handover {
        let (old, new) = state.owner == "a" ? (cluster.a!, cluster.b!) : (cluster.b!, cluster.a!)
        let (from, to, epoch) = (old.node, new.node, state.epoch)
        let mark = timeline.count
        var h = Handover(index: i, from: from, to: to, trigger: .now)
        switch kind {
        case .killed:
            await cluster.kill(old)
        case .paused:
            cluster.pause(old)
            h.will = await timeline.first(from: mark, timeout: .seconds(20)) { $0.isState && $0.node == from && $0.state == "offline" }?.at
        case .rssi:
            // The owner's RSSI is the last one it saw before connecting: 15 dB better than that.
            try cluster.setRSSI(new, min(state.stale + 15, -20))
            h.note = await timeline.first(from: mark, timeout: .seconds(20)) { $0.isClaim && $0.node == from && $0.handoverTo == to }?.at
            // The next owner will see it at −80 dBm when it connects, the old one at −90: the next
            // handover back is 15 dB again.
            try cluster.setRSSI(new, -80)
            try cluster.setRSSI(old, -90)
        }
        let claim = await timeline.first(from: mark, timeout: .seconds(20)) { $0.isClaim(by: to) && ($0.epoch ?? 0) > epoch }
        h.claim = claim?.at
        h.firstOK = await timeline.first(from: mark, timeout: .seconds(20)) { $0.status == "ok" && $0.node == to }?.at
        guard let claim else { return h }
        state = (to, claim.epoch ?? epoch + 1, state.stale)

        // The old owner back, seeing the sensor again, ready to take it the next time.
        let back = timeline.count
        switch kind {
        case .killed:
            try cluster.startBridge(old)
        case .paused:
            cluster.resume(old)
        case .rssi:
            break
        }
        if kind != .rssi, await timeline.first(from: back, timeout: .seconds(20), { $0.isState && $0.node == from && $0.state == "online" }) == nil {
            h.notes.append("\(from) not online again within 20 s")
        }
        let sees: @Sendable (Seen) -> Bool = { $0.isReport && $0.node == from && $0.rssi != nil && $0.connected == false }
        if await timeline.first(from: back, timeout: .seconds(5), sees) == nil {
            // Its bluetoothd may still hold the link the killed bridge made: the sensor (connected)
            // does not advertise to that host. Drop it as the link's supervision timeout would.
            h.notes.append("\(from) did not see the sensor within 5 s; link dropped on its host")
            let dropped = timeline.count
            _ = try? old.control.call("DropLink", [Cluster.address])
            if await timeline.first(from: dropped, timeout: .seconds(10), sees) == nil {
                h.notes.append("\(from) still does not see the sensor")
            }
        }
        if kind == .rssi,
           let linked = await timeline.first(from: mark, timeout: .seconds(10), { $0.isReport && $0.node == to && $0.connected == true }) {
            state.stale = linked.rssi ?? -80
        }
        return h
    }

    // MARK: The figures

    static func tally(_ kind: Kind, n: Int, _ handovers: [Handover], _ sent: [SentCommands.Command], _ events: [Seen],
                      cluster: Cluster, duration: Duration, aborted: String?) throws -> String {
        var out: [String] = []
        out.append("== ClusterHandoverBenchmark \(kind): \(handovers.count) of \(n) handovers in \(String(format: "%.0f", duration.seconds)) s"
                   + (aborted.map { " (stopped: \($0))" } ?? ""))
        func stats(_ name: String, _ values: [Duration]) {
            guard !values.isEmpty else { return out.append("  \(name): none") }
            let v = values.map { $0.seconds * 1000 }.sorted()
            let p = { (q: Double) in v[max(0, Int((q * Double(v.count)).rounded(.up)) - 1)] }
            let f = { (x: Double) in String(format: "%.0f", x) }
            out.append("  \(name): median \(f(p(0.5))) ms, p95 \(f(p(0.95))) ms, max \(f(v.last!)) ms (min \(f(v[0])) ms, n \(v.count))")
        }
        let trigger = ["killed": "kill -9", "paused": "SIGSTOP", "rssi": "SetRSSI"][kind.rawValue]!
        if kind == .paused { stats("\(trigger) → Will (node offline)", handovers.compactMap { h in h.will.map { $0 - h.trigger } }) }
        if kind == .rssi { stats("\(trigger) → handover note", handovers.compactMap { h in h.note.map { $0 - h.trigger } }) }
        stats("\(trigger) → new owner's claim", handovers.compactMap { h in h.claim.map { $0 - h.trigger } })
        if kind == .paused { stats("Will → claim", handovers.compactMap { h in h.will.flatMap { w in h.claim.map { $0 - w } } }) }
        if kind == .rssi { stats("note → claim", handovers.compactMap { h in h.note.flatMap { w in h.claim.map { $0 - w } } }) }
        stats("\(trigger) → first ok from the new owner", handovers.compactMap { h in h.firstOK.map { $0 - h.trigger } })
        stats("\(trigger) → first executed c- answer from the new owner", handovers.compactMap { h in h.firstExecuted.map { $0 - h.trigger } })
        let helped = handovers.filter { !$0.notes.isEmpty }
        if !helped.isEmpty { out.append("  notes: " + helped.map { "#\($0.index) \($0.notes.joined(separator: ", "))" }.joined(separator: "; ")) }

        // What the sensor received on each host: value (hex) → count.
        var executed: [String: [String: Int]] = [:]
        for host in cluster.hosts {
            let calls = try host.control.call("Received", [Cluster.address]).components(separatedBy: "'Method'").count - 1
            if calls >= 10_000 { out.append("  WARNING: host \(host.node)'s emulator recorded \(calls) calls, it keeps the newest 10 000 only: the counts below miss the oldest") }
            for w in try host.writes() {
                let hex = w.split(whereSeparator: { " ,[]".contains($0) }).filter { $0.hasPrefix("0x") }.map { $0.dropFirst(2) }.joined()
                executed[hex, default: [:]][host.node, default: 0] += 1
            }
        }
        var finals: [String: [Seen]] = [:]
        for e in events where e.isFinal { finals[e.transaction ?? "", default: []].append(e) }
        func outcome(_ s: Seen) -> String { s.status == "ok" ? "ok" : "\(s.status ?? "?") \(s.code ?? "")" }
        func counts(_ xs: [String]) -> String {
            Dictionary(xs.map { ($0, 1) }, uniquingKeysWith: +).sorted { $0.value > $1.value }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        }
        func when(_ at: ContinuousClock.Instant) -> String {
            guard let h = handovers.last(where: { $0.trigger <= at }) else { return "before the first handover" }
            return String(format: "%+.0f", (at - h.trigger).seconds * 1000) + " ms from #\(h.index)'s \(trigger) (\(h.from)→\(h.to))"
        }

        let c = sent.filter { $0.transaction.hasPrefix("c-") }
        var once = 0, lost: [String] = [], dup: [String] = [], notDone: [String] = [], notDoneDetail: [String] = [], doubleAnswer: [String] = []
        for cmd in c {
            let hosts = executed[cmd.value] ?? [:]
            let times = hosts.values.reduce(0, +)
            let answers = finals[cmd.transaction] ?? []
            if answers.count > 1 { doubleAnswer.append("\(cmd.transaction) \(answers.map { "\(outcome($0)) by \($0.node ?? "?")" })") }
            switch times {
            case 1: once += 1
            case 0:
                if let a = answers.first, a.status != "ok" {
                    notDone.append(outcome(a))
                    notDoneDetail.append("\(cmd.transaction) (\(outcome(a)) by \(a.node ?? "?"), published \(when(cmd.at)))")
                } else {
                    lost.append("\(cmd.transaction) (\(answers.first.map { "answered \(outcome($0)) by \($0.node ?? "?")" } ?? "unanswered"), published \(when(cmd.at)))")
                }
            default:
                dup.append("\(cmd.transaction) executed \(hosts) , answers \(answers.map { "\(outcome($0)) by \($0.node ?? "?") at \(when($0.at))" }), published \(when(cmd.at))")
            }
        }
        out.append("  c- (one every 100 ms, own value): \(c.count) published; executed once \(once); executed more than once \(dup.count); "
                   + "not executed and answered with an error \(notDone.count)\(notDone.isEmpty ? "" : " (\(counts(notDone)))"); "
                   + "not executed, no error (lost) \(lost.count)")
        out.append("    answers: \(counts(c.map { finals[$0.transaction]?.first.map(outcome) ?? "unanswered" }))")
        if !notDoneDetail.isEmpty {
            out.append("    not executed, answered: " + notDoneDetail.prefix(20).joined(separator: "; ") + (notDoneDetail.count > 20 ? "; …" : ""))
        }
        if !lost.isEmpty { out.append("    lost: " + lost.joined(separator: "; ")) }
        if !dup.isEmpty { out.append("    DUPLICATED: " + dup.joined(separator: "; ")) }
        if !doubleAnswer.isEmpty { out.append("    answered twice: " + doubleAnswer.joined(separator: "; ")) }

        let f = sent.filter { $0.transaction.hasPrefix("f-") }
        let oks = f.compactMap { finals[$0.transaction]?.first }.filter { $0.status == "ok" }
        let okBy = Dictionary(oks.map { ($0.node ?? "?", 1) }, uniquingKeysWith: +)
        let writesOf01 = executed["01"] ?? [:]
        out.append("  f- (one at a time, 01): \(f.count) published; answers: \(counts(f.map { finals[$0.transaction]?.first.map(outcome) ?? "unanswered" }))")
        out.append("    writes of 01 by host: \(writesOf01.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")) "
                   + "(total \(writesOf01.values.reduce(0, +))); ok by node: \(okBy.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
        let fNotAnsweredOK = f.filter { finals[$0.transaction]?.first?.status != "ok" }
        if !fNotAnsweredOK.isEmpty {
            out.append("    f- not ok: " + fNotAnsweredOK.map { "\($0.transaction) (\(finals[$0.transaction]?.first.map { "\(outcome($0)) by \($0.node ?? "?")" } ?? "unanswered"), published \(when($0.at)))" }.joined(separator: "; "))
        }
        return out.joined(separator: "\n")
    }

    static func ms(_ t: ContinuousClock.Instant?, _ since: ContinuousClock.Instant) -> String {
        t.map { String(format: "%.0f ms", ($0 - since).seconds * 1000) } ?? "—"
    }

    /// The bridges' and broker's logs into GATT2MQTT_HANDOVER_BENCH_LOGS, if set.
    static func keepLogs(_ cluster: Cluster, _ kind: Kind) {
        guard let dir = logs else { return }
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for host in cluster.hosts {
            try? FileManager.default.removeItem(atPath: "\(dir)/\(kind)-\(host.node).log")
            try? FileManager.default.copyItem(atPath: host.log, toPath: "\(dir)/\(kind)-\(host.node).log")
        }
        try? cluster.broker.log.write(toFile: "\(dir)/\(kind)-mosquitto.log", atomically: true, encoding: .utf8)
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
