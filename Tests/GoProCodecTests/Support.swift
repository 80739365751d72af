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
