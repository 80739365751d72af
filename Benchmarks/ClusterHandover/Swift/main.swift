// The cluster handover benchmark's hub (issue 14's figures, docs/scale-out.md "Figures"): N forced
// handovers on a two-node cluster (one broker), commands sent all along, and what became of each
// command. Run via ../run.sh, which starts mosquitto and the two emulators (`gatt2mqtt simulate`),
// writes the nodes' configurations and stops every process it started; this program starts,
// kills, stops and continues the two bridges (`gatt2mqtt run`) and kills them at the end.
//   handover-bench KIND COUNT PORT GATT2MQTT WORK
// KIND, one at a time:
// - `killed`: kill -9 of the owner (its socket closes: the broker sends its Will at once), then
//   it starts again.
// - `paused`: SIGSTOP of the owner (the socket stays open: the Will comes when the keep-alive
//   runs out, 1.5 × 5 s), then SIGCONT once the other node has claimed the sensor.
// - `rssi`: the emulators' RSSI change so that the other node sees the sensor 15 dB better: the
//   owner hands it over (a voluntary handover).
// In `killed` and `paused` both emulators see the sensor at −60 dBm and the nodes' hysteresis is
// 30 dB (run.sh), so that only the owner's death moves it. Two streams of commands run throughout:
// - one every 100 ms (`c-N`), each writing its own two bytes (N in base 255, digits 1…255) to
//   the control point 2A39, so that the emulators' records (`Received`) tell which command each
//   write was. The emulated sensor records a write, then refuses any value but 01 with ATT error
//   0x80: a `c-` command the sensor executed ends `error`, code `bluetooth_error`.
// - one at a time (`f-N`), writing 01 (ends `ok`), each sent 100 ms after the previous one
//   ended, or after a claim came after it (the old owner may have taken it with it), or 10 s.
// WORK holds `a.bus`, `a.yaml`, `b.bus`, `b.yaml` (run.sh's); the bridges' logs go to
// `WORK/a.log` and `WORK/b.log`. BENCH_LOG_LEVEL: the bridges' log level (default info);
// BENCH_LOGS=DIR: the report and the hub's timeline are written there too.
import Foundation
import Mosquitto
import Reactor

enum Kind: String { case killed, paused, rssi }

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

/// The two nodes, their bridges and the hub's view of the cluster.
struct Cluster: Sendable {
    let a: Node
    let b: Node
    let bridges: Bridges
    let port: Int
    var nodes: [Node] { [a, b] }

    /// `rssi` for `node`'s emulator (`SetRSSI(s, n)`).
    func setRSSI(_ node: Node, _ dBm: Int) throws { try node.control("SetRSSI", [Sensor.address, "@n \(dBm)"]) }

    /// A connected MQTT 5 client of the broker on `loop`.
    func client(_ loop: EventLoop, _ id: String) async throws -> MQTTClient {
        let client = try MQTTClient(options: MQTTConnectOptions(host: "127.0.0.1", port: port, clientID: "\(id)-\(getpid())",
                                                                protocolVersion: .v5), loop: loop)
        try await client.connect()
        return client
    }
}

/// Runs `count` handovers of `kind`; true when all completed.
func bench(_ kind: Kind, count n: Int, _ cluster: Cluster, logs: String?) async throws -> Bool {
    let loop = EventLoop(name: "handover-hub")
    defer { loop.shutdown() }
    let hub = try await cluster.client(loop, "handover-bench")
    do {
        let completed = try await measure(kind, count: n, cluster, hub: hub, loop: loop, logs: logs)
        await hub.disconnect()
        return completed
    } catch {
        await hub.disconnect()
        throw error
    }
}

