import Foundation
import Mosquitto
import Reactor
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The path of a committed mosquitto configuration, `Tests/TestSupport/Fixtures/<name>`.
func fixturePath(_ name: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures").appendingPathComponent(name).path
}

/// A real mosquitto started from a committed config on a free loopback port, stopped by pid
/// (always: `stop()`, and `deinit` as the safety net). It owns the process (its pid, behind one
/// lock), its temporary directory (config, log, persistence) and the port.
///
/// Starting and stopping wait for the process (polling the port, `waitpid`): from an async test
/// use ``withBroker(fixture:appending:prepare:loopName:_:)`` or ``started(fixture:appending:prepare:)``,
/// ``restart()`` and ``shutdown()``, which wait on a thread of their own, not on the cooperative
/// pool (two threads on a 2-core machine, shared by every test running in parallel).
public final class MosquittoBroker: Sendable {
    public let directory: TemporaryDirectory
    public let port: Int
    public let configPath: String
    private let process = Mutex<pid_t>(0)

    /// The broker's pid; 0 while it is not running.
    public var pid: pid_t { process.withLock { $0 } }

    /// Starts `mosquitto -c` with `fixture` (placeholders @PORT@ and @DIR@) and then `appending`
    /// (lines after the fixture's, e.g. a bridge `connection` to another broker; the same
    /// placeholders). `prepare` runs first with the directory (e.g. to make certificates or a
    /// password file). Blocks until the broker accepts (see ``started(fixture:appending:prepare:)``).
    public init(fixture: String = "base.conf", appending lines: [String] = [],
                prepare: (String) throws -> Void = { _ in }) throws {
        directory = try TemporaryDirectory()
        try prepare(directory.path)
        var template = try String(contentsOfFile: fixturePath(fixture), encoding: .utf8)
        if !lines.isEmpty { template += (template.hasSuffix("\n") ? "" : "\n") + lines.joined(separator: "\n") + "\n" }
        let path = directory.path + "/mosquitto.conf"
        var lastError: Error = HarnessError("no attempt")
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            let config = template.replacingOccurrences(of: "@PORT@", with: String(port))
                .replacingOccurrences(of: "@DIR@", with: directory.path)
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            do {
                let pid = try Self.launch(configPath: path, port: port, directory: directory.path)
                self.port = port
                self.configPath = path
                process.withLock { $0 = pid }
                return
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    /// ``init(fixture:appending:prepare:)`` on a thread of its own.
    public static func started(fixture: String = "base.conf", appending lines: [String] = [],
                               prepare: @escaping @Sendable (String) throws -> Void = { _ in }) async throws -> MosquittoBroker {
        try await offThePool { try MosquittoBroker(fixture: fixture, appending: lines, prepare: prepare) }
    }

    /// Spawns mosquitto and waits until it accepts on `port`; its pid.
    private static func launch(configPath: String, port: Int, directory: String) throws -> pid_t {
        let pid = try spawn("/usr/sbin/mosquitto", ["-c", configPath], log: directory + "/stdout.log")
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if acceptsConnections(port: port) { return pid }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                throw HarnessError("mosquitto exited at start (status \(status)): \(log(in: directory))")
            }
            usleep(20_000)
        }
        terminate(pid)
        throw HarnessError("mosquitto did not accept on port \(port) within 10 s: \(log(in: directory))")
    }

    /// Starts (or restarts, on the same port) the broker and waits until it accepts. Blocks: from
    /// an async test, ``restart()``.
    public func start() throws {
        precondition(pid == 0, "broker already running")
        let pid = try Self.launch(configPath: configPath, port: port, directory: directory.path)
        process.withLock { $0 = pid }
    }

    /// ``start()`` (same port, same directory) on a thread of its own.
    public func restart() async throws {
        try await offThePool { try self.start() }
    }

    /// Sends `signal` and reaps the process (SIGKILL: an abrupt crash).
    public func kill(_ signal: Int32 = SIGKILL) {
        killAndReap(process.withLock { pid in defer { pid = 0 }; return pid }, signal)
    }

    /// SIGTERM, then SIGKILL after 3 s. Blocks: from an async test, ``shutdown()``.
    public func stop() {
        Self.terminate(process.withLock { pid in defer { pid = 0 }; return pid })
    }

    /// ``stop()`` on a thread of its own.
    public func shutdown() async {
        await offThePool { self.stop() }
    }

    /// SIGTERM to `pid`, reaped; SIGKILL if it has not exited after 3 s.
    private static func terminate(_ pid: pid_t) {
        guard pid != 0 else { return }
        _ = Glibc.kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<150 {
            if waitpid(pid, &status, WNOHANG) == pid { return }
            usleep(20_000)
        }
        killAndReap(pid, SIGKILL)
    }

