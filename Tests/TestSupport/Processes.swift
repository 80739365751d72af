import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Errors of the test harness itself.
public struct HarnessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A fresh temporary directory, removed on deinit.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init() throws {
        var template = Array("/tmp/gatt2mqtt-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs a command to completion (openssl, mosquitto_passwd, dbus-send, gdbus, btmgmt) and
/// returns its standard output; throws with its standard error when it exits non-zero.
@discardableResult
public func runTool(_ tool: String, _ arguments: [String], in directory: String? = nil) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let output = Pipe(), errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    // Both pipes are drained at once: a tool that fills one while the other is read would block.
    let stderr = Mutex(Data())
    let drained = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        let data = errors.fileHandleForReading.readDataToEndOfFile()
        stderr.withLock { $0 = data }
        drained.signal()
    }
    let stdout = output.fileHandleForReading.readDataToEndOfFile()
    drained.wait()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        let text = String(decoding: stderr.withLock { $0 }, as: UTF8.self) + String(decoding: stdout, as: UTF8.self)
        throw HarnessError("\(tool) \(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(text)")
    }
    return String(decoding: stdout, as: UTF8.self)
}

/// ``runTool(_:_:in:)`` on a thread of its own, so the cooperative pool (which may run an
/// emulator the tool talks to) stays free.
public func tool(_ path: String, _ arguments: [String], in directory: String? = nil) async throws -> String {
    try await offThePool { try runTool(path, arguments, in: directory) }
}

/// The process environment is one array that `setenv`/`unsetenv` may reallocate: a child spawned
/// with `environ` while another test changes a variable can be handed the freed array (a CI run
/// failed `posix_spawn /usr/sbin/mosquitto failed: 14`, EFAULT). Tests change the environment only
/// through ``setEnvironmentVariable(_:_:)``, and ``spawn(_:_:log:environment:)`` reads `environ`
/// under the same lock (posix_spawn returns once the child has exec'd, so the child's copy is
/// taken inside it).
private let environmentLock = Mutex<Void>(())

/// Sets (or, with nil, removes) a variable of this process' environment without racing a spawn.
public func setEnvironmentVariable(_ name: String, _ value: String?) {
    environmentLock.withLock { _ in
        if let value { _ = setenv(name, value, 1) } else { _ = unsetenv(name) }
    }
}

/// Spawns `path` with stdout/stderr appended to `log`, an empty signal mask and default
/// signal dispositions (the test process blocks signals in some threads; a child must not
/// inherit that, or SIGTERM would be ignored). `environment`: the child's whole environment
/// (nil: this process').
public func spawn(_ path: String, _ arguments: [String], log: String, environment: [String: String]? = nil) throws -> pid_t {
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
    // Nothing else of this process: a descriptor another test holds open at this moment (the
    // write end of a pipe a `Process` reads to its end, a socket) would otherwise live on in this
    // child — a broker that runs for the whole test — and that reader would wait for it.
    guard closeFrom3(&actions) == 0 else { throw HarnessError("posix_spawn_file_actions_addclosefrom_np failed") }
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
    let rc = environmentLock.withLock { _ in
        envp.map { posix_spawn(&pid, path, &actions, &attributes, argv, $0) } ?? posix_spawn(&pid, path, &actions, &attributes, argv, environ)
    }
    guard rc == 0 else { throw HarnessError("posix_spawn \(path) failed: \(rc)") }
    return pid
}

/// Sends `signal` to `pid` (if any) and waits for it to exit.
public func killAndReap(_ pid: pid_t, _ signal: Int32) {
    guard pid != 0 else { return }
    _ = Glibc.kill(pid, signal)
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0, errno == EINTR {}
}

/// A child process that can be killed abruptly (SIGKILL), e.g. `mosquitto_sub` with a Will.
public final class ChildProcess {
    public private(set) var pid: pid_t = 0

    public init(_ path: String, _ arguments: [String], log: String) throws {
        pid = try spawn(path, arguments, log: log)
    }

    public func kill(_ signal: Int32 = SIGKILL) {
        killAndReap(pid, signal)
        pid = 0
    }

    deinit { kill() }
}

/// Runs a blocking `body` (a child's exit, a pipe read to EOF, a socket's `recv`) on a thread of
/// its own and resumes with its result, so the wait never holds one of the cooperative pool's
/// threads (two on a 2-core machine): with the suite running in parallel, one test's blocking
/// wait would otherwise stall every other test.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// ``offThePool(_:)`` for a body that cannot fail.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}

extension Process {
    /// Waits for the process to exit without blocking the cooperative pool; its status.
    @discardableResult
    public func exited() async -> Int32 {
        nonisolated(unsafe) let process = self
        return await offThePool {
            process.waitUntilExit()
            return process.terminationStatus
        }
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np(actions, 3)` (2.34+), which the Glibc module
/// does not import: the child closes every descriptor from 3 up.
private func closeFrom3(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>) -> Int32 {
    typealias AddClosefrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return -1 }
    return unsafeBitCast(symbol, to: AddClosefrom.self)(actions, 3)
}

/// Sends `signal` to a child started with `Process` (if it still runs) and reaps it with
/// `waitpid` — for synchronous clean-up (a `defer`, a `stop()`). Not `waitUntilExit()`: that
/// learns of the exit through Dispatch's global queue, whose threads a test on Swift's
/// cooperative pool may be holding, and can wait until they free up. The process' own
/// `terminationStatus` is not to be read afterwards.
public func reap(_ process: Process, _ signal: Int32 = SIGTERM) {
    killAndReap(process.processIdentifier, signal)
}
