/// Serialises connects (and scans) on one adapter: bluetoothd answers overlapping operations with
/// `InProgress` (`shared/spec/bluez.md`, behaviour 6). FIFO, cancellation-safe.
actor ConnectGate {
    private var busy = false
    private var waiters: [(id: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var nextID = 0

    /// Runs `body` when no other holder is inside.
    func withPermit<T: Sendable, E: Error>(_ body: @Sendable () async throws(E) -> T) async throws(E) -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        if !busy { busy = true; return }
        let id = nextID
        nextID += 1
        await withCheckedContinuation { c in waiters.append((id, c)) }
    }

    private func release() {
        if waiters.isEmpty { busy = false } else { waiters.removeFirst().continuation.resume() }
    }
}
