import Synchronization

/// A counting gate for tests that start several child processes each (a broker, `gatt2mqtt
/// simulate` with its dbus-daemon, `gatt2mqtt run`, a Python client): with the suite running in
/// parallel on a 2-core machine, more of them at once than the cores can serve turns their
/// deadlines into flakiness, while the in-process tests beside them cost little. A test takes a
/// slot before it starts its processes and gives it back when it has stopped them; waiting for
/// a slot is an event (a continuation resumed by the release), not a poll.
public final class Slots: Sendable {
    private struct State {
        var free: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    public init(_ count: Int) { state = Mutex(State(free: count)) }

    /// Waits for a free slot and takes it.
    public func acquire() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.free > 0 {
                    s.free -= 1
                    return true
                }
                s.waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    /// Gives a slot back (to the longest waiter, if any). Callable from synchronous code (a
    /// `defer`, a `stop()`).
    public func release() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.waiters.isEmpty {
                s.free += 1
                return nil
            }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }

    /// Runs `body` holding a slot.
    public func with<T>(_ body: () async throws -> T) async rethrows -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    /// The slots of the process-heavy end-to-end tests (each a broker, an emulator process and a
    /// bridge process, or a script that starts them): two at once.
    public static let processHeavy = Slots(2)
}
