import Synchronization

/// A session's events, in order: posted from any thread (``yield(_:)``), taken by the session's
/// one run loop (``next()``). What an `AsyncStream` with an unbounded buffer did for the session,
/// without its generic machinery: a command crosses it three times (the command, its write's
/// return, its answer), and the stream's yield and next cost ~30k instructions per command
/// (callgrind, docs/benchmarks.md "Instructions per command").
///
/// Like the stream: an event posted after ``finish()`` is dropped (the session answers what it
/// holds before it finishes); after `finish`, ``next()`` returns what is buffered, then nil. A
/// waiting ``next()`` returns nil when its task is cancelled.
final class SessionEvents: Sendable {
    private struct State: ~Copyable {
        var buffer: [DeviceSession.Event] = []
        /// The first event in ``buffer`` not taken yet.
        var head = 0
        var waiter: UnsafeContinuation<DeviceSession.Event?, Never>?
        var finished = false

        mutating func take() -> DeviceSession.Event? {
            guard head < buffer.count else { return nil }
            let event = buffer[head]
            head += 1
            if head == buffer.count {
                buffer.removeAll(keepingCapacity: buffer.capacity <= 1024)
                head = 0
            } else if head >= 256, head * 2 >= buffer.count {
                buffer.removeFirst(head)  // a backlog that never drains does not keep what was taken
                head = 0
            }
            return event
        }
    }

    private let state = Mutex(State())

    /// Whether a ``next()`` waits now (for tests).
    var hasWaiter: Bool { state.withLock { $0.waiter != nil } }

    /// Posts `event` (any thread); dropped after ``finish()``.
    func yield(_ event: DeviceSession.Event) {
        let waiter = state.withLock { s -> UnsafeContinuation<DeviceSession.Event?, Never>? in
            guard !s.finished else { return nil }
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.buffer.append(event)
            return nil
        }
        waiter?.resume(returning: event)
    }

    /// No more events: a waiting ``next()`` returns nil, later ones what is buffered, then nil.
    func finish() {
        let waiter = state.withLock { s -> UnsafeContinuation<DeviceSession.Event?, Never>? in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next event, waiting for one; nil once finished and drained, or when the task is
    /// cancelled while it waits. One caller at a time (the session's run loop). Runs on the
    /// caller's executor (`isolation`): a nonisolated async function would hop off the session's
    /// actor and back for every event, buffered or not.
    func next(isolation: isolated (any Actor)? = #isolation) async -> DeviceSession.Event? {
        if let event = state.withLock({ $0.take() }) { return event }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: isolation) { (c: UnsafeContinuation<DeviceSession.Event?, Never>) in
                let ready = state.withLock { s -> DeviceSession.Event?? in
                    if let event = s.take() { return .some(event) }
                    if s.finished || Task.isCancelled { return .some(nil) }
                    s.waiter = c
                    return .none
                }
                if case let .some(event) = ready { c.resume(returning: event) }
            }
        } onCancel: {
            let waiter = state.withLock { s -> UnsafeContinuation<DeviceSession.Event?, Never>? in
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}
