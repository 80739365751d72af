import BinaryCoding
import Foundation
import GoProCodec
import Testing

/// Replays the fuzz corpora (Corpus/assembler, Corpus/response: the committed seeds of
/// Fuzz/GoProAssembler and Fuzz/GoProResponse plus what fuzzing found) with the targets' checks.
@Suite struct CorpusReplayTests {
    static func corpus(_ name: String) throws -> [(String, [UInt8])] {
        let dir = Fixtures.directory.appendingPathComponent("Corpus/\(name)")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        return try files.map { ($0, [UInt8](try Data(contentsOf: dir.appendingPathComponent($0)))) }
    }

    /// `[length][bytes]` records → packets.
    static func records(_ bytes: ArraySlice<UInt8>) -> [[UInt8]] {
        var out = [[UInt8]]()
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let n = Int(bytes[i])
            out.append(Array(bytes[(i + 1)..<min(i + 1 + n, bytes.endIndex)]))
            i += 1 + n
        }
        return out
    }

    @Test func assemblerCorpus() throws {
        let inputs = try Self.corpus("assembler")
        #expect(inputs.count >= 20)
        var completed = 0
        for (name, bytes) in inputs {
            var a = GoProAssembler()
            for p in Self.records(bytes[...]) {
                if let m = try? a.append(p) { completed += 1; #expect(m.count <= 65535, "\(name)") }
            }
            if bytes.count <= GoProPacketizer.maximumMessageLength {
                let packets = try GoProPacketizer.packetize(bytes, continuation: .counting)
                #expect(try Fixtures.reassemble(packets.arrays) == [bytes], "\(name)")
            }
        }
        #expect(completed > 0)
    }

    @Test func responseCorpus() throws {
        let inputs = try Self.corpus("response")
        #expect(inputs.count >= 30)
        let characteristics: [GoProCharacteristic] = [.commandResponse, .settingsResponse, .queryResponse, .networkManagementResponse]
        var decoded = 0
        for (name, bytes) in inputs where !bytes.isEmpty {
            let c = characteristics[Int(bytes[0]) % characteristics.count]
            var messages = [Array(bytes.dropFirst())]
            var a = GoProAssembler()
            for p in Self.records(bytes.dropFirst()) { if let m = try? a.append(p) { messages.append(m) } }
            for m in messages {
                guard let r = try? GoProResponse(decoding: m, on: c) else { continue }
                decoded += 1
                #expect((try? JSONValue(parsing: r.json.jsonText)) != nil, "\(name)")
                if case let .query(q) = r {
                    #expect(q.entries.last.map { $0.offset + $0.length } ?? 2 == m.count, "\(name)")
                }
            }
        }
        #expect(decoded >= 20)
    }
}
