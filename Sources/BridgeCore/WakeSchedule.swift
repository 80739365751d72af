import Synchronization

/// When the bridge's timer has work: each device session's next deadline (a waiting command's
/// expiry, the answer timeout of the one in flight, a link waiter's deadline, the availability
/// silence, a poll, the keep-alive, a passive device's `min_interval` or silence), posted by the
/// session after each event it handles. `Bridge.run()`'s one timer task sleeps until the earliest
/// of them (``wait(until:clock:)``) and is woken at once when a deadline earlier than that is
/// posted, so an idle bridge wakes only for work instead of at a fixed tick (issue 24 §4).
/// One value behind one lock; any thread.
final class WakeSchedule: Sendable {
    typealias Instant = BridgeInstant

    private struct State {
        /// Each session's next deadline (absent: none).
        var deadlines: [ObjectIdentifier: Instant] = [:]
        /// The timer task, while it waits: resumed when an earlier deadline comes.
        var waiter: CheckedContinuation<Void, Never>?
        /// The instant it waits until (nil: no deadline at all).
        var armed: Instant?
        /// Waits begun (for the tests: an idle bridge begins none); the last one's number.
        var waits = 0
        /// A wait cancelled before it began to wait (its number).
        var cancelled: Int?

        var earliest: Instant? { deadlines.values.min() }

        /// The waiter to resume when `deadline` is earlier than what it waits for.
        mutating func takeWaiter(ifEarlier deadline: Instant) -> CheckedContinuation<Void, Never>? {
            guard let w = waiter, armed.map({ deadline < $0 }) ?? true else { return nil }
            waiter = nil
            return w
        }
    }

    private let state = Mutex(State())

    /// Session `key`'s next deadline (nil: none); wakes the timer when it is earlier than the
    /// instant it waits for.
    func set(_ key: ObjectIdentifier, _ deadline: Instant?) {
        let woken = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.deadlines[key] = deadline
            return deadline.flatMap { s.takeWaiter(ifEarlier: $0) }
        }
        woken?.resume()
    }

    /// The sessions whose deadline is at or before `now`; their deadlines are taken out (each
    /// posts its next one once it has handled the tick it is sent).
    func takeDue(at now: Instant) -> Set<ObjectIdentifier> {
        state.withLock { s in
            let due = Set(s.deadlines.filter { $0.value <= now }.keys)
            for k in due { s.deadlines[k] = nil }
            return due
        }
    }

    /// The earliest deadline of all sessions.
    var earliest: Instant? { state.withLock { $0.earliest } }

    /// How many waits the timer has begun.
    var waits: Int { state.withLock { $0.waits } }

    /// Waits until `instant` on `clock`, or until a session posts a deadline earlier than it, or
    /// until the task is cancelled. With no `instant` it waits only for a deadline.
    func wait(until instant: Instant?, clock: BridgeClock) async {
        await withTaskGroup(of: Void.self) { group in
            if let instant {
                group.addTask { try? await clock.sleep(instant - clock.now()) }
            }
            group.addTask { await self.earlierDeadline(than: instant) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Returns when a deadline earlier than `armed` is posted (at once if one was meanwhile), or
    /// when the task is cancelled.
    private func earlierDeadline(than armed: Instant?) async {
        let id = state.withLock { s in
            s.waits += 1
            return s.waits
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let atOnce = state.withLock { s -> Bool in
                    if s.cancelled == id { return true }
                    if let e = s.earliest, armed.map({ e < $0 }) ?? true { return true }
                    s.waiter = c
                    s.armed = armed
                    return false
                }
                if atOnce { c.resume() }
            }
        } onCancel: {
            let w = state.withLock { s -> CheckedContinuation<Void, Never>? in
                guard s.waits == id else { return nil }  // an earlier wait's, already over
                guard let w = s.waiter else {
                    s.cancelled = id  // not waiting yet: it returns as it begins
                    return nil
                }
                s.waiter = nil
                return w
            }
            w?.resume()
        }
    }
}
