import Foundation
import Synchronization

/// One host of the cluster as run.sh made it: its `gatt2mqtt simulate` (bus address in
/// `WORK/<node>.bus`) and the configuration of its bridge (`WORK/<node>.yaml`); the bridge's
/// stderr goes to `WORK/<node>.log`, its pid to `WORK/<node>.pid` while it runs (for run.sh, should
/// this program be stopped first).
struct Node: Sendable {
    let name: String
    let bus: String
    let config: String
    let log: String
    let pidFile: String

    init(_ name: String, work: String) throws {
        self.name = name
        bus = try String(contentsOfFile: "\(work)/\(name).bus", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        config = "\(work)/\(name).yaml"
        log = "\(work)/\(name).log"
        pidFile = "\(work)/\(name).pid"
    }

    /// Calls `org.gatt2mqtt.Simulator1.method` on this host's emulator (docs/bluez.md, the control
    /// interface) with `args` (GVariant text) through gdbus; returns gdbus's output.
    @discardableResult
    func control(_ method: String, _ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/gdbus")
        p.arguments = ["call", "--address", bus, "--dest", "org.bluez", "--object-path", "/org/gatt2mqtt/Simulator",
                       "--method", "org.gatt2mqtt.Simulator1.\(method)"] + args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let error = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw BenchError("gdbus \(method) on node \(name): \(error)") }
        return text
    }

    /// The emulator's record of the writes the sensor received on the control point 2A39
    /// (`Received`), one `Value` text per write, e.g. `[byte 0x01, 0x02]`.
    func writes() throws -> [String] {
        try control("Received", [Sensor.address]).components(separatedBy: "}, {")
            .filter { $0.contains("'WriteValue'") && $0.lowercased().contains("2a39") }
            .map { r in
                guard let v = r.range(of: "'Value': <") else { return "" }
                return String(r[v.upperBound...].prefix { $0 != ">" })
            }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The bridges this benchmark started (`gatt2mqtt run`, one per node), by pid: started, killed,
/// stopped and continued here, and all killed at the end.
final class Bridges: Sendable {
    let executable: String
    let logLevel: String
    private let running = Mutex<[String: pid_t]>([:])

    init(executable: String, logLevel: String) {
        self.executable = executable
        self.logLevel = logLevel
    }

    /// Starts `node`'s bridge, its stderr appended to the node's log, stdout to /dev/null.
    func start(_ node: Node) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, node.log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        let words: [String] = [executable, "run", "--config", node.config, "--log-level", logLevel]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard status == 0 else { throw BenchError("cannot start \(executable): \(String(cString: strerror(status)))") }
        running.withLock { $0[node.name] = pid }
        try? "\(pid)\n".write(toFile: node.pidFile, atomically: true, encoding: .utf8)
    }

    /// SIGKILL to `node`'s bridge (no goodbye: only its MQTT Will speaks for it), and waits for it to exit.
    func kill(_ node: Node) {
        guard let pid = running.withLock({ $0.removeValue(forKey: node.name) }) else { return }
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(atPath: node.pidFile)
    }

    /// SIGSTOP to `node`'s bridge: its socket stays open, the broker sends its Will only when the
    /// keep-alive runs out (1.5 × 5 s).
    func pause(_ node: Node) { signal(node, SIGSTOP) }

    /// SIGCONT to a bridge ``pause(_:)`` stopped.
    func resume(_ node: Node) { signal(node, SIGCONT) }

    private func signal(_ node: Node, _ signal: Int32) {
        if let pid = running.withLock({ $0[node.name] }) { Glibc.kill(pid, signal) }
    }

    /// Whether `node`'s bridge is still running; one that exited is reaped and forgotten.
    func isRunning(_ node: Node) -> Bool {
        running.withLock { r in
            guard let pid = r[node.name] else { return false }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == 0 { return true }
            r[node.name] = nil
            try? FileManager.default.removeItem(atPath: node.pidFile)
            return false
        }
    }

    /// Kills every bridge of `nodes` still running, by pid.
    func killAll(_ nodes: [Node]) {
        for node in nodes { kill(node) }
    }
}
