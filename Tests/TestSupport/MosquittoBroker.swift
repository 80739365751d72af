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

    /// Starts `mosquitto -c` with `fixture` (placeholders @PORT@ and @DIR@). `prepare` runs
    /// first with the directory (e.g. to make certificates or a password file).
    public init(fixture: String = "base.conf", prepare: (String) throws -> Void = { _ in }) throws {
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
