import Foundation
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

    static func run(_ args: [String], stdin: String? = nil) throws -> Result {
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
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Result(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
                      stderr: String(decoding: e, as: UTF8.self))
    }

    /// Expects `args` to fail as the CLI contract says: exit status 1, nothing on stdout, one
    /// line on stderr that mentions `word`.
    static func expectOneLineFailure(_ args: [String], stdin: String? = nil, mentioning word: String,
                                     sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try run(args, stdin: stdin)
        #expect(r.status == 1, "\(args)", sourceLocation: sourceLocation)
        #expect(r.stdout.isEmpty, "\(args)", sourceLocation: sourceLocation)
        #expect(r.stderr.split(separator: "\n").count == 1, "\(args): \(r.stderr)", sourceLocation: sourceLocation)
        #expect(r.stderr.contains(word), "\(args): \(r.stderr)", sourceLocation: sourceLocation)
    }
}

@Suite struct CLIBasicsTests {
    @Test func helpExitsZero() throws {
        let r = try CLI.run(["--help"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("caps"))
    }

    @Test func unknownSubcommandIsOneLineExitOne() throws {
        let r = try CLI.run(["no-such-command"])
        #expect(r.status == 1)
        #expect(r.stderr.split(separator: "\n").count == 1)
    }
}
