/// Polls `condition` (every 10 ms) until it holds or `timeout` passes; returns whether it held.
/// For state that no event announces (a counter of a simulator, a file, a thread list); where a
/// test double records what happened, wait on its record instead (``WaitableLog``).
/// The one polling loop of the tests: a test that polls calls this (or ``eventuallyAsync``), never
/// a loop of its own around `Task.sleep`.
public func eventually(timeout: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
    await eventuallyAsync(timeout: timeout) { condition() }
}

/// ``eventually(timeout:_:)`` for a condition that must await.
public func eventuallyAsync(timeout: Duration = .seconds(30), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return await condition()
}
