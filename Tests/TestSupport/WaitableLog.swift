import Reactor
import Synchronization

/// An append-only record that a test can wait on: each `append` checks the waiters, and resumes
/// those whose condition now holds — no polling, so waits cost nothing while nothing happens
/// and end as soon as the element arrives. Each wait has a deadline. One per test double
/// (never process-global), so tests may run in parallel.
public final class WaitableLog<Element: Sendable>: Sendable {
    private struct Waiter {
        let ready: @Sendable ([Element]) -> Bool
        let continuation: CheckedContinuation<[Element]?, Never>
    }

    private struct State {
        var elements: [Element] = []
        var waiters: [Int: Waiter] = [:]
        /// Waits begun but not registered yet (their task may be cancelled before they are).
        var unregistered: Set<Int> = []
        /// Those of them cancelled already: they end at once when they get to register.
        var cancelled: Set<Int> = []
        var nextID = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Everything appended so far, in order.
    public var elements: [Element] { state.withLock { $0.elements } }

    /// How many waits are suspended now (for a test to start appending only once its waiters wait).
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Appends `element`, then resumes every waiter whose condition holds now.
    public func append(_ element: Element) {
        let (woken, elements) = state.withLock { s in
            s.elements.append(element)
            let ready = s.waiters.filter { $0.value.ready(s.elements) }
            for id in ready.keys { s.waiters[id] = nil }
            return (Array(ready.values), s.elements)
        }
        for waiter in woken { waiter.continuation.resume(returning: elements) }
    }

    /// Waits until `ready` holds for what was appended, or `timeout` passes, or the task is
    /// cancelled. Returns the elements that satisfied `ready`; `nil` when it did not hold in time.
    /// `ready` runs under the log's lock: it must not touch the log.
    public func wait(timeout: Duration, until ready: @escaping @Sendable ([Element]) -> Bool) async -> [Element]? {
        if let now = state.withLock({ ready($0.elements) ? $0.elements : nil }) { return now }
        let id = state.withLock { s in
            defer { s.nextID += 1 }
            s.unregistered.insert(s.nextID)
            return s.nextID
        }
        return await withDeadline(timeout) { await self.suspend(id, until: ready) }
    }

    /// Suspends until `ready` holds (resumed by `append`) or the task is cancelled (`nil`).
    private func suspend(_ id: Int, until ready: @escaping @Sendable ([Element]) -> Bool) async -> [Element]? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[Element]?, Never>) in
                let now: [Element]?? = state.withLock { s in
                    s.unregistered.remove(id)
                    if s.cancelled.remove(id) != nil { return .some(nil) }
                    if ready(s.elements) { return .some(s.elements) }
                    s.waiters[id] = Waiter(ready: ready, continuation: continuation)
                    return .none
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { s in
                if s.unregistered.contains(id) { s.cancelled.insert(id) }
                return s.waiters.removeValue(forKey: id)
            }
            waiter?.continuation.resume(returning: nil)
        }
    }
}
