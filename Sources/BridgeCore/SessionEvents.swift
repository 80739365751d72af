import Synchronization

/// A session's events, in order: posted from any thread (``yield(_:inline:)``), taken by the session's
/// one run loop (``next()``). What an `AsyncStream` with an unbounded buffer did for the session,
/// without its generic machinery: a command crosses it three times (the command, its write's
/// return, its answer), and the stream's yield and next cost ~30k instructions per command
/// (callgrind, docs/benchmarks.md "Instructions per command").
///
/// Like the stream: an event posted after ``finish()`` is dropped (the session answers what it
/// holds before it finishes); after `finish`, ``next()`` returns what is buffered, then nil. A
/// waiting ``next()`` returns nil when its task is cancelled.
///
/// **Handled in the caller's turn.** A session on the bridge's event loop (its executor) lets
/// the loop's own callbacks — an MQTT message, a D-Bus reply, a notification's read — handle an
/// event at once instead of resuming the session's task for it (``Inline``): when its run loop
/// waits with nothing buffered, the caller is on the loop's thread outside any task (so no code
/// of the session runs now: it only ever runs on that thread, and its jobs run in tasks), and no
/// other event is being handled that way. Order holds: an event posted meanwhile, from this
/// thread or another, goes the usual way and the run loop takes it once the loop is free again.
final class SessionEvents: Sendable {
    /// Who may handle an event in the caller's turn, and how (a class: taken under the lock at
    /// every post, one reference, not its three).
    final class Inline: Sendable {
        /// Whether the caller is one of the session's loop's callbacks (``SessionLoop/inCallback``).
        let inCallback: @Sendable () -> Bool
        /// Handles one event, isolated to the session (``DeviceSession/handleNow(_:)``).
        let handle: @Sendable (DeviceSession.Event) -> Void

        init(loop: SessionLoop, handle: @escaping @Sendable (DeviceSession.Event) -> Void) {
            inCallback = loop.inCallback
            self.handle = handle
        }
    }

    private struct State: ~Copyable {
        var buffer: [DeviceSession.Event] = []
        /// The first event in ``buffer`` not taken yet.
        var head = 0
        var waiter: UnsafeContinuation<DeviceSession.Event?, Never>?
        var finished = false
        /// Set while the session's run loop runs (``allowInline(_:)``), cleared by ``finish()``.
        var inline: Inline?
        /// An event is being handled in its caller's turn.
        var handlingInline = false

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

    /// Posts `event` (any thread); dropped after ``finish()``. With `inline` (an event that waits
    /// for nothing, ``DeviceSession/handleNow(_:)``), handled before this returns when the session
    /// allows it and the caller may (the type's comment).
    func yield(_ event: DeviceSession.Event, inline: Bool = false) {
        enum Action {
            case none
            case resume(UnsafeContinuation<DeviceSession.Event?, Never>)
            case handle(@Sendable (DeviceSession.Event) -> Void)
        }
        let action = state.withLock { s -> Action in
            guard !s.finished else { return .none }
            if let w = s.waiter {
                if inline, let handler = s.inline, !s.handlingInline, handler.inCallback() {
                    s.handlingInline = true  // the run loop stays waiting
                    return .handle(handler.handle)
                }
                s.waiter = nil
                return .resume(w)
            }
            s.buffer.append(event)
            return .none
        }
        switch action {
        case .none: break
        case let .resume(waiter): waiter.resume(returning: event)
        case let .handle(handle):
            handle(event)
            state.withLock { $0.handlingInline = false }
        }
    }

    /// Lets the callers of ``yield(_:inline:)`` in `inline.loop`'s callbacks handle events in their turn (the
    /// session's run loop, when it starts), until ``finish()``.
    func allowInline(_ inline: Inline) {
        state.withLock { $0.inline = inline }
    }

    /// No more events: a waiting ``next()`` returns nil, later ones what is buffered, then nil.
    func finish() {
        let waiter = state.withLock { s -> UnsafeContinuation<DeviceSession.Event?, Never>? in
            s.finished = true
            s.inline = nil  // it holds the session
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
