import Foundation
import TestSupport
import Mosquitto
import Reactor
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `scripts/run`, the demo a new user starts first (README): a signal to the script alone stops
/// every process it started (issue 12: "Stopping scripts/run with SIGINT … left the emulator and
/// mosquitto running"). The script runs the debug binary (`GATT2MQTT_RUN_BINARY`, no setup and no
/// release build) with its broker on a free port (`GATT2MQTT_RUN_MQTT_PORT`).
@Suite(.serialized, .timeLimit(.minutes(6))) struct DemoScriptTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// A process as it was when the script reported it: its pid and its start time (field 22 of
    /// `/proc/PID/stat`), so a pid the kernel hands out again later is not taken for it.
    struct Tracked: Sendable, CustomStringConvertible {
        var pid: pid_t
        var role: String
        var startTime: String
        /// Its command line when first seen, arguments joined by spaces.
        var commandLine: String

        init?(pid: pid_t, role: String) {
            guard let fields = Self.statFields(pid) else { return nil }
            self.pid = pid
            self.role = role
            startTime = String(fields[19])
            commandLine = Self.commandLine(pid)
        }

        /// The command line of `pid` now ("" once it is gone).
        static func commandLine(_ pid: pid_t) -> String {
            let data = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
            return String(decoding: data, as: UTF8.self).split(separator: "\0").joined(separator: " ")
        }

        /// The fields after `(comm)`: state first, start time at index 19.
        static func statFields(_ pid: pid_t) -> [Substring]? {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = text.lastIndex(of: ")") else { return nil }
            return text[text.index(after: close)...].split(separator: " ")
        }

        /// Still this process, and not a zombie.
        var isAlive: Bool {
            guard let fields = Self.statFields(pid) else { return false }
            return fields[19] == startTime && fields[0] != "Z"
        }

        var description: String { "\(role) (pid \(pid)): \(commandLine)" }
    }

    /// Processes by pid, shared with the watcher task.
    final class Seen: Sendable {
        let processes = Mutex<[pid_t: Tracked]>([:])
    }

    /// The running script: its pid, its output file, its temporary directory, and every process
    /// seen below it (polled from `/proc` every 5 ms while it runs: helpers such as `sleep`
    /// included).
    final class DemoScript {
        let directory: TemporaryDirectory
        let pid: pid_t
        private(set) var exited = false
        private let seen = Seen()
        private var watcher: Task<Void, Never>?

        /// - Parameter binary: what the script runs as `gatt2mqtt` (default: the debug build);
        ///   `makeBinary` writes it into the script's directory first.
        init(port: Int, makeBinary: ((TemporaryDirectory) throws -> String)? = nil) throws {
            directory = try TemporaryDirectory()
            var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("GATT2MQTT_") }
            environment["GATT2MQTT_RUN_BINARY"] = try makeBinary?(directory) ?? CLI.executable.path
            environment["GATT2MQTT_RUN_MQTT_PORT"] = String(port)
            // The web frontend on a port of its own (not 8080, which another demo may hold).
            environment["GATT2MQTT_RUN_FRONTEND_PORT"] = String(try freeLoopbackPort())
            // The bridge's own override: the demo's database in the test's directory, not the checkout.
            environment["GATT2MQTT_DATABASE_PATH"] = directory.path + "/demo.sqlite"
            environment["SWIFT_BACKTRACE"] = "enable=no"
            let pid = try spawn("/bin/bash", [DemoScriptTests.root.appendingPathComponent("scripts/run").path],
                                log: directory.path + "/run.out", environment: environment)
            self.pid = pid
            let seen = seen
            watcher = Task.detached {
                while !Task.isCancelled {
                    for child in DemoScriptTests.descendants(of: pid) {
                        guard let process = Tracked(pid: child, role: "descendant") else { continue }
                        // Again after an exec (same pid and start time, a new command line).
                        guard !process.commandLine.isEmpty else { continue }
                        seen.processes.withLock { $0[child] = process }
                    }
                    try? await Task.sleep(for: .milliseconds(5))
                }
            }
        }

        /// Every process seen below the script so far.
        var descendantsSeen: [Tracked] { seen.processes.withLock { Array($0.values) } }

        var output: String { (try? String(contentsOfFile: directory.path + "/run.out", encoding: .utf8)) ?? "" }

        /// Waits (deadline) for a line that starts with `prefix`; returns it.
        func line(startingWith prefix: String, timeout: Duration = .seconds(30)) async throws -> String {
            var found: String?, exit: Int32?
            _ = await eventually(timeout: timeout) {  // the line, or the script's exit
                found = output.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }).map(String.init)
                if found == nil { exit = reap() }
                return found != nil || exit != nil
            }
            if let found { return found }
            if let exit { throw HarnessError("scripts/run exited (status \(exit)) before '\(prefix)':\n\(output)") }
            throw HarnessError("no '\(prefix)' line within \(timeout):\n\(output)")
        }

        /// The wait status once the script has exited (reaped here), else nil.
        func reap() -> Int32? {
            guard !exited else { return nil }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
            exited = true
            watcher?.cancel()
            return status
        }

        /// Waits (deadline) for the script to exit; its wait status. `repeating`: a signal sent to
        /// it again at each look (every 10 ms) meanwhile (never after it is reaped, so never to another process).
        func waitForExit(timeout: Duration = .seconds(40), repeating signal: Int32? = nil) async throws -> Int32 {
            var status: Int32?
            _ = await eventually(timeout: timeout) {
                status = reap()
                if status == nil, let signal { _ = kill(pid, signal) }
                return status != nil
            }
            guard let status else { throw HarnessError("scripts/run still running \(timeout) after the signal:\n\(output)") }
            return status
        }

        /// Safety net: SIGKILL to the script and what it left running, if the test failed.
        deinit {
            watcher?.cancel()
            if !exited { killAndReap(pid, SIGKILL) }
            for p in descendantsSeen where p.isAlive { _ = kill(p.pid, SIGKILL) }
        }
    }

    /// The pid a "run:" line names after `marker` (e.g. "(pid ").
    static func pid(in line: String, after marker: String) throws -> pid_t {
        guard let range = line.range(of: marker) else { throw HarnessError("no '\(marker)' in: \(line)") }
        let digits = line[range.upperBound...].prefix { $0.isNumber }
        guard let pid = pid_t(digits) else { throw HarnessError("no pid after '\(marker)' in: \(line)") }
        return pid
    }

    /// Every descendant of `pid` now (from `/proc`, by parent pid).
    static func descendants(of pid: pid_t) -> Set<pid_t> {
        var parent: [pid_t: pid_t] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let p = pid_t(entry), let fields = Tracked.statFields(p), let pp = pid_t(fields[1]) else { continue }
            parent[p] = pp
        }
        var found: Set<pid_t> = []
        var frontier = [pid]
        while let next = frontier.popLast() {
            for (child, pp) in parent where pp == next && found.insert(child).inserted { frontier.append(child) }
        }
        return found
    }

    /// Runs the script, waits until the bridge is online on the script's broker, checks that the
    /// pids the script prints are every process it started, sends `signal` to the script's pid
    /// only, and checks that the script exits with 128 + signal having stopped all of them, the
    /// bridge (offline published) before the broker. `ownBroker`: a broker already listening on
    /// the port, which the script must use and leave running.
    /// `repeatSignal`: send it again every 20 ms until the script exits (a user pressing Ctrl-C
    /// over and over).
    func stopsEverything(on signal: Int32, repeatSignal: Bool = false, ownBroker: MosquittoBroker? = nil) async throws {
        await Slots.processHeavy.acquire()
        defer { Slots.processHeavy.release() }
        let port = try ownBroker?.port ?? freeLoopbackPort()
        let script = try DemoScript(port: port)
        var tracked: [Tracked] = []
        defer {
            for p in tracked where p.isAlive { killAndReap(p.pid, SIGKILL) }  // only when the test failed
        }

        let brokerLine = try await script.line(startingWith: ownBroker == nil ? "run: started mosquitto" : "run: using the MQTT broker")
        #expect(brokerLine.contains("127.0.0.1:\(port)"), "\(brokerLine)")
        if ownBroker == nil, let p = Tracked(pid: try Self.pid(in: brokerLine, after: "(pid "), role: "mosquitto") { tracked.append(p) }
        let emulatorLine = try await script.line(startingWith: "run: emulated BlueZ")
        for (marker, role) in [("(pid ", "emulator"), ("dbus-daemon pid ", "dbus-daemon")] {
            if let p = Tracked(pid: try Self.pid(in: emulatorLine, after: marker), role: role) { tracked.append(p) }
        }
        let bridgeLine = try await script.line(startingWith: "run: the bridge runs")
        if let p = Tracked(pid: try Self.pid(in: bridgeLine, after: "(pid "), role: "bridge") { tracked.append(p) }

        // The bridge online on the script's broker: everything is up.
        var options = MQTTConnectOptions(host: "127.0.0.1", port: port, clientID: "demo-script-test-\(getpid())")
        options.reconnect.minimumDelay = .milliseconds(50)
        let loop = EventLoop(name: "t-demo-hub")
        defer { loop.shutdown() }  // after the hub is disconnected
        let hub = try MQTTClient(options: options, loop: loop)
        try await hub.connect()
        let states = try await hub.subscribe("gatt2mqtt/bridge/state")
        let online = await collectUntil(states, timeout: .seconds(30)) { $0.payloadString == #"{"state":"online"}"# }
        #expect(online.last?.payloadString == #"{"state":"online"}"#, "\(online.map(\.payloadString))\n\(script.output)")

        // The printed pids are the programs they claim to be ($! of `setsid …` is the program's
        // own pid: setsid did not fork) and every process the script started.
        // (Read now: a pid printed right after `&` may still be the forked shell, before its exec.)
        let roles = Dictionary(tracked.map { ($0.role, Tracked.commandLine($0.pid)) }, uniquingKeysWith: { a, _ in a })
        #expect(roles.count == (ownBroker == nil ? 4 : 3), "\(tracked)")
        #expect(roles["mosquitto"]?.hasPrefix("/usr/sbin/mosquitto -c ") ?? (ownBroker != nil), "\(roles)")
        #expect(roles["emulator"]?.hasPrefix(CLI.executable.path + " simulate ") == true, "\(roles)")
        #expect(roles["dbus-daemon"]?.hasPrefix("/usr/bin/dbus-daemon ") == true, "\(roles)")
        #expect(roles["bridge"]?.hasPrefix(CLI.executable.path + " run ") == true, "\(roles)")
        #expect(Self.descendants(of: script.pid) == Set(tracked.map(\.pid)), "\(tracked)")

        #expect(kill(script.pid, signal) == 0)
        let status = try await script.waitForExit(repeating: repeatSignal ? signal : nil)
        #expect(status & 0x7f == 0 && (status >> 8) & 0xff == 128 + signal, "wait status \(status)\n\(script.output)")
        let survivors = (tracked + script.descendantsSeen).filter(\.isAlive)
        #expect(survivors.isEmpty, "still running after scripts/run exited: \(survivors)\n\(script.output)")

        // The bridge stopped first: its offline state reached the broker.
        let offline = await collectUntil(states, timeout: .seconds(30)) { $0.payloadString == #"{"state":"offline"}"# }
        #expect(offline.last?.payloadString == #"{"state":"offline"}"#, "\(offline.map(\.payloadString))\n\(script.output)")
        if let ownBroker {
            #expect(acceptsConnections(port: ownBroker.port), "the script stopped a broker it did not start")
        }
        await hub.disconnect()
    }

    @Test(arguments: [SIGINT, SIGTERM])
    func aSignalToTheScriptStopsEverythingItStarted(signal: Int32) async throws {
        try await stopsEverything(on: signal)
    }

    /// Ctrl-C again and again while the script stops what it started: the stop runs to its end
    /// (it used to be cut short by the second signal, leaving the emulator and mosquitto).
    @Test func repeatedSignalsDoNotCutTheStopShort() async throws {
        try await stopsEverything(on: SIGINT, repeatSignal: true)
    }

    /// A signal while the emulator starts (before its bus address is printed): the emulator, its
    /// dbus-daemon (if it got that far) and mosquitto are stopped all the same.
    @Test(arguments: [SIGINT, SIGTERM])
    func aSignalDuringStartUpStopsWhatWasStarted(signal: Int32) async throws {
        await Slots.processHeavy.acquire()
        defer { Slots.processHeavy.release() }
        let script = try DemoScript(port: try freeLoopbackPort())
        _ = try await script.line(startingWith: "run: started mosquitto")
        #expect(kill(script.pid, signal) == 0)
        let status = try await script.waitForExit()
        #expect(status & 0x7f == 0 && (status >> 8) & 0xff == 128 + signal, "wait status \(status)\n\(script.output)")
        let seen = script.descendantsSeen
        #expect(seen.contains { $0.commandLine.hasPrefix("/usr/sbin/mosquitto ") }, "\(seen)")
        let survivors = seen.filter(\.isAlive)
        #expect(survivors.isEmpty, "still running after scripts/run exited: \(survivors)\n\(script.output)")
        #expect(!script.output.contains("run: the bridge runs"), "the bridge was started after the signal:\n\(script.output)")
    }

    /// An emulator that does not stop within 10 s of SIGTERM (on a busy machine its start-up can
    /// outlast them: it takes the signal, but stops once started) is killed, and the child it had
    /// spawned (its dbus-daemon) is stopped after it: a fresh-clone CI run left the daemon
    /// running. A stand-in for `gatt2mqtt` spawns a child, then ignores SIGTERM and never prints
    /// a bus address.
    @Test func anEmulatorKilledAfterTenSecondsLeavesNoChildBehind() async throws {
        await Slots.processHeavy.acquire()
        defer { Slots.processHeavy.release() }
        let script = try DemoScript(port: try freeLoopbackPort()) { directory in
            let path = directory.path + "/gatt2mqtt"
            // The child first: it must not inherit the ignored SIGTERM.
            try "#!/bin/bash\nsleep 300 &\ntrap '' TERM\nwait\n".write(toFile: path, atomically: true, encoding: .utf8)
            guard chmod(path, 0o755) == 0 else { throw HarnessError("chmod \(path): errno \(errno)") }
            return path
        }
        _ = try await script.line(startingWith: "run: started mosquitto")
        let child = await eventually {
            script.descendantsSeen.contains { $0.commandLine == "sleep 300" && $0.isAlive }
        }
        #expect(child, "the stand-in's child never ran: \(script.descendantsSeen)\n\(script.output)")
        #expect(kill(script.pid, SIGTERM) == 0)
        let status = try await script.waitForExit()
        #expect(status & 0x7f == 0 && (status >> 8) & 0xff == 128 + SIGTERM, "wait status \(status)\n\(script.output)")
        #expect(script.output.contains("did not stop within 10 s of SIGTERM: SIGKILL"), "\(script.output)")
        let survivors = script.descendantsSeen.filter(\.isAlive)
        #expect(survivors.isEmpty, "still running after scripts/run exited: \(survivors)\n\(script.output)")
    }

    /// With a broker already on the port the script uses it, and stops only what it started.
    @Test func aBrokerThatWasRunningIsUsedAndLeftRunning() async throws {
        try await withMosquitto { broker in
            try await stopsEverything(on: SIGINT, ownBroker: broker)
        }
    }
}
