import BridgeCore
import Synchronization

/// A clock that moves only when the test says so (``advance(by:)``): what the bridge waits on
/// with it (ticks, backoffs, deadlines) happens exactly when the test has moved time past it,
/// never because real time passed. Its instants start at the real clock's now at creation.
/// The one manual clock of the tests: the core takes it as ``bridgeClock``, the device
/// simulators (which take any `Clock<Duration>`) take it as it is.
public final class ManualClock: Clock, Sendable {
    public typealias Instant = ContinuousClock.Instant

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

    /// ``now`` as an instant of the bridge's clock (``bridgeClock``'s `now`).
    public var bridgeNow: BridgeInstant { BridgeInstant(now) }

    /// How many tasks sleep on this clock now.
    public var sleeping: Int { state.withLock { $0.sleepers.count } }

    /// Time moves only by ``advance(by:)``, in any step.
    public var minimumResolution: Duration { .zero }

    /// The clock for a ``Bridge`` (`clock:`).
    public var bridgeClock: BridgeClock {
        BridgeClock(now: { [self] in BridgeInstant(now) }, sleep: Sleep { [self] in try await sleep(for: $0) })
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
        try await sleep(until: now + duration)
    }

    /// Sleeps until the clock reached `deadline` (at once if it has), or the task is cancelled.
    /// `tolerance` is ignored: a sleeper wakes exactly when an advance reaches its instant.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { s in
            defer { s.nextID += 1 }
            return s.nextID
        }
        if deadline <= now { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, CancellationError>? = state.withLock { s in
                    if s.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= s.now { return .success(()) }  // an advance reached it meanwhile
                    s.sleepers[id] = Sleeper(until: deadline, continuation: c)
                    return nil
                }
                if let outcome { c.resume(with: outcome) } else { sleeps.append(deadline) }
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
