import Foundation
import TestSupport
import Testing

/// Runs the built `gatt2mqtt` executable (the CLI contract is checked from outside).
enum CLI {
    static var executable: URL {
        // .build/<config>/gatt2mqtt sits beside the test bundle's directory.
        var dir = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("gatt2mqtt")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: ".build/debug/gatt2mqtt")
    }

    struct Result { var status: Int32; var stdout: String; var stderr: String }

    /// Runs the executable to its end, off the cooperative pool (``offThePool(_:)``): a command
    /// may run for seconds (a scan, a simulator session), and the suite runs in parallel.
    static func run(_ args: [String], stdin: String? = nil) async throws -> Result {
        let executable = executable
        return try await offThePool {
            let p = Process()
            p.executableURL = executable
            p.arguments = args
            let out = Pipe(), err = Pipe(), inp = Pipe()
            p.standardOutput = out
            p.standardError = err
            p.standardInput = inp
            try p.run()
            if let stdin { inp.fileHandleForWriting.write(Data(stdin.utf8)) }
            try inp.fileHandleForWriting.close()
            // Both pipes drained at once: a command that fills one while the other is read would block.
            nonisolated(unsafe) var e = Data()
            let drained = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                e = err.fileHandleForReading.readDataToEndOfFile()
                drained.signal()
            }
            let o = out.fileHandleForReading.readDataToEndOfFile()
            drained.wait()
            p.waitUntilExit()
            return Result(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
                          stderr: String(decoding: e, as: UTF8.self))
        }
    }

    /// Expects `args` to fail as the CLI contract says: exit status 1, nothing on stdout, one
    /// line on stderr that mentions `word`.
    static func expectOneLineFailure(_ args: [String], stdin: String? = nil, mentioning word: String,
                                     sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let r = try await run(args, stdin: stdin)
        #expect(r.status == 1, "\(args)", sourceLocation: sourceLocation)
        #expect(r.stdout.isEmpty, "\(args)", sourceLocation: sourceLocation)
        #expect(r.stderr.split(separator: "\n").count == 1, "\(args): \(r.stderr)", sourceLocation: sourceLocation)
        #expect(r.stderr.contains(word), "\(args): \(r.stderr)", sourceLocation: sourceLocation)
    }
}

@Suite struct CLIBasicsTests {
    @Test func helpExitsZero() async throws {
        let r = try await CLI.run(["--help"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("caps"))
    }

    @Test func unknownSubcommandIsOneLineExitOne() async throws {
        let r = try await CLI.run(["no-such-command"])
        #expect(r.status == 1)
        #expect(r.stderr.split(separator: "\n").count == 1)
    }
}
