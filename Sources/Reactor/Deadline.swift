/// Runs `operation` until it returns or `timeout` passes, whichever comes first (then it is
/// cancelled, and must end on cancellation); its result, or nil at the deadline. The web
/// frontend's and the metrics endpoint's request timeout, and the tests' waits.
public func withDeadline<T: Sendable>(_ timeout: Duration, _ operation: @escaping @Sendable () async -> T?) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await operation() }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