/// The benchmark proper, with the hub's client connected on `loop`: prints the report.
func measure(_ kind: Kind, count n: Int, _ cluster: Cluster, hub: MQTTClient, loop: EventLoop, logs: String?) async throws -> Bool {
    let timeline = Timeline()
    var subscriptions: [MQTTSubscription] = []  // kept: a subscription dropped ends
    for filter in ["gatt2mqtt/\(Sensor.device)/response", "gatt2mqtt/\(Sensor.device)/availability", "gatt2mqtt/bridge/owners/\(Sensor.device)",
                   "gatt2mqtt/bridge/nodes/+/state", "gatt2mqtt/bridge/nodes/+/seen"] {
        subscriptions.append(try await hub.subscribe(filter, handler: { m in timeline.append(Seen(m, at: .now)) }))
    }
    defer { withExtendedLifetime(subscriptions) {} }

    // Both bridges online (their retained node states) before anything else.
    for node in cluster.nodes { try cluster.bridges.start(node) }
    for node in cluster.nodes {
        let name = node.name
        if await timeline.first(from: 0, timeout: .seconds(15), { $0.isState && $0.node == name && $0.state == "online" }) != nil { continue }
        let log = ((try? String(contentsOfFile: node.log, encoding: .utf8)) ?? "").suffix(2000)
        throw BenchError("node \(node.name) not online within 15 s (\(cluster.bridges.isRunning(node) ? "still running" : "exited")); its log ends:\n\(log)")
    }

    let start = ContinuousClock.now
    let sent = SentCommands()
    let continuous = Task {
        var i = 0
        while !Task.isCancelled {
            i += 1
            // Two bytes, neither 0 (gdbus prints a byte array ending in 0 as a string).
            let (tx, value) = ("c-\(i)", String(format: "%02x%02x", i / 255 % 255 + 1, i % 255 + 1))
            sent.add(.init(transaction: tx, value: value, at: .now))
            try? await hub.publish(topic: "gatt2mqtt/\(Sensor.device)/set",
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
            try? await hub.publish(topic: "gatt2mqtt/\(Sensor.device)/set",
                                   payload: Array(#"{"control":"01","transaction":"\#(tx)"}"#.utf8), qos: .atLeastOnce)
            // Its answer; or a new owner's claim after it (the old owner may have taken the
            // command with it: the next one goes to the new owner); or 10 s.
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
            // Each handover from a steady state: the owner caught up with the c- stream (it
            // answered the latest one), and 2 s at least after the previous handover (a bridge
            // that just started decides nothing for claim_settle), plus up to 100 ms at random,
            // so that handovers fall anywhere between two c- commands.
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
            fflush(nil)  // as it happens, also into a pipe
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
    let late = try await cluster.client(loop, "handover-bench-late")
    let lateSeen = Timeline()
    let lateClaim = try await late.subscribe("gatt2mqtt/bridge/owners/\(Sensor.device)", handler: { m in lateSeen.append(Seen(m, at: .now)) })
    let retained = await lateSeen.first(from: 0, timeout: .seconds(5)) { _ in true }?.payload ?? "none"
    withExtendedLifetime(lateClaim) {}
    await late.disconnect()
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
    return aborted == nil
}

/// One forced handover of `kind` away from `state.owner`; `state` becomes the new owner's.
func cycle(_ kind: Kind, _ i: Int, _ cluster: Cluster, _ timeline: Timeline,
           _ state: inout (owner: String, epoch: Int, stale: Int)) async throws -> Handover {
    let (old, new) = state.owner == cluster.a.name ? (cluster.a, cluster.b) : (cluster.b, cluster.a)
    let (from, to, epoch) = (old.name, new.name, state.epoch)
    let mark = timeline.count
    var h = Handover(index: i, from: from, to: to, trigger: .now)
    switch kind {
    case .killed:
        cluster.bridges.kill(old)
    case .paused:
        cluster.bridges.pause(old)
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
        try cluster.bridges.start(old)
    case .paused:
        cluster.bridges.resume(old)
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
        _ = try? old.control("DropLink", [Sensor.address])
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

func ms(_ t: ContinuousClock.Instant?, _ since: ContinuousClock.Instant) -> String {
    t.map { String(format: "%.0f ms", ($0 - since).seconds * 1000) } ?? "—"
}

let arguments = CommandLine.arguments
guard arguments.count == 6, let kind = Kind(rawValue: arguments[1]), let count = Int(arguments[2]), count > 0,
      let port = Int(arguments[3])
else {
    FileHandle.standardError.write(Data("usage: handover-bench killed|paused|rssi COUNT PORT GATT2MQTT WORK\n".utf8))
    exit(2)
}
let environment = ProcessInfo.processInfo.environment
let bridges = Bridges(executable: arguments[4], logLevel: environment["BENCH_LOG_LEVEL"] ?? "info")
var completed = false
do {
    let cluster = Cluster(a: try Node("a", work: arguments[5]), b: try Node("b", work: arguments[5]), bridges: bridges, port: port)
    do {
        completed = try await bench(kind, count: count, cluster, logs: environment["BENCH_LOGS"])
    } catch {
        print("handover-bench: \(error)")
    }
    bridges.killAll(cluster.nodes)
} catch {
    print("handover-bench: \(error)")
}
exit(completed ? 0 : 1)
