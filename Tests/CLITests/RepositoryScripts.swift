import Foundation

/// Runs one of the repository's python checks (`scripts/check-order`, `scripts/check-conversions`)
/// with `arguments`, blocking (call it off the cooperative pool); returns its exit status and its
/// output (stdout and stderr together).
func runRepositoryScript(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = ["python3", root.appendingPathComponent(path).path] + arguments
    let out = Pipe()
    p.standardOutput = out
    p.standardError = out
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}
