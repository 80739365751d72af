import Dispatch

/// The event loop device sessions run on (the runtime's): a serial executor, and whether its
/// caller is one of the loop's own callbacks, outside any task — where a session isolated to it
/// may be entered at once, nothing else isolated to it running (``SessionEvents``).
public struct SessionLoop: Sendable {
    public let executor: any SerialExecutor
    public let inCallback: @Sendable () -> Bool

    public init(executor: any SerialExecutor, inCallback: @escaping @Sendable () -> Bool) {
        self.executor = executor
        self.inCallback = inCallback
    }
}

/// A serial executor on a dispatch queue of its own: what a device session runs on when the
/// bridge has no event loop to give it (``SessionOutput/loop``; tests, tools), as a default
/// actor would.
final class QueueExecutor: SerialExecutor {
    private let queue: DispatchQueue

    init(label: String) { queue = DispatchQueue(label: label) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
