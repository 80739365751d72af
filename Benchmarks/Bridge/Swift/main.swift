// The bridge benchmark's hub side: talks MQTT only, to a `gatt2mqtt run` process that drives
// `gatt2mqtt simulate` (emulated BlueZ on a private bus). Run via ../run.sh, which starts and
// stops every process. Measures, for commands whose device answers at once:
// The hub publishes with `publishDetached` (no wait for the write) and is driven from its
// subscriptions' handlers (timestamps taken and the next command sent where a message arrives),
// so that the hub itself adds as little as it can to the round trip.
//   - round trip: publish to <base>/<device>/set → terminal `ok` on <base>/<device>/response
//     (p50/p99), and the state telemetry on <base>/<device> that the answer produces;
//   - sustained commands/s with 1 and with 8 commands in flight (one device, and 8 devices);
//   - the bridge's CPU time per command (its threads' run time, /proc/PID/task/*/schedstat) and its peak RSS;
//   - idle: the bridge's CPU and RSS over a quiet window with every device connected.
// BENCH_PROFILE=shutter is the floor comparison (../run.sh): `set_shutter` to GoPros that only
// answer, the work `Benchmarks/Floor/floor_bridge.c` does, so BRIDGE_PID may be the floor's;
// the round trip ends at `ok` (no state changes), and the figures end with one `RESULT` line
// (key=value) for run.sh to compare: sleeps (voluntary context switches of all the process'
// threads) and, when `perf` is installed, system calls per command in the round trips.
//   bridge-bench PORT BRIDGE_PID COMMANDS DEVICE[,DEVICE…] [IDLE_SECONDS]
import Foundation
import Mosquitto
import Reactor
import Synchronization

let arguments = CommandLine.arguments
guard arguments.count >= 5, let port = Int(arguments[1]), let bridgePID = Int32(arguments[2]),
    let commands = Int(arguments[3])
else {
    FileHandle.standardError.write(Data("usage: bridge-bench PORT BRIDGE_PID COMMANDS DEVICE[,DEVICE…] [IDLE_SECONDS]\n".utf8))
    exit(2)
}
let devices = arguments[4].split(separator: ",").map(String.init)
let idleSeconds = arguments.count > 5 ? Double(arguments[5]) ?? 0 : 0
let clock = ContinuousClock()
let base = "gatt2mqtt"

@Sendable func microseconds(_ d: Duration) -> Double {
    Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
}

/// CPU seconds of a process: the time its threads ran, in nanoseconds, from the first field of
/// /proc/PID/task/*/schedstat (/proc/PID/stat's utime + stime count 10 ms ticks: too coarse for
/// a few thousand commands of tens of microseconds).
func cpuSeconds(_ pid: Int32) -> Double {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return .nan }
    var ns = 0.0
    for task in tasks {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8) else { continue }
        ns += Double(text.split(separator: " ").first ?? "") ?? 0
    }
    return ns / 1e9
}

/// A `VmHWM`/`VmRSS`/`RssAnon`/`RssFile` line of /proc/PID/status, in MiB.
func memoryMiB(_ pid: Int32, _ key: String) -> Double {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return .nan }
    for line in status.split(separator: "\n") where line.hasPrefix(key + ":") {
        let kib = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Double($0) }
        return (kib ?? .nan) / 1024
    }
    return .nan
}

/// Voluntary context switches (sleeps) of every thread of a process, from /proc/PID/task/*/status.
func sleeps(_ pid: Int32) -> Double {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return .nan }
    var total = 0.0
    for task in tasks {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else { continue }
        for line in status.split(separator: "\n") where line.hasPrefix("voluntary_ctxt_switches:") {
            total += Double(line.split(separator: "\t").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "") ?? 0
        }
    }
    return total
}

