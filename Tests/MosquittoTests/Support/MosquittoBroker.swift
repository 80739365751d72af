import Foundation
import Mosquitto
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Errors of the test harness itself.
struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A fresh temporary directory, removed on deinit.
final class TemporaryDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/mqtt-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs a command to completion (openssl, mosquitto_passwd); throws with its output on failure.
@discardableResult
func runTool(_ tool: String, _ arguments: [String], in directory: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    process.currentDirectoryURL = URL(fileURLWithPath: directory)
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw HarnessError("\(tool) \(arguments.joined(separator: " ")) failed: \(text)")
    }
    return text
}

/// A free TCP port on 127.0.0.1 (bind port 0, read it back, close).
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw HarnessError("bind to 127.0.0.1:0 failed") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
func acceptsConnections(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

/// Spawns `path` with stdout/stderr appended to `log`, an empty signal mask and default
/// signal dispositions (the test process blocks signals in some threads; a child must not
/// inherit that, or SIGTERM would be ignored). `environment`: the child's whole environment
/// (nil: this process').
func spawn(_ path: String, _ arguments: [String], log: String, environment: [String: String]? = nil) throws -> pid_t {
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { text in text.withCString { strdup($0) } } + [nil]
    defer { argv.forEach { free($0) } }
    let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { env in
        env.map { "\($0.key)=\($0.value)" }.sorted().map { text in text.withCString { strdup($0) } } + [nil]
    }
    defer { envp?.forEach { free($0) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE] { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var pid: pid_t = 0
    let rc = envp.map { posix_spawn(&pid, path, &actions, &attributes, argv, $0) } ?? posix_spawn(&pid, path, &actions, &attributes, argv, environ)
    guard rc == 0 else { throw HarnessError("posix_spawn \(path) failed: \(rc)") }
    return pid
}

/// Sends `signal` to `pid` (if any) and waits for it to exit.
func killAndReap(_ pid: pid_t, _ signal: Int32) {
    guard pid != 0 else { return }
    _ = Glibc.kill(pid, signal)
    var status: Int32 = 0
    _ = waitpid(pid, &status, 0)
}

/// The path of a committed fixture.
func fixturePath(_ name: String, file: String = #filePath) -> String {
    URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures").appendingPathComponent(name).path
}

/// A real mosquitto started from a committed config on a free loopback port, stopped by pid
/// (always: `stop()`, and `deinit` as the safety net).
final class MosquittoBroker {
    let directory: TemporaryDirectory
    private(set) var port: Int = 0
    private(set) var configPath: String = ""
    private(set) var pid: pid_t = 0

    /// Starts `mosquitto -c` with `fixture` (placeholders @PORT@ and @DIR@). `prepare` runs
    /// first with the directory (e.g. to make certificates or a password file).
    init(fixture: String = "base.conf", prepare: (String) throws -> Void = { _ in }) throws {
        directory = try TemporaryDirectory()
        try prepare(directory.path)
        let template = try String(contentsOfFile: fixturePath(fixture), encoding: .utf8)
        var lastError: Error = HarnessError("no attempt")
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            let config = template.replacingOccurrences(of: "@PORT@", with: String(port))
                .replacingOccurrences(of: "@DIR@", with: directory.path)
            let path = directory.path + "/mosquitto.conf"
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            self.port = port
            self.configPath = path
            do {
                try start()
                return
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    /// Starts (or restarts, on the same port) the broker and waits until it accepts.
    func start() throws {
        precondition(pid == 0, "broker already running")
        pid = try spawn("/usr/sbin/mosquitto", ["-c", configPath], log: directory.path + "/stdout.log")
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if acceptsConnections(port: port) { return }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                pid = 0
                throw HarnessError("mosquitto exited at start (status \(status)): \(log)")
            }
            usleep(20_000)
        }
        stop()
        throw HarnessError("mosquitto did not accept on port \(port) within 10 s: \(log)")
    }

    /// Sends `signal` and reaps the process (SIGKILL: an abrupt crash).
    func kill(_ signal: Int32 = SIGKILL) {
        killAndReap(pid, signal)
        pid = 0
    }

    /// SIGTERM, then SIGKILL after 3 s.
    func stop() {
        guard pid != 0 else { return }
        _ = Glibc.kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<150 {
            if waitpid(pid, &status, WNOHANG) == pid {
                pid = 0
                return
            }
            usleep(20_000)
        }
        kill(SIGKILL)
    }

    var log: String {
        let broker = (try? String(contentsOfFile: directory.path + "/mosquitto.log", encoding: .utf8)) ?? ""
        let output = (try? String(contentsOfFile: directory.path + "/stdout.log", encoding: .utf8)) ?? ""
        return broker + output
    }

    deinit { stop() }

    /// Options for a client of this broker.
    func options(clientID: String? = nil, protocolVersion: MQTTProtocolVersion = .v5) -> MQTTConnectOptions {
        var options = MQTTConnectOptions(host: "127.0.0.1", port: port, clientID: clientID, protocolVersion: protocolVersion)
        options.reconnect.minimumDelay = .milliseconds(50)
        options.reconnect.maximumDelay = .milliseconds(500)
        return options
    }

    /// A connected client.
    func client(_ configure: (inout MQTTConnectOptions) -> Void = { _ in }) async throws -> MQTTClient {
        var options = options()
        configure(&options)
        let client = try MQTTClient(options: options)
        try await client.connect()
        return client
    }
}

/// A child process that can be killed abruptly (SIGKILL), e.g. `mosquitto_sub` with a Will.
final class ChildProcess {
    private(set) var pid: pid_t = 0

    init(_ path: String, _ arguments: [String], log: String) throws {
        pid = try spawn(path, arguments, log: log)
    }

    func kill(_ signal: Int32 = SIGKILL) {
        killAndReap(pid, signal)
        pid = 0
    }

    deinit { kill() }
}

/// Collects `count` messages from `subscription`, or what arrived before `timeout`.
func collect(_ subscription: MQTTSubscription, count: Int, timeout: Duration = .seconds(10)) async -> [MQTTMessage] {
    let box = MessageBox()
    await withTaskGroup(of: Void.self) { group in
        group.addTask {
            for await message in subscription {
                if box.append(message) >= count { return }
            }
        }
        group.addTask { try? await Task.sleep(for: timeout) }
        await group.next()
        group.cancelAll()
    }
    return box.messages
}

/// Collects from `subscription` until a message satisfies `predicate` (or `timeout`); returns
/// everything collected, the matching message last.
func collectUntil(_ subscription: MQTTSubscription, timeout: Duration = .seconds(10),
                  _ predicate: @escaping @Sendable (MQTTMessage) -> Bool) async -> [MQTTMessage] {
    var all: [MQTTMessage] = []
    let end = ContinuousClock.now + timeout
    while ContinuousClock.now < end {
        let next = await collect(subscription, count: 1, timeout: end - ContinuousClock.now)
        all += next
        if next.isEmpty || next.contains(where: predicate) { break }
    }
    return all
}

/// Thread-safe message accumulator for `collect`.
final class MessageBox: Sendable {
    private let storage = Mutex<[MQTTMessage]>([])
    func append(_ message: MQTTMessage) -> Int { storage.withLock { $0.append(message); return $0.count } }
    var messages: [MQTTMessage] { storage.withLock { $0 } }
}

/// Waits until `condition` holds or `timeout` passes.
func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

/// Threads of this process, and how many are MQTTClient network threads.
func threadCounts() -> (all: Int, mqtt: Int) {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    let mqtt = tasks.filter {
        ((try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)) ?? "")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "mqtt-net"
    }.count
    return (tasks.count, mqtt)
}

/// Resident set size in bytes (/proc/self/statm).
func residentBytes() -> Int {
    let text = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? "0 0"
    let pages = Int(text.split(separator: " ")[1]) ?? 0
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}
