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
/// (always: `stop()`, and `deinit` as the safety net).
public final class MosquittoBroker {
    public let directory: TemporaryDirectory
    public private(set) var port: Int = 0
    public private(set) var configPath: String = ""
    public private(set) var pid: pid_t = 0

    /// Starts `mosquitto -c` with `fixture` (placeholders @PORT@ and @DIR@) and then `appending`
    /// (lines after the fixture's, e.g. a bridge `connection` to another broker; the same
    /// placeholders). `prepare` runs first with the directory (e.g. to make certificates or a
    /// password file).
    public init(fixture: String = "base.conf", appending lines: [String] = [],
                prepare: (String) throws -> Void = { _ in }) throws {
        directory = try TemporaryDirectory()
        try prepare(directory.path)
        var template = try String(contentsOfFile: fixturePath(fixture), encoding: .utf8)
        if !lines.isEmpty { template += (template.hasSuffix("\n") ? "" : "\n") + lines.joined(separator: "\n") + "\n" }
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
    public func start() throws {
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
    public func kill(_ signal: Int32 = SIGKILL) {
        killAndReap(pid, signal)
        pid = 0
    }

    /// SIGTERM, then SIGKILL after 3 s.
    public func stop() {
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

    public var log: String {
        let broker = (try? String(contentsOfFile: directory.path + "/mosquitto.log", encoding: .utf8)) ?? ""
        let output = (try? String(contentsOfFile: directory.path + "/stdout.log", encoding: .utf8)) ?? ""
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
