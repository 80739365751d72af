import BinaryCoding
import Foundation
import Testing

@testable import CapsCodec

/// Replays the committed fuzz corpora (Fuzz/Caps*/corpus) and the regression inputs in
/// Tests/CapsCodecTests/Corpus through the decoders: each input must throw a CapsError or
/// decode, and what decodes must re-encode and decode to the same value.
@Suite struct CorpusReplayTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func files() throws -> [URL] {
        let fm = FileManager.default
        var dirs = [root.appendingPathComponent("Tests/CapsCodecTests/Corpus")]
        let fuzz = root.appendingPathComponent("Fuzz")
        for name in (try? fm.contentsOfDirectory(atPath: fuzz.path)) ?? [] where name.hasPrefix("Caps") {
            dirs.append(fuzz.appendingPathComponent(name).appendingPathComponent("corpus"))
        }
        var out = [URL]()
        for d in dirs {
            for f in (try? fm.contentsOfDirectory(atPath: d.path)) ?? [] where !f.hasPrefix(".") {
                out.append(d.appendingPathComponent(f))
            }
        }
        return out.sorted { $0.path < $1.path }
    }

    @Test func corpusInputsDecodeOrThrow() throws {
        let files = try Self.files()
        #expect(files.count >= 80, "the committed seed corpus is present")
        var decoded = 0
        for url in files {
            let bytes = [UInt8](try Data(contentsOf: url))
            let name = url.lastPathComponent
            // Object decoder.
            do {
                let caps = try Caps(decoding: bytes)
                decoded += 1
                #expect(try Caps(decoding: caps.encoded()) == caps, "\(name)")
                #expect(try Caps(jsonText: caps.typedJSON.jsonText) == caps, "\(name)")
                if let packet = try? CXRPacket(caps: caps) {
                    #expect(try CXRPacket(decoding: packet.encoded()) == packet, "\(name)")
                }
            } catch {
                // Typed throws: the decoders can only throw CapsError here.
                #expect(!error.description.isEmpty)
            }
            // Stream reader (the CapsStream target's framing: first byte = chunk size - 1).
            guard let first = bytes.first else { continue }
            let chunk = Int(first) + 1
            var reader = CapsStreamReader(sizeLimit: 1 << 16)
            var i = 1
            do {
                while i < bytes.count {
                    let end = min(bytes.count, i + chunk)
                    for caps in try reader.feed(bytes[i..<end]) {
                        #expect(try Caps(decoding: caps.encoded()) == caps, "\(name)")
                        if let packet = try? CXRPacket(caps: caps) {
                            _ = packet.json
                            #expect(try CXRPacket(decoding: packet.encoded()) == packet, "\(name)")
                        }
                    }
                    i = end
                }
            } catch {
                // Typed throws: the decoders can only throw CapsError here.
                #expect(!error.description.isEmpty)
            }
        }
        #expect(decoded > 0)
    }
}