/// Counts the system calls of `pid` while it runs (`perf stat -e raw_syscalls:sys_enter`), and its
/// calls to libc's malloc when BENCH_MALLOC_PROBE=1 (after `perf probe -x …/libc.so.6 --add
/// malloc`); nil when perf is not installed or may not trace. `stop()` returns the counts.
final class SyscallCounter {
    let process = Process()
    let output: String
    init?(_ pid: Int32) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/perf") else { return nil }
        output = NSTemporaryDirectory() + "bridge-bench-perf-\(getpid())-\(pid).csv"
        // Stopped with SIGINT, which a job started in the background by a script inherits as
        // ignored (and Foundation starts it with the spawning thread's blocked signals): python3
        // unblocks it and puts its default back before it becomes perf.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
                             "/usr/bin/perf", "stat", "-x", ",", "-e", Self.events.joined(separator: ","), "-o", output, "-p", String(pid)]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        usleep(300_000)  // perf attaches before the measured commands start
    }
    static let events = ["raw_syscalls:sys_enter"]
        + (ProcessInfo.processInfo.environment["BENCH_MALLOC_PROBE"] == "1" ? ["probe_libc:malloc"] : [])

    func stop() -> (syscalls: Double, mallocs: Double?)? {
        process.interrupt()
        for _ in 0..<50 where process.isRunning { usleep(100_000) }
        if process.isRunning { process.terminate(); return nil }
        defer { try? FileManager.default.removeItem(atPath: output) }
        guard let text = try? String(contentsOfFile: output, encoding: .utf8) else { return nil }
        func count(_ event: String) -> Double? {
            text.split(separator: "\n").first { $0.contains(event) }.flatMap { Double($0.split(separator: ",").first ?? "") }
        }
        guard let syscalls = count("raw_syscalls:sys_enter") else { return nil }
        return (syscalls, count("probe_libc:malloc"))
    }
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// The transaction and status at the start of a lifecycle payload
/// (`{"transaction":"…","status":"…",…}`, the bridge's member order).
@Sendable func lifecycle(_ payload: [UInt8]) -> (transaction: Substring, status: Substring)? {
    guard let text = String(validating: payload, as: UTF8.self) else { return nil }
    let parts = text.split(separator: "\"", maxSplits: 8, omittingEmptySubsequences: false)
    guard parts.count > 7, parts[1] == "transaction", parts[5] == "status" else { return nil }
    return (parts[3], parts[7])
}

