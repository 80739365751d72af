import Foundation
import Testing

/// The tests run in parallel in one process: a test that changed the process environment with
/// `setenv`/`unsetenv` directly could free the `environ` array under another test's `posix_spawn`
/// (a CI run: `posix_spawn /usr/sbin/mosquitto failed: 14`). They go through TestSupport's
/// `setEnvironmentVariable`, which `spawn` excludes; this keeps it so.
@Suite struct EnvironmentRaceTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func noTestChangesTheEnvironmentBehindTheSpawnLock() throws {
        let tests = Self.root.appendingPathComponent("Tests")
        let files = try #require(FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil))
        var offenders: [String] = []
        var scanned = 0
        for case let url as URL in files where url.pathExtension == "swift" {
            guard !url.path.hasSuffix("TestSupport/Processes.swift"), url.lastPathComponent != "EnvironmentRaceTests.swift" else { continue }
            scanned += 1
            let text = try String(contentsOf: url, encoding: .utf8)
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains("setenv(") || line.contains("unsetenv(") || line.contains("putenv(") {
                offenders.append("\(url.lastPathComponent):\(n + 1)")
            }
        }
        #expect(scanned > 100)
        #expect(offenders.isEmpty, "use setEnvironmentVariable (TestSupport): \(offenders)")
    }
}
