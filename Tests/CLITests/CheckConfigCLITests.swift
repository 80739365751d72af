import Foundation
import Testing

@Suite struct CheckConfigCLITests {
    static let configDir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../config").standardized.path

    @Test func acceptsTheShippedDemo() async throws {
        let r = try await CLI.run(["check-config", Self.configDir + "/demo.yaml"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("3 device(s)"))
    }

    @Test func typoIsOneLineWithPathAndLine() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bad-\(UUID().uuidString).yaml")
        try "devices:\n  - id: x\n    adress: C0:FF:EE:00:00:01\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let r = try await CLI.run(["check-config", file.path])
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.contains("line 3: devices[0].adress: unknown key") == true)
    }

    @Test func missingFile() async throws {
        let r = try await CLI.run(["check-config", "/nonexistent/gatt2mqtt.yaml"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("cannot read"))
    }
}