/// Everything runs in this one function: its local state belongs to one task.
func bench() async throws -> Int {
    var options = MQTTConnectOptions(host: "127.0.0.1", port: port)
    options.clientID = "bridge-bench-\(getpid())"
    options.maxInflightMessages = 100
    options.inboundBufferLimit = 100_000
    let hub = try MQTTClient(options: options, loop: hubLoop)
    try await hub.connect()

    // Every device online (availability retained) before measuring.
    let availability = try await hub.subscribe("\(base)/+/availability", qos: .atLeastOnce)
    var online = Set<String>()
    let waitStart = clock.now
    for await message in availability {
        let device = message.topic.split(separator: "/")[1]
        if String(decoding: message.payload, as: UTF8.self).contains("online") { online.insert(String(device)) }
        if devices.allSatisfy(online.contains) { break }
        if clock.now - waitStart > .seconds(60) { fatalError("devices not online after 60 s: \(online)") }
    }
    try await hub.unsubscribe("\(base)/+/availability")

    /// A command each device answers at once; alternating values so that each one changes state.
    /// GoPro: a setting (the camera answers on GP-0075 and pushes the new value on GP-0077);
    /// Rokid: brightness (REQUEST → RESPONSE); otherwise the layout device's raw control write.
    let profile = ProcessInfo.processInfo.environment["BENCH_PROFILE"] ?? "gopro"
    /// The shutter answers with no state change: the round trip ends at `ok`.
    let waitsForState = profile != "shutter"
    @Sendable func payload(_ n: Int) -> [UInt8] {
        switch profile {
        // Shutter off: a camera that pushes nothing keeps the `encoding` the bridge read at connect,
        // and only shutter-off passes the GoPro's busy gate whatever it is (gopro.md §9).
        case "shutter": return Array(#"{"command":"set_shutter","value":false,"transaction":"t\#(n)"}"#.utf8)
        case "rokid": return Array(#"{"command":"set_brightness","value":\#(n % 2 == 0 ? 3 : 9),"transaction":"t\#(n)"}"#.utf8)
        default: return Array(#"{"setting":"video_resolution","value":\#(n % 2 == 0 ? 1 : 4),"transaction":"t\#(n)"}"#.utf8)
        }
    }

    // The hub is driven from the MQTT client's message handlers (they run on its loop, where
    // the message arrives): the time is taken there and the next command leaves from there, so the hub adds
    // no hand-off between threads to what it measures.
    struct Run {
        enum Mode { case idle, roundTrip, sustained }
        var mode = Mode.idle
        var count = 0, warmUp = 0, window = 1, targets: [String] = []
        var sent = 0, done = 0, sequence = 0, failures = 0
        var start = ContinuousClock.now, okAt: ContinuousClock.Instant?, stateAt: ContinuousClock.Instant?
        var ok: [Double] = [], state: [Double] = []
        var finished: CheckedContinuation<Void, Never>?
    }
    let run = Mutex(Run())

    /// Sends the next command (round trip: to the first device; sustained: round-robin).
    @Sendable func sendNext(_ r: inout Run) {
        r.sequence += 1
        let device = r.mode == .roundTrip ? devices[0] : r.targets[r.sent % r.targets.count]
        r.sent += 1
        if r.mode == .roundTrip {
            r.start = clock.now
            r.okAt = nil
            r.stateAt = nil
        }
        hub.publishDetached(topic: "\(base)/\(device)/set", payload: payload(r.sequence), qos: .atMostOnce) { _ in }
    }

    /// A round trip is complete with its `ok` and its state telemetry.
    @Sendable func roundTripStep(_ r: inout Run) -> CheckedContinuation<Void, Never>? {
        guard let okAt = r.okAt, let stateAt = waitsForState ? r.stateAt : okAt else { return nil }
        if r.sent > r.warmUp {
            r.ok.append(microseconds(okAt - r.start))
            r.state.append(microseconds(stateAt - r.start))
        }
        r.done += 1
        if r.done >= r.count + r.warmUp {
            r.mode = .idle
            defer { r.finished = nil }
            return r.finished
        }
        sendNext(&r)
        return nil
    }

    let responses = try await hub.subscribe("\(base)/+/response", qos: .atLeastOnce) { message in
        let now = clock.now
        guard let (_, status) = lifecycle(message.payload), status != "queued", status != "sent" else { return }
        let resume = run.withLock { r -> CheckedContinuation<Void, Never>? in
            if status != "ok" {
                r.failures += 1
                if r.failures <= 3 { print("  not ok: \(String(decoding: message.payload, as: UTF8.self))") }
            }
            switch r.mode {
            case .idle: return nil
            case .roundTrip:
                r.okAt = now
                return roundTripStep(&r)
            case .sustained:
                r.done += 1
                if r.done >= r.count {
                    r.mode = .idle
                    defer { r.finished = nil }
                    return r.finished
                }
                if r.sent < r.count { sendNext(&r) }
                return nil
            }
        }
        resume?.resume()
    }
    let states = try await hub.subscribe("\(base)/\(devices[0])", qos: .atMostOnce) { message in
        let now = clock.now
        let resume = run.withLock { r -> CheckedContinuation<Void, Never>? in
            guard waitsForState, r.mode == .roundTrip, r.stateAt == nil else { return nil }
            r.stateAt = now
            return roundTripStep(&r)
        }
        resume?.resume()
    }
    try await Task.sleep(for: .milliseconds(200))  // the retained state has arrived (mode idle: ignored)

    /// One command at a time: round-trip latency to `ok`, and to the state telemetry it causes.
    func roundTrips(_ count: Int, warmUp: Int) async
        -> (ok: [Double], state: [Double], seconds: Double, cpu: Double, sleeps: Double, syscalls: Double?, mallocs: Double?)
    {
        var cpuStart = 0.0, sleepsStart = 0.0
        var wallStart = clock.now
        var counter: SyscallCounter?
        // Warm-up first, then the measured run (CPU and wall time cover the measured part only).
        for (n, w, measured) in [(warmUp, 0, false), (count, 0, true)] where n > 0 {
            if measured {
                if profile == "shutter" { counter = SyscallCounter(bridgePID) }
                cpuStart = cpuSeconds(bridgePID); sleepsStart = sleeps(bridgePID); wallStart = clock.now
            }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                run.withLock { r in
                    r.mode = .roundTrip
                    (r.count, r.warmUp, r.sent, r.done) = (n, w, 0, 0)
                    if !measured { r.warmUp = 0 }
                    r.finished = c
                    sendNext(&r)
                }
            }
            if !measured { run.withLock { $0.ok = []; $0.state = [] } }
        }
        let (ok, state) = run.withLock { ($0.ok, $0.state) }
        let (seconds, cpu, slept) = (microseconds(clock.now - wallStart) / 1e6, cpuSeconds(bridgePID) - cpuStart, sleeps(bridgePID) - sleepsStart)
        let counted = counter?.stop()
        return (ok.sorted(), state.sorted(), seconds, cpu, slept, counted?.syscalls, counted?.mallocs)
    }

    /// `window` commands in flight, spread round-robin over `targets`, until `count` completed.
    func sustained(_ count: Int, window: Int, targets: [String]) async -> (perSecond: Double, cpu: Double) {
        let cpuStart = cpuSeconds(bridgePID)
        let start = clock.now
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            run.withLock { r in
                r.mode = .sustained
                (r.count, r.window, r.targets, r.sent, r.done) = (count, window, targets, 0, 0)
                r.finished = c
                while r.sent < min(window, count) { sendNext(&r) }
            }
        }
        let seconds = microseconds(clock.now - start) / 1e6
        return (Double(count) / seconds, cpuSeconds(bridgePID) - cpuStart)
    }

    func f(_ v: Double) -> String { String(format: "%.1f", v) }

    print("bridge-bench: \(commands) commands, profile \(profile), devices \(devices.joined(separator: ","))")
    let rt = await roundTrips(commands, warmUp: min(200, commands / 10))
    print("round trip, 1 in flight   ok p50 \(f(percentile(rt.ok, 0.5))) µs  p99 \(f(percentile(rt.ok, 0.99))) µs"
          + " | state p50 \(f(percentile(rt.state, 0.5))) µs  p99 \(f(percentile(rt.state, 0.99))) µs")
    print("  \(String(format: "%.0f", Double(commands) / rt.seconds)) commands/s, CPU \(f(rt.cpu / Double(commands) * 1e6)) µs/command,"
          + " \(String(format: "%.2f", rt.sleeps / Double(commands))) sleeps/command"
          + (rt.syscalls.map { ", \(String(format: "%.1f", $0 / Double(commands))) system calls/command" } ?? "")
          + (rt.mallocs.map { ", \(String(format: "%.1f", $0 / Double(commands))) mallocs/command" } ?? ""))
    try await hub.unsubscribe("\(base)/\(devices[0])")
    let one = await sustained(commands, window: 1, targets: [devices[0]])
    print("sustained, 1 in flight     \(String(format: "%6.0f", one.perSecond)) commands/s  CPU \(f(one.cpu / Double(commands) * 1e6)) µs/command")
    let eight = await sustained(commands, window: 8, targets: [devices[0]])
    print("sustained, 8 in flight     \(String(format: "%6.0f", eight.perSecond)) commands/s  CPU \(f(eight.cpu / Double(commands) * 1e6)) µs/command  (one device)")
    let sameProfile = devices.filter { $0.hasPrefix(devices[0].prefix(while: { !$0.isNumber })) }
    var spread: (perSecond: Double, cpu: Double)?
    if sameProfile.count >= 2 {
        let s = await sustained(commands, window: 8, targets: Array(sameProfile.prefix(8)))
        spread = s
        print("sustained, 8 in flight     \(String(format: "%6.0f", s.perSecond)) commands/s  CPU \(f(s.cpu / Double(commands) * 1e6)) µs/command  (\(min(8, sameProfile.count)) devices)")
    }
    let failures = run.withLock { $0.failures }
    print("bridge peak RSS \(f(memoryMiB(bridgePID, "VmHWM"))) MiB (now: anonymous \(f(memoryMiB(bridgePID, "RssAnon"))),"
          + " file \(f(memoryMiB(bridgePID, "RssFile"))) MiB), failures \(failures)")

    var idleCPU: Double?  // % of a core
    if idleSeconds > 0 {
        try await Task.sleep(for: .seconds(2))
        let cpuStart = cpuSeconds(bridgePID)
        try await Task.sleep(for: .seconds(idleSeconds))
        let cpu = cpuSeconds(bridgePID) - cpuStart
        print("idle \(Int(idleSeconds)) s with \(devices.count) devices: RSS \(f(memoryMiB(bridgePID, "VmRSS"))) MiB"
              + " (anonymous \(f(memoryMiB(bridgePID, "RssAnon"))), file \(f(memoryMiB(bridgePID, "RssFile")))),"
              + " CPU \(String(format: "%.2f", cpu / idleSeconds * 100)) % of a core")
        idleCPU = cpu / idleSeconds * 100
    }
    if profile == "shutter" {
        // One line for run.sh: CPU in µs per command, latency in µs, memory in MiB (peak: the
        // whole run, idle included), idle CPU in % of a core.
        let perCommand = { (seconds: Double) in seconds / Double(commands) * 1e6 }
        var fields: [(String, Double)] = [
            ("p50", percentile(rt.ok, 0.5)), ("p99", percentile(rt.ok, 0.99)), ("cpu1", perCommand(rt.cpu)),
            ("sleeps1", rt.sleeps / Double(commands)), ("rate1", one.perSecond), ("cpu1s", perCommand(one.cpu)),
            ("hwm", memoryMiB(bridgePID, "VmHWM")), ("anon", memoryMiB(bridgePID, "RssAnon")), ("file", memoryMiB(bridgePID, "RssFile")),
        ]
        if let n = rt.syscalls { fields.append(("syscalls1", n / Double(commands))) }
        if let n = rt.mallocs { fields.append(("mallocs1", n / Double(commands))) }
        if let s = spread { fields += [("rate8", s.perSecond), ("cpu8", perCommand(s.cpu))] }
        if let idle = idleCPU { fields += [("idlecpu", idle), ("idlerss", memoryMiB(bridgePID, "VmRSS"))] }
        fields.append(("failures", Double(run.withLock { $0.failures })))
        print("RESULT " + fields.map { "\($0.0)=\(String(format: "%.2f", $0.1))" }.joined(separator: " "))
    }

    withExtendedLifetime((responses, states)) {}
    await hub.disconnect()
    return failures
}

/// The hub's MQTT client runs here (its handlers too).
let hubLoop = EventLoop(name: "bench-hub")
let failures = try await bench()
hubLoop.shutdown()
exit(failures == 0 ? 0 : 1)
