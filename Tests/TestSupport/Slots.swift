import Synchronization

/// A counting gate for tests that start several child processes each (a broker, `gatt2mqtt
/// simulate` with its dbus-daemon, `gatt2mqtt run`, a Python client): with the suite running in
/// parallel on a 2-core machine, more of them at once than the cores can serve turns their
/// deadlines into flakiness, while the in-process tests beside them cost little. A test takes a
/// slot before it starts its processes and gives it back when it has stopped them; waiting for
/// a slot is an event (a continuation resumed by the release), not a poll. A test's time limit
/// counts its wait in this queue too, which grows with every process-heavy test the suite has
/// (about 3 min of them in all on this machine): the suites that take a slot (CLITests) allow
/// 5 min and more, so that a test is failed by its own hang, not by its place in the queue.
public final class Slots: Sendable {
    private struct Waiter {
        var count: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var free: Int
        var waiters: [Waiter] = []

        /// The waiters to resume now, in order: first come, first served, so a test that needs
        /// two slots is not passed over for ever by tests that need one.
        mutating func grant() -> [CheckedContinuation<Void, Never>] {
            var ready: [CheckedContinuation<Void, Never>] = []
            while let first = waiters.first, first.count <= free {
                free -= first.count
                ready.append(waiters.removeFirst().continuation)
            }
            return ready
        }
    }

    private let state: Mutex<State>
    private let total: Int

    public init(_ count: Int) {
        state = Mutex(State(free: count))
        total = count
    }

    /// Waits until `count` slots are free and takes them all at once. Taking several one at a
    /// time would deadlock two such tests, each holding one and waiting for another.
    public func acquire(_ count: Int = 1) async {
        precondition(count >= 1 && count <= total, "a test takes 1…\(total) slots")
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
                s.waiters.append(Waiter(count: count, continuation: c))
                return s.grant()
            }
            ready.forEach { $0.resume() }
        }
    }

    /// How many acquirers wait (for tests of the gate itself).
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Gives `count` slots back (to the longest waiters they satisfy). Callable from synchronous
    /// code (a `defer`, a `stop()`).
    public func release(_ count: Int = 1) {
        let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.free += count
            return s.grant()
        }
        ready.forEach { $0.resume() }
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
