import BridgeCore

extension Bridge {
    /// Runs the bridge for the duration of `body`, then stops it (its run cancelled).
    public func running(_ body: () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.run() }
            defer { group.cancelAll() }
            try await body()
        }
    }
}
