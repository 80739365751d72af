import DBus
import Foundation
import Synchronization
import TestSupport
import Testing

/// Runs `body` with a fresh bus that is stopped afterwards, whatever happens.
func withBus(_ body: (PrivateBus) async throws -> Void) async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    try await body(bus)
}


/// Consumes a signal stream in a task and lets the test wait (with a deadline) for what arrived.
final class SignalCollector: Sendable {
    private struct State {
        var messages: [DBusMessage] = []
        var end: DBusError?? = nil  // .some(nil): finished normally; .some(e): threw e
    }
    private final class Store: Sendable {
        let state = Mutex(State())
    }
    private let store = Store()
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(_ stream: DBusSignalStream) {
        let t = Task { [store] in
            do {
                for try await m in stream { store.state.withLock { $0.messages.append(m) } }
                store.state.withLock { $0.end = .some(nil) }
            } catch {
                store.state.withLock { $0.end = .some(error as? DBusError ?? .cancelled) }
            }
        }
        task.withLock { $0 = t }
    }

    var messages: [DBusMessage] { store.state.withLock { $0.messages } }

    /// Waits until at least `count` messages arrived (or `seconds` passed) and returns them all.
    func wait(count: Int, seconds: Double = 5) async -> [DBusMessage] {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            let m = messages
            if m.count >= count { return m }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return messages
    }

    /// Waits until the stream ended; returns how (`nil` if it has not ended in time).
    func waitEnd(seconds: Double = 5) async -> DBusError?? {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let end = store.state.withLock({ $0.end }) { return end }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    func cancel() { task.withLock { $0?.cancel() } }
    deinit { cancel() }
}
