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
        LoggingSystem.bootstrap { label in LevelledHandler(inner: StreamLogHandler.standardError(label: label), level: self) }
    }
}

/// A `StreamLogHandler` whose level is the shared ``RuntimeLogLevel``.
struct LevelledHandler: LogHandler {
    var inner: StreamLogHandler
    let level: RuntimeLogLevel

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
        LogTap.shared.forward(event, metadata: inner.metadata)
    }
}

/// Where the log lines also go besides stderr: the web frontend's log tail (``FrontendHub``,
/// docs/frontend.md), while it runs; nowhere otherwise (one lock and a nil check per line).
public final class LogTap: Sendable {
    public static let shared = LogTap()
    let sink = Mutex<(@Sendable (Logger.Level, String) -> Void)?>(nil)

    public func set(_ sink: (@Sendable (Logger.Level, String) -> Void)?) { self.sink.withLock { $0 = sink } }

    func forward(_ event: LogEvent, metadata: Logger.Metadata) {
        guard let sink = sink.withLock({ $0 }) else { return }
        var all = metadata
        if let m = event.metadata { all.merge(m) { _, new in new } }
        let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        sink(event.level, fields.isEmpty ? "\(event.message)" : "\(event.message) \(fields)")
    }
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
