import CDBus
import Foundation
import Reactor
import Synchronization

/// Which bus to connect to (spec/bluez.md: "Use the system bus through libdbus' normal
/// look-up … which honours `DBUS_SYSTEM_BUS_ADDRESS`").
public enum DBusBus: Sendable, Equatable {
    /// The system bus, found by libdbus (`dbus_bus_get_private(DBUS_BUS_SYSTEM)`), which honours
    /// `DBUS_SYSTEM_BUS_ADDRESS`.
    case system
    /// The session bus (`DBUS_SESSION_BUS_ADDRESS`).
    case session
    /// A bus daemon at a D-Bus address such as `unix:path=/tmp/x` (D-Bus Specification,
    /// "Server Addresses"), opened with `dbus_connection_open_private` + `dbus_bus_register`.
    case address(String)
}

/// A private connection to a message bus, driven by a `Reactor.EventLoop` (no thread of its
/// own) and bridged to async Swift (issue 4 §1; D-Bus Specification, "Message Bus
/// Specification"; docs/dbus.md).
///
/// Every call has a timeout; when the connection drops, pending and later calls fail with
/// ``DBusError/disconnected`` and signal streams end with that error. Close it with ``close()``
/// (or use ``withConnection(_:timeout:_:)``); dropping the last reference also closes it.
public final class DBusConnection: Sendable {
    let box: ConnectionBox

    /// The unique name the bus gave this connection (e.g. `:1.42`).
    public let uniqueName: String

    init(box: ConnectionBox, uniqueName: String) {
        self.box = box
        self.uniqueName = uniqueName
    }

    deinit { box.requestStop() }

    /// The event loop this connection runs on: replies resume their callers, signals are
    /// delivered and exported methods run (in tasks preferring the loop) on the loop thread
    /// (docs/dbus.md "The event loop").
    public var loop: EventLoop { box.loop }

    /// Opens a private connection to `bus`, hands its descriptors and timeouts to `loop` and
    /// registers with the bus (`Hello`) (docs/dbus.md "The event loop"; close the connection
    /// before shutting the loop down). The blocking libdbus connect runs on its own short-lived
    /// thread; if it (or `Hello`) takes longer than `timeout` the caller gets
    /// ``DBusError/timeout(method:milliseconds:)`` (and a late connection is closed).
    public static func connect(_ bus: DBusBus, timeout: Duration = .seconds(25), loop: EventLoop)
        async throws(DBusError) -> DBusConnection
    {
        LibDBus.initialiseThreads()
        let started = ContinuousClock.now
        let once = ConnectOnce()
        let ms = Int(timeout.milliseconds)
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { _ = once.resume(with: .failure(.timeout(method: "connect", milliseconds: ms))) }
        }
        defer { timer.cancel() }
        let thread = Thread {
            let outcome = ConnectionBox.open(bus, loop: loop)
            if !once.resume(with: outcome) {
                // The caller gave up (timeout): this connection is not wanted.
                if case let .success(opened) = outcome { opened.box.requestStop() }
            }
        }
        thread.name = "dbus-connect"
        thread.start()
        let result: Result<ConnectionBox.Opened, DBusError> = await withCheckedContinuation { once.set($0) }
        let opened = try result.get()
        if let unique = opened.uniqueName { return DBusConnection(box: opened.box, uniqueName: unique) }
        do {
            let left = timeout - (ContinuousClock.now - started)
            let hello = try await opened.box.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                method: "Hello", arguments: [], timeout: max(left, .milliseconds(1)))
            return DBusConnection(box: opened.box, uniqueName: try hello.decode(0))
        } catch {
            opened.box.requestStop()
            throw error
        }
    }

    /// Runs `body` with a new connection and closes it afterwards, also when `body` throws.
    public static func withConnection<R: Sendable>(
        _ bus: DBusBus, timeout: Duration = .seconds(25), loop: EventLoop,
        _ body: (DBusConnection) async throws -> R
    ) async throws -> R {
        let connection = try await connect(bus, timeout: timeout, loop: loop)
        defer { connection.close() }
        return try await body(connection)
    }

    /// Closes the connection: pending calls fail with ``DBusError/disconnected``, signal streams
    /// end, exported objects disappear. Idempotent, returns at once (the event loop finishes the
    /// teardown).
    public func close() { box.requestStop() }

    /// Whether the connection is still usable (not closed and not lost).
    public var isConnected: Bool { box.state.withLock { !$0.closed } }
}

/// One-shot bridge for `connect`: whichever of result and timeout comes first wins.
private final class ConnectOnce: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result<ConnectionBox.Opened, DBusError>, Never>?
        var result: Result<ConnectionBox.Opened, DBusError>?
        var done = false
    }
    private let state = Mutex(State())

    func set(_ c: CheckedContinuation<Result<ConnectionBox.Opened, DBusError>, Never>) {
        let ready: Result<ConnectionBox.Opened, DBusError>? = state.withLock { s in
            if let r = s.result { s.result = nil; return r }
            s.continuation = c
            return nil
        }
        if let ready { c.resume(returning: ready) }
    }

    /// Returns whether `r` is the outcome the caller gets.
    func resume(with r: Result<ConnectionBox.Opened, DBusError>) -> Bool {
        let (won, c): (Bool, CheckedContinuation<Result<ConnectionBox.Opened, DBusError>, Never>?) = state.withLock { s in
            guard !s.done else { return (false, nil) }
            s.done = true
            if let c = s.continuation { s.continuation = nil; return (true, c) }
            s.result = r
            return (true, nil)
        }
        c?.resume(returning: r)
        return won
    }
}

extension Duration {
    /// Whole milliseconds (towards zero), saturating at `Int64`'s bounds (no trap on a huge timeout).
    var milliseconds: Int64 {
        let (s, atto) = components
        let (ms, overflow) = s.multipliedReportingOverflow(by: 1000)
        let (sum, carry) = ms.addingReportingOverflow(atto / 1_000_000_000_000_000)
        return overflow || carry ? (s < 0 ? .min : .max) : sum
    }
}

enum LibDBus {
    private static let threadsReady: Bool = { dbus_threads_init_default() != 0 }()
    /// `dbus_threads_init_default()`, once per process.
    static func initialiseThreads() { _ = threadsReady }

    /// Moves a libdbus `DBusError` into ours and frees it.
    static func take(_ err: inout CDBus.DBusError) -> DBusError {
        defer { dbus_error_free(&err) }
        guard dbus_error_is_set(&err) != 0 else { return .connectionFailed(name: "", message: "unknown failure") }
        let name = err.name.map { String(cString: $0) } ?? ""
        let message = err.message.map { String(cString: $0) } ?? ""
        return .connectionFailed(name: name, message: message)
    }
}
