/// Runs `operation` until it returns or `timeout` passes, whichever comes first (then it is
/// cancelled, and must end on cancellation); its result, or nil at the deadline. The one timeout
/// race of the project: the web frontend's and the metrics endpoint's request timeout, the MQTT
/// client's drain at shutdown, `simulate --seconds`, and the tests' waits.
/// - Parameter sleep: how the deadline is waited for (default `Task.sleep`; an event loop's timer,
///   so that waiting wakes no other thread).
public func withDeadline<T: Sendable>(_ timeout: Duration,
                                      sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
                                      _ operation: @escaping @Sendable () async -> T?) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await operation() }
        group.addTask {
            try? await sleep(timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
