@testable import BridgeRuntime
import Testing

/// The crash line's buffer writer (`CrashTrace.noteMessage` formats into the prepared buffer with
/// it, once per message). The whole line of a real crash is checked end to end in
/// CLITests/CrashEndToEndTests.
@Suite struct CrashTraceLineTests {
    /// What `body` writes into a buffer of `capacity` bytes.
    static func written(capacity: Int, _ body: (inout CrashTrace.LineWriter) -> Void) -> String {
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        defer { buffer.deallocate() }
        var line = CrashTrace.LineWriter(base: buffer, capacity: capacity)
        body(&line)
        return String(decoding: UnsafeBufferPointer(start: buffer, count: line.count), as: UTF8.self)
    }

    @Test("numbers in decimal, text and bytes in order")
    func decimalsAndText() {
        for (value, text) in [(0, "0"), (7, "7"), (10, "10"), (160, "160"), (1_000_000, "1000000"), (Int.max, "9223372036854775807")] {
            #expect(Self.written(capacity: 64) { $0.append(decimal: value) } == text)
        }
        let line = Self.written(capacity: 64) { line in
            line.append("topic ")
            Array("a/b".utf8).withUnsafeBufferPointer { line.append($0) }
            line.append(", ")
            line.append(decimal: 22)
            line.append(byte: UInt8(ascii: "\n"))
        }
        #expect(line == "topic a/b, 22\n")
    }

    @Test("what does not fit is dropped, never written past the buffer")
    func truncates() {
        #expect(Self.written(capacity: 5) { $0.append("0123456789") } == "01234")
        #expect(Self.written(capacity: 3) { $0.append("ab"); $0.append(decimal: 12345) } == "ab1")
        #expect(Self.written(capacity: 0) { $0.append(byte: 1) } == "")
        #expect(Self.written(capacity: 4) { line in Array("ab".utf8).withUnsafeBufferPointer { line.append($0); line.append($0); line.append($0) } } == "abab")
    }

    @Test("a payload's bytes outside printable ASCII are written as dots, only the payload's")
    func printable() {
        let payload: [UInt8] = [0x7B, 0x00, 0x0A, 0x1F, 0x20, 0x7E, 0x7F, 0xC3, 0xA9, 0x7D]
        let line = Self.written(capacity: 64) { line in
            line.append("\n: ")
            payload.withUnsafeBufferPointer { line.append(printable: $0) }
        }
        #expect(line == "\n: {... ~...}")
        #expect(Self.written(capacity: 3) { line in payload.withUnsafeBufferPointer { line.append(printable: $0) } } == "{..")
    }
}
