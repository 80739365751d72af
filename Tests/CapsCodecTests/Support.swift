import BinaryCoding
import Foundation
import TestSupport
import Testing

@testable import CapsCodec

/// Test vectors copied from ../shared/vectors/caps (a user's clone has no ../shared).
enum Vectors {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Vectors")

    static func load(_ name: String) throws -> JSONValue {
        let data = try Data(contentsOf: directory.appendingPathComponent(name))
        return try JSONValue(parsing: Array(data))
    }

    /// All vectors of a file (`vectors` array).
    static func vectors(_ name: String) throws -> [JSONValue] {
        try need(load(name)["vectors"]?.arrayValue)
    }

    static func bytes(_ hex: JSONValue?) throws -> [UInt8] {
        try Hex.decode(try need(hex?.stringValue))
    }

    /// Builds the expected Caps straight from a vector's member list, following the vector
    /// README (floats from `bits`, strings from `utf8_hex`, binary from `value_hex`); it does not
    /// use the codec's own JSON reader.
    static func expected(_ members: JSONValue) throws -> Caps {
        var out = Caps()
        for m in try need(members.arrayValue) {
            let type = try need(m["type"]?.stringValue)
            let v = m["value"]
            switch type {
            case "V": out.append(.void)
            case "i": out.append(.int32(Int32(try need(v?.int64Value))))
            case "u": out.append(.uint32(UInt32(try need(v?.int64Value))))
            case "l": out.append(.int64(try need(Int64(try need(v?.stringValue)))))
            case "k": out.append(.uint64(try need(UInt64(try need(v?.stringValue)))))
            case "f": out.append(.float(Float(bitPattern: try need(UInt32(try need(m["bits"]?.stringValue), radix: 16)))))
            case "d": out.append(.double(Double(bitPattern: try need(UInt64(try need(m["bits"]?.stringValue), radix: 16)))))
            case "S":
                let bytes = try Vectors.bytes(m["utf8_hex"])
                let s = try need(String(validating: bytes, as: UTF8.self))
                #expect(s == v?.stringValue)
                #expect(bytes.count == m["byte_length"]?.intValue)
                out.append(.string(s))
            case "B":
                let bytes = try Vectors.bytes(m["value_hex"])
                #expect(bytes.count == m["byte_length"]?.intValue)
                out.append(.binary(bytes))
            case "O": out.append(.object(try expected(try need(v))))
            default: Issue.record("unknown type \(type) in a vector")
            }
        }
        return out
    }

    /// Every (file, vector) pair that has `members` and `hex`.
    static func encodable() throws -> [(file: String, vector: JSONValue)] {
        var out = [(String, JSONValue)]()
        for f in ["basic.json", "leb128.json", "member_counts.json", "strings_binary.json", "cxr_packets.json"] {
            for v in try vectors(f) where v["members"] != nil && v["hex"] != nil { out.append((f, v)) }
        }
        return out
    }
}

/// Random Caps values with the edge cases mixed in.
enum Generate {
    static let strings = ["", "a", "hi", "héllo wörld", "Привет", "😀🎉", "a\u{0}b", "tab\tquote\"back\\slash", "e\u{301}",
                          String(repeating: "x", count: 200)]

    static func caps(_ g: inout SeededRandom, depth: Int = 0) -> Caps {
        let n = Int.random(in: 0...(depth == 0 ? 12 : 5), using: &g)
        var c = Caps()
        for _ in 0..<n { c.append(value(&g, depth: depth)) }
        return c
    }

    static func integer<T: FixedWidthInteger>(_: T.Type, _ g: inout SeededRandom) -> T {
        switch Int.random(in: 0..<4, using: &g) {
        case 0: return [T.min, T.max, 0, 1, T.min == 0 ? 127 : -1, 128, 63, 64].randomElement(using: &g)!
        case 1: return T.random(in: T.min...T.max, using: &g) >> T(Int.random(in: 0..<(T.bitWidth - 1), using: &g))
        default: return T.random(in: T.min...T.max, using: &g)
        }
    }

    static func value(_ g: inout SeededRandom, depth: Int) -> CapsValue {
        switch Int.random(in: 0..<(depth < 3 ? 10 : 9), using: &g) {
        case 0: return .void
        case 1: return .int32(integer(Int32.self, &g))
        case 2: return .uint32(integer(UInt32.self, &g))
        case 3: return .int64(integer(Int64.self, &g))
        case 4: return .uint64(integer(UInt64.self, &g))
        case 5:
            let specials: [Float] = [0, -0.0, .nan, .infinity, -.infinity, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 0.1]
            return .float(Bool.random(using: &g) ? specials.randomElement(using: &g)! : Float(bitPattern: g.next32()))
        case 6:
            let specials: [Double] = [0, -0.0, .nan, .infinity, -.infinity, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 1.1]
            return .double(Bool.random(using: &g) ? specials.randomElement(using: &g)! : Double(bitPattern: g.next()))
        case 7:
            if Bool.random(using: &g) { return .string(strings.randomElement(using: &g)!) }
            let scalars = (0..<Int.random(in: 0...40, using: &g)).compactMap { _ in
                Unicode.Scalar(UInt32.random(in: 0...0x10FFFF, using: &g))
            }
            return .string(String(String.UnicodeScalarView(scalars)))
        case 8: return .binary((0..<Int.random(in: 0...300, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
        default: return .object(caps(&g, depth: depth + 1))
        }
    }
}

extension SeededRandom {
    mutating func next32() -> UInt32 { UInt32(truncatingIfNeeded: next()) }
}

/// The malformation of a thrown error, or nil.
func malformation(_ body: () throws -> Void) -> CapsError.Malformation? {
    do { try body() } catch let e as CapsError {
        if case let .malformed(m, _) = e { return m }
    } catch {}
    return nil
}

struct MissingValue: Error, CustomStringConvertible {
    let description: String
}

/// Unwraps or throws (usable inside other expressions, unlike nested `#require`).
func need<T>(_ value: T?, _ what: String = "value", sourceLocation: SourceLocation = #_sourceLocation) throws -> T {
    guard let value else {
        Issue.record("missing \(what)", sourceLocation: sourceLocation)
        throw MissingValue(description: "missing \(what)")
    }
    return value
}
