import Foundation
import TestSupport
import Testing

/// `scripts/order/gatt2mqtt.order` is linked with `--no-warn-symbol-ordering`, so names that no
/// longer exist are skipped without a word (docs/benchmarks.md "Memory"). `scripts/check-order`
/// makes that loud; here it runs on the debug binary the tests use (this package's own
/// unspecialised functions: the names a debug build shares with the release one).
@Suite struct OrderFileTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func checkOrder(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await offThePool { try runRepositoryScript("scripts/check-order", arguments) }
    }

    @Test func atMostATenthOfTheOrderIsStale() async throws {
        let result = try await Self.checkOrder([CLI.executable.path])
        #expect(result.status == 0, "\(result.output)")
        // It checked a real share of the file, not an empty subset.
        let counted = result.output.split(separator: " ").dropFirst(3).first.flatMap { Int($0) } ?? 0
        #expect(counted > 500, "\(result.output)")
    }

    @Test func anOrderOfGoneFunctionsFails() async throws {
        let directory = try TemporaryDirectory()
        let order = directory.path + "/stale.order"
        // Two functions of this package that do not exist, one that does (in every build).
        try """
            $s10BridgeCore0A0C14goneFunctionAyyF
            $s10BridgeCore0A0C14goneFunctionByyF
            $s10BridgeCore6TopicsV5routeyAC5RouteOSgSSF
            """.write(toFile: order, atomically: true, encoding: .utf8)
        let result = try await Self.checkOrder(["--order", order, CLI.executable.path])
        #expect(result.status == 1, "\(result.output)")
        #expect(result.output.hasPrefix("check-order: 2 of 3 functions"), "\(result.output)")
        #expect(result.output.contains("missing: $s10BridgeCore0A0C14goneFunctionAyyF"), "\(result.output)")
        #expect(result.output.contains("scripts/gen-order"), "\(result.output)")
    }
}
