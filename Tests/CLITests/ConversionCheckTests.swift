import Foundation
import TestSupport
import Testing

/// `scripts/check-conversions` (run by scripts/test before the build): no unchecked conversion
/// of a floating-point value to an integer type in Sources/, the kind that let one number from a
/// broker client or a config file kill the bridge (issue 20).
@Suite struct ConversionCheckTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func check(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await offThePool { try runRepositoryScript("scripts/check-conversions", arguments) }
    }

    @Test func theTreeHasNone() async throws {
        let r = try await Self.check([Self.root.appendingPathComponent("Sources").path])
        #expect(r.status == 0, "\(r.output)")
        let selfTest = try await Self.check(["--self-test"])
        #expect(selfTest.status == 0, "\(selfTest.output)")
    }

    /// The line that trapped on `command_timeout: 1e300` is caught, with its file and line; the
    /// same line with a reason passes.
    @Test func theOriginalParseDurationLineIsCaught() async throws {
        let directory = try TemporaryDirectory()
        let file = directory.path + "/Durations.swift"
        try """
            func parseDuration(_ t: String) -> Duration? {
                guard let v = Double(t), v >= 0, v.isFinite else { return nil }
                return .milliseconds(Int64((v * 1000).rounded()))
            }
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let r = try await Self.check([file])
        #expect(r.status == 1)
        #expect(r.output.contains("\(file):3: unchecked conversion to Int64 of a floating-point value"), "\(r.output)")
        try """
            func parseDuration(_ t: String) -> Duration? {
                guard let v = Double(t), v >= 0, v <= 1e9 else { return nil }
                return .milliseconds(Int64((v * 1000).rounded()))  // checked: 0...1e9 s fits (guard above)
            }
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let allowed = try await Self.check([file])
        #expect(allowed.status == 0, "\(allowed.output)")
    }
}
