import Foundation
import Testing

/// `gatt2mqtt config-schema` prints the schema generated from the loader's declarations, and
/// docs/config-schema.json (what editors and the yaml-language-server modelines in config/ read)
/// is that output: regenerate it with `gatt2mqtt config-schema > docs/config-schema.json`.
@Suite struct ConfigSchemaCLITests {
    static let committed = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/config-schema.json")

    @Test func committedSchemaIsWhatTheCommandGenerates() async throws {
        let r = try await CLI.run(["config-schema"])
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        let file = try String(contentsOf: Self.committed, encoding: .utf8)
        #expect(r.stdout == file, "docs/config-schema.json is out of date: run gatt2mqtt config-schema > docs/config-schema.json")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(json["$schema"] as? String == "http://json-schema.org/draft-07/schema#")
    }
}
