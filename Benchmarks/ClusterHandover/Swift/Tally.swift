import Foundation

// MARK: The figures

/// The report of a run: the handover times (median, p95, max), then what became of every command
/// (the emulators' records of the writes against the answers the hub saw).
func tally(_ kind: Kind, n: Int, _ handovers: [Handover], _ sent: [SentCommands.Command], _ events: [Seen],
           cluster: Cluster, duration: Duration, aborted: String?) throws -> String {
    var out: [String] = []
    out.append("== cluster handover benchmark, \(kind): \(handovers.count) of \(n) handovers in \(String(format: "%.0f", duration.seconds)) s"
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
    for node in cluster.nodes {
        let calls = try node.control("Received", [Sensor.address]).components(separatedBy: "'Method'").count - 1
        if calls >= 10_000 { out.append("  WARNING: host \(node.name)'s emulator recorded \(calls) calls, it keeps the newest 10 000 only: the counts below miss the oldest") }
        for w in try node.writes() {
            let hex = w.split(whereSeparator: { " ,[]".contains($0) }).filter { $0.hasPrefix("0x") }.map { $0.dropFirst(2) }.joined()
            executed[hex, default: [:]][node.name, default: 0] += 1
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
