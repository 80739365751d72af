import BinaryCoding
import Foundation
import GattLayout
import Testing

/// Replays the fuzz corpus (a copy of Fuzz/Layout/corpus, minimised, including every input that
/// once crashed) with the fuzz target's checks: each built-in and the rich layout decode or throw
/// a GattLayoutError, and what decodes survives encode → decode unchanged.
@Suite struct CorpusReplayTests {
    static var corpusDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Corpus")
    }

    static func inputs() throws -> [(name: String, bytes: [UInt8])] {
        let names = try FileManager.default.contentsOfDirectory(atPath: corpusDirectory.path)
            .filter { !$0.hasPrefix(".") }.sorted()
        return try names.map { name in
            (name, [UInt8](try Data(contentsOf: corpusDirectory.appendingPathComponent(name))))
        }
    }

    func exercise(_ layout: GattLayout, _ bytes: [UInt8], _ name: String) throws {
        let value: JSONValue
        do throws(GattLayoutError) { value = try layout.decode(bytes) } catch { return }
        let again = try layout.decode(try layout.encode(value))
        #expect(again == value, "\(name) with \(layout.name ?? "custom layout")")
    }

    @Test func replayCorpus() throws {
        let inputs = try Self.inputs()
        #expect(inputs.count >= 10, "the corpus is missing")
        var layouts = try BuiltinLayout.allCases.map { try $0.layout() }
        layouts.append(try layout(richLayoutJSON))
        var decoded = 0
        for (name, bytes) in inputs {
            for l in layouts {
                if (try? l.decode(bytes)) != nil { decoded += 1 }
                try exercise(l, bytes, name)
            }
            // Inputs that are layout definitions are exercised on their own bytes, as the fuzzer does.
            if let json = try? JSONValue(parsing: bytes), let custom = try? GattLayout(json: json) {
                try exercise(custom, bytes, name)
                try exercise(custom, Array(bytes.reversed()), name)
            }
        }
        #expect(decoded > 0)
    }

    /// The input the fuzzer found: the rich layout's float32 field at −Float.greatestFiniteMagnitude.
    @Test func float32MaximumFoundByFuzzing() throws {
        let bytes = [UInt8](try Data(contentsOf: Self.corpusDirectory.appendingPathComponent("float32-max-roundtrip.bin")))
        let l = try layout(richLayoutJSON)
        let value = try l.decode(bytes)
        #expect(value["ratio"] == .double(-3.4028235e38))
        #expect(try l.decode(try l.encode(value)) == value)
    }
}
