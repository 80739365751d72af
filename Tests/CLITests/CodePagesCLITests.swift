import Foundation
import TestSupport
import Testing

/// `gatt2mqtt` maps its code page by page (Reactor.CodePages, called first thing in `main`):
/// the kernel marks such a mapping `uw` (userfaultfd write-protect) in /proc/PID/smaps.
@Suite struct CodePagesCLITests {
    /// The VmFlags of the executable's code mapping in `pid`, or nil while it cannot be read.
    static func codeFlags(pid: Int32, executable: String) -> [Substring]? {
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/smaps") else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return nil }  // to its end: /proc files have no size
        let smaps = String(decoding: data, as: UTF8.self)
        var inside = false
        for line in smaps.split(separator: "\n") {
            if line.contains(" r-xp ") || line.contains(" r--p ") || line.contains(" rw-p ") || line.contains(" ---p ") {
                inside = line.contains(" r-xp ") && line.hasSuffix(executable)
            } else if inside, line.hasPrefix("VmFlags:") {
                return line.split(separator: " ").dropFirst().map { $0 }
            }
        }
        return nil
    }

    /// Release builds only (`gatt2mqtt` calls it under `#if !DEBUG`): run by `swift test -c release`;
    /// the benchmark's peak RSS shows it too (docs/benchmarks.md, "Memory against the floor").
    #if DEBUG
    static let releaseBuild = false
    #else
    static let releaseBuild = true
    #endif

    @Test("the executable's code is registered for on-demand mapping (no fault-around)", .enabled(if: releaseBuild))
    func executableMapsCodeOnDemand() async throws {
        let p = Process()
        p.executableURL = CLI.executable
        p.arguments = ["caps", "split"]  // waits on its standard input until it is closed
        let input = Pipe()
        p.standardInput = input
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        defer {
            try? input.fileHandleForWriting.close()
            p.waitUntilExit()
        }
        let executable = CLI.executable.resolvingSymlinksInPath().path
        let pid = p.processIdentifier
        let applied = await eventually {
            Self.codeFlags(pid: pid, executable: executable)?.contains("uw") == true
        }
        #expect(applied, "VmFlags of \(executable) in \(pid): \(Self.codeFlags(pid: pid, executable: executable) ?? [])")
    }
}
