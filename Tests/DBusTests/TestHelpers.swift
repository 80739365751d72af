import DBus
import Foundation
import Reactor
import Synchronization
import TestSupport
import Testing

/// Runs `body` with a fresh bus and an event loop for its connections; afterwards the bus is
/// stopped and then the loop shut down, whatever happens (close the connections in `body`).
func withBus(_ body: (PrivateBus, EventLoop) async throws -> Void) async throws {
    try await withEventLoop(name: "t-dbus") { loop in
        let bus = try await PrivateBus.started()
        defer { bus.stop() }
        try await body(bus, loop)
    }
}

/// Consumes a signal stream in a task and lets the test wait (with a deadline) for what arrived.
final class SignalCollector: Sendable {
    private let log = WaitableLog<DBusMessage>()
    /// How the stream ended, once it has: `nil` finished normally, else the error it threw.
    private let end = WaitableLog<DBusError?>()
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(_ stream: DBusSignalStream) {
        let t = Task { [log, end] in
            do {
                for try await m in stream { log.append(m) }
                end.append(nil)
            } catch {
                end.append(error as? DBusError ?? .cancelled)
            }
        }
        task.withLock { $0 = t }
    }

    var messages: [DBusMessage] { log.elements }

    /// Waits until at least `count` messages arrived (or `seconds` passed) and returns them all.
    func wait(count: Int, seconds: Double = 5) async -> [DBusMessage] {
        await log.wait(timeout: .milliseconds(Int64(seconds * 1000))) { $0.count >= count } ?? log.elements
    }

    /// Waits until the stream ended; returns how (`nil` if it has not ended in time).
    func waitEnd(seconds: Double = 5) async -> DBusError?? {
        await end.wait(timeout: .milliseconds(Int64(seconds * 1000))) { !$0.isEmpty }?.first
    }

    func cancel() { task.withLock { $0?.cancel() } }
    deinit { cancel() }
}