    /// Lines for ``init(fixture:appending:prepare:)`` that give the new broker a mosquitto bridge
    /// `connection` named `name` to `remote` carrying `topics` (e.g. `gatt2mqtt/# both 1`;
    /// mosquitto.conf(5), "Configuring bridges"):
    /// - `bridge_protocol_version mqttv50` with `try_private true`: `remote` knows the client is a
    ///   bridge, so a retained message crosses retained (and stays retained on the other side, for
    ///   a client that subscribes later; an MQTT 3.1.1 bridge without `try_private` clears the
    ///   flag) and nothing is echoed back; a Will a broker publishes is an ordinary message that
    ///   crosses too; MQTT 5 properties (a response topic) cross as they are.
    /// - `cleansession false` (mosquitto's default): `remote` keeps the bridge's subscriptions and
    ///   QoS 1 messages for it through a dropped link; on every (re)connect the bridge subscribes
    ///   again, so `remote`'s retained messages come across again.
    /// - `notifications false`: no `$SYS/broker/connection/…` messages of its own.
    /// - `restart_timeout 1`: a failed connect is tried again after 1 s (default 5…30 s).
    public static func bridge(to remote: MosquittoBroker, name: String, topics: [String]) -> [String] {
        ["connection \(name)", "address 127.0.0.1:\(remote.port)", "remote_clientid \(name)",
         "bridge_protocol_version mqttv50", "try_private true", "cleansession false", "notifications false",
         "restart_timeout 1", "keepalive_interval 5"] + topics.map { "topic \($0)" }
    }

    /// What the broker logged (its log file, then its output).
    public var log: String { Self.log(in: directory.path) }

    private static func log(in directory: String) -> String {
        let broker = (try? String(contentsOfFile: directory + "/mosquitto.log", encoding: .utf8)) ?? ""
        let output = (try? String(contentsOfFile: directory + "/stdout.log", encoding: .utf8)) ?? ""
        return broker + output
    }

    deinit { stop() }

    /// Options for a client of this broker.
    public func options(clientID: String? = nil, protocolVersion: MQTTProtocolVersion = .v5) -> MQTTConnectOptions {
        var options = MQTTConnectOptions(host: "127.0.0.1", port: port, clientID: clientID, protocolVersion: protocolVersion)
        options.reconnect.minimumDelay = .milliseconds(50)
        options.reconnect.maximumDelay = .milliseconds(500)
        return options
    }

    /// A connected client on `loop` (disconnect it before shutting the loop down).
    public func client(loop: EventLoop, _ configure: (inout MQTTConnectOptions) -> Void = { _ in }) async throws -> MQTTClient {
        var options = options()
        configure(&options)
        let client = try MQTTClient(options: options, loop: loop)
        try await client.connect()
        return client
    }
}

/// Runs `body` with a started broker (``MosquittoBroker/started(fixture:appending:prepare:)``)
/// and an event loop for its clients; afterwards — also when `body` throws — shuts the loop down
/// and stops the broker by pid, neither on the cooperative pool. `body` disconnects the clients
/// it makes (a client must leave the loop before the loop shuts down).
public func withBroker<T>(fixture: String = "base.conf", appending lines: [String] = [],
                          prepare: @escaping @Sendable (String) throws -> Void = { _ in },
                          loopName: String = "t-mqtt",
                          _ body: (MosquittoBroker, EventLoop) async throws -> T) async throws -> T {
    let broker = try await MosquittoBroker.started(fixture: fixture, appending: lines, prepare: prepare)
    let loop = EventLoop(name: loopName)
    let result: Result<T, any Error>
    do { result = .success(try await body(broker, loop)) } catch { result = .failure(error) }
    loop.shutdown()
    await broker.shutdown()
    return try result.get()
}

/// ``withBroker(fixture:appending:prepare:loopName:_:)`` with a client connected on the loop
/// (`client` adjusts its options), disconnected after `body` — also when `body` throws.
public func withBroker<T>(fixture: String = "base.conf", appending lines: [String] = [],
                          prepare: @escaping @Sendable (String) throws -> Void = { _ in },
                          loopName: String = "t-mqtt",
                          client configure: (inout MQTTConnectOptions) -> Void = { _ in },
                          _ body: (MosquittoBroker, EventLoop, MQTTClient) async throws -> T) async throws -> T {
    try await withBroker(fixture: fixture, appending: lines, prepare: prepare, loopName: loopName) { broker, loop in
        let client = try await broker.client(loop: loop, configure)
        let result: Result<T, any Error>
        do { result = .success(try await body(broker, loop, client)) } catch { result = .failure(error) }
        await client.disconnect()
        return try result.get()
    }
}

/// Runs `body` with a started broker and stops it by pid afterwards, also when `body` throws;
/// neither start nor stop on the cooperative pool. For a test whose clients are another process
/// (the bridge, a script) or on loops of their own.
public func withMosquitto<T>(fixture: String = "base.conf", appending lines: [String] = [],
                             prepare: @escaping @Sendable (String) throws -> Void = { _ in },
                             _ body: (MosquittoBroker) async throws -> T) async throws -> T {
    let broker = try await MosquittoBroker.started(fixture: fixture, appending: lines, prepare: prepare)
    let result: Result<T, any Error>
    do { result = .success(try await body(broker)) } catch { result = .failure(error) }
    await broker.shutdown()
    return try result.get()
}
