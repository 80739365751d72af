import BridgeConfig
import BridgeCore
import Foundation
import Logging
import Synchronization

/// The process-wide log level, changeable while the bridge runs (`bridge/request/options`,
/// `config/reload`): every logger's handler reads it on each call.
public final class RuntimeLogLevel: Sendable {
    let level: Mutex<Logger.Level>
    public init(_ level: Logger.Level) { self.level = Mutex(level) }
    public var current: Logger.Level {
        get { level.withLock { $0 } }
        set { level.withLock { $0 = newValue } }
    }

    /// Bootstraps swift-log with stderr handlers that follow this level.
    public func bootstrap() {
        LoggingSystem.bootstrap { label in LevelledHandler(inner: StreamLogHandler.standardError(label: label), level: self, label: label) }
    }
}

/// A `StreamLogHandler` whose level is the shared ``RuntimeLogLevel``.
struct LevelledHandler: LogHandler {
    var inner: StreamLogHandler
    let level: RuntimeLogLevel
    /// The logger's label (`bridge/logging`'s namespace, with the module).
    var label = "gatt2mqtt"

    var logLevel: Logger.Level {
        get { level.current }
        set { level.current = newValue }
    }
    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        inner.log(event: event)
        LogTap.shared.forward(event, metadata: inner.metadata, label: label)
    }
}

/// Where the log lines also go besides stderr: the web frontend's log tail (``FrontendHub``,
/// docs/frontend.md) and `bridge/logging` on MQTT (``MQTTLogForwarder``), while they run;
/// nowhere otherwise (one lock and two nil checks per line).
public final class LogTap: Sendable {
    public static let shared = LogTap()
    /// The two sinks, one value behind one lock.
    struct Sinks {
        var frontend: (@Sendable (Logger.Level, String) -> Void)?
        var mqtt: (@Sendable (LogLine) -> Void)?
    }
    let sinks = Mutex(Sinks())

    /// The web frontend's sink.
    public func set(_ sink: (@Sendable (Logger.Level, String) -> Void)?) { sinks.withLock { $0.frontend = sink } }

    /// `bridge/logging`'s sink.
    func setMQTT(_ sink: (@Sendable (LogLine) -> Void)?) { sinks.withLock { $0.mqtt = sink } }

    func forward(_ event: LogEvent, metadata: Logger.Metadata, label: String = "gatt2mqtt") {
        let (frontend, mqtt) = sinks.withLock { ($0.frontend, $0.mqtt) }
        guard frontend != nil || mqtt != nil else { return }
        var all = metadata
        if let m = event.metadata { all.merge(m) { _, new in new } }
        let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let text = fields.isEmpty ? "\(event.message)" : "\(event.message) \(fields)"
        frontend?(event.level, text)
        if let mqtt {
            var topic: String?
            if case let .string(t)? = all["topic"] { topic = t } else if let t = all["topic"] { topic = "\(t)" }
            mqtt(LogLine(level: event.level, message: text, namespace: "\(label):\(event.source)", module: event.source, topic: topic))
        }
    }
}

/// One log line as `bridge/logging` takes it.
struct LogLine: Sendable {
    var level: Logger.Level
    /// The message and its metadata (`key=value`), as the frontend shows it.
    var message: String
    /// `<logger label>:<module>`, e.g. `gatt2mqtt:BridgeCore`.
    var namespace: String
    /// The module that logged it (`Mosquitto`: the MQTT client's own lines, never published).
    var module: String
    /// The metadata's `topic`, when it has one (a line about the logging topic itself is never published).
    var topic: String?
}

/// `bridge/request/restart`: the bridge stops gracefully (offline published, links closed, the
/// store closed), then the process replaces itself with a fresh start of the same command line
/// (`execv`, same process id — a supervisor sees no exit).
public final class RestartRequest: Sendable {
    let requested = Mutex(false)
    let signal: AsyncStream<Void>.Continuation
    /// Yields once when a restart is asked for (the caller then shuts the service group down).
    public let requests: AsyncStream<Void>

    public init() { (requests, signal) = AsyncStream.makeStream(of: Void.self) }

    public func request() {
        requested.withLock { $0 = true }
        signal.yield()
    }

    public var isRequested: Bool { requested.withLock { $0 } }

    /// Replaces the process image with `/proc/self/exe` and the same arguments; returns only if
    /// that fails.
    public static func reexecute() -> Int32 {
        fflush(nil)
        execv("/proc/self/exe", CommandLine.unsafeArgv)
        return errno
    }
}

extension LogLevel {
    public var loggerLevel: Logger.Level { Logger.Level(rawValue: rawValue) ?? .info }
}
