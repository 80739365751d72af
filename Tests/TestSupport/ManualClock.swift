import BridgeCore
import Synchronization

/// A clock that moves only when the test says so (``advance(by:)``): what the bridge waits on
/// with it (ticks, backoffs, deadlines) happens exactly when the test has moved time past it,
/// never because real time passed. Its instants start at the real clock's now at creation.
public final class ManualClock: Sendable {
    private struct Sleeper {
        let until: ContinuousClock.Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: ContinuousClock.Instant
        var sleepers: [Int: Sleeper] = [:]
        var cancelled: Set<Int> = []
        var nextID = 0
    }

    private let state: Mutex<State>
    /// Every sleep begun, by its wake-up instant (for tests that wait until a task sleeps).
    public let sleeps = WaitableLog<ContinuousClock.Instant>()

    public init() { state = Mutex(State(now: .now)) }

    public var now: ContinuousClock.Instant { state.withLock { $0.now } }

    /// How many tasks sleep on this clock now.
    public var sleeping: Int { state.withLock { $0.sleepers.count } }

    /// The clock for a ``Bridge`` (`clock:`).
    public var bridgeClock: BridgeClock {
        BridgeClock(now: { [self] in now }, sleep: Sleep { [self] in try await sleep(for: $0) })
    }

    /// Waits (up to `timeout`) until a task sleeps until `instant` — e.g. the bridge's ticker,
    /// until now + its tick: advancing the clock then wakes it. Whether it did.
    public func sleeper(until instant: ContinuousClock.Instant, timeout: Duration = .seconds(5)) async -> Bool {
        await sleeps.wait(timeout: timeout) { $0.contains(instant) } != nil
    }

    /// Moves the clock by `duration` and wakes every sleeper whose instant it reached.
    public func advance(by duration: Duration) {
        let woken = state.withLock { s in
            s.now = s.now + duration
            let due = s.sleepers.filter { $0.value.until <= s.now }
            for id in due.keys { s.sleepers[id] = nil }
            return due.values.sorted { $0.until < $1.until }
        }
        for w in woken { w.continuation.resume() }
    }

    /// Sleeps until the clock reached now + `duration` (at once for zero), or the task is cancelled.
    public func sleep(for duration: Duration) async throws {
        let (id, until) = state.withLock { s in
            defer { s.nextID += 1 }
            return (s.nextID, s.now + duration)
        }
        if duration <= .zero { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let cancelled = state.withLock { s in
                    if s.cancelled.remove(id) != nil { return true }
                    s.sleepers[id] = Sleeper(until: until, continuation: c)
                    return false
                }
                if cancelled { c.resume(throwing: CancellationError()) } else { sleeps.append(until) }
            }
        } onCancel: {
            let sleeper = state.withLock { s in
                if let w = s.sleepers.removeValue(forKey: id) { return Optional(w) }
                s.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }
}
