import Reactor

/// Runs `body` with a new event loop and shuts the loop down when `body` returns or throws. Close
/// the D-Bus connections and disconnect the MQTT clients made on the loop inside `body`: their
/// teardown runs on the loop, and work queued after the shutdown never runs. Do not call it from
/// a task that prefers the loop (the shutdown joins the loop's thread).
public func withEventLoop<R>(name: String = "test-loop", _ body: (EventLoop) async throws -> R) async rethrows -> R {
    let loop = EventLoop(name: name)
    defer { loop.shutdown() }
    return try await body(loop)
}

extension EventLoop {
    /// Nothing registered: no watch, no pending timer, no hook.
    public static let nothingRegistered = Registrations(watches: 0, timers: 0, hooks: 0)

    /// Waits (up to `timeout`) until nothing is registered on the loop any more — what a component
    /// leaves behind once its teardown, which runs on the loop shortly after close or loss, has
    /// finished; returns the registrations last seen.
    public func settled(timeout: Duration = .seconds(5)) async -> Registrations {
        var seen = await registrations()
        _ = await eventuallyAsync(timeout: timeout) {
            seen = await registrations()
            return seen == Self.nothingRegistered
        }
        return seen
    }
}
