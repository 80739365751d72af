import BinaryCoding
import Foundation
import GoProCodec
import Testing

/// Test helpers: vectors live in Tests/GoProCodecTests/Vectors (copied from the shared set).
enum Fixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()

    static func vector(_ name: String) throws -> JSONValue {
        let data = try Data(contentsOf: directory.appendingPathComponent("Vectors/\(name)"))
        return try JSONValue(parsing: [UInt8](data))
    }

    static func hex(_ v: JSONValue?) throws -> [UInt8] {
        let s = try #require(v?.stringValue)
        return try Hex.decode(s)
    }

    static func hexList(_ v: JSONValue?) throws -> [[UInt8]] {
        try #require(v?.arrayValue).map { try hex($0) }
    }

    /// Feeds packets in order; returns the messages that completed.
    static func reassemble(_ packets: [[UInt8]]) throws -> [[UInt8]] {
        var a = GoProAssembler()
        var out = [[UInt8]]()
        for p in packets { if let m = try a.append(p) { out.append(m) } }
        return out
    }
}

/// Deterministic generator for property tests (SplitMix64).
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
