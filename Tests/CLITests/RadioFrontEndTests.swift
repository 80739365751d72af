import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `gatt2mqtt peripherals` behind the Bumble radio front-end (`scripts/vm/radio.py`), checked by
/// the front-end's own `--selftest` (a Bumble central on the same virtual radio: scan, connect,
/// pair, GATT exchanges for each device kind, fault requests). Needs Python with `bumble`
/// (scripts/setup installs it).
@Suite(.serialized, .timeLimit(.minutes(6))) struct RadioFrontEndTests {
    /// `python3` from PATH, when it can import bumble.
    static let python: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            let candidate = "\(dir)/python3"
            guard FileManager.default.isExecutableFile(atPath: candidate) else { continue }
            let p = Process()
            p.executableURL = URL(fileURLWithPath: candidate)
            p.arguments = ["-c", "import bumble"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            guard (try? p.run()) != nil else { continue }
            p.waitUntilExit()
            return p.terminationStatus == 0 ? candidate : nil
        }
        return nil
    }()

    static var radioScript: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/vm/radio.py").path
    }

    /// Waits for `pid` to exit until `deadline`; its exit status, or nil if it still runs.
    static func waitExit(_ pid: pid_t, until deadline: ContinuousClock.Instant) async -> Int32? {
        var exit: Int32?
        _ = await eventually(timeout: deadline - ContinuousClock.now) {  // the child's exit (no event announces it here)
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f) }
            return exit != nil
        }
        return exit
    }

    @Test(.enabled(if: python != nil, "python3 -c 'import bumble' fails: install Bumble (scripts/setup) to run the radio front-end"))
    func selftestPassesForEveryDeviceKind() async throws {
        let python = try #require(Self.python)
        let dir = try TemporaryDirectory()
        let socket = dir.path + "/models.sock"
        let serverLog = dir.path + "/peripherals.log", radioLog = dir.path + "/radio.log"
        let server = try spawn(CLI.executable.path, ["peripherals", "--socket", socket, "--seconds", "110",
                                                     "--device", "gopro@C0:FF:EE:00:00:01", "--device", "rokid@C0:FF:EE:00:00:02",
                                                     "--device", "hr@C0:FF:EE:00:00:03", "--device", "thermo@C0:FF:EE:00:00:04",
                                                     "--device", "bthome@A4:C1:38:00:00:05",
                                                     "--thermo-interval", "0.5", "--advertise-interval", "0.5"], log: serverLog)
        var serverPID = server
        defer { if serverPID != 0 { killAndReap(serverPID, SIGKILL) } }
        // Waits until the server listens (its socket file exists) or exits, 10 s at most.
        var exitedAtStart = false
        _ = await eventually(timeout: .seconds(10)) {
            if FileManager.default.fileExists(atPath: socket) { return true }
            var status: Int32 = 0
            exitedAtStart = waitpid(server, &status, WNOHANG) == server
            return exitedAtStart
        }
        if exitedAtStart {
            serverPID = 0
            Issue.record("peripherals exited at start: \((try? String(contentsOfFile: serverLog, encoding: .utf8)) ?? "")")
            return
        }
        try #require(FileManager.default.fileExists(atPath: socket), "peripherals did not listen within 10 s")

        let radio = try spawn(python, ["-u", Self.radioScript, "--models", socket, "--transport", "none", "--selftest"], log: radioLog)
        let status = await Self.waitExit(radio, until: .now + .seconds(90))
        if status == nil { killAndReap(radio, SIGKILL) }
        let log = (try? String(contentsOfFile: radioLog, encoding: .utf8)) ?? ""
        #expect(status == 0, "radio.py --selftest exited \(status.map(String.init) ?? "(still running after 90 s)"):\n\(log)")
        #expect(log.contains("radio: ready\n"))
        let lines = log.split(separator: "\n").filter { $0.hasPrefix("selftest: ") }
        #expect(lines.count >= 20, "\(log)")
        #expect(lines.allSatisfy { $0.hasPrefix("selftest: ok") }, "\(log)")
        for device in ["gopro C0:FF:EE:00:00:01", "rokid C0:FF:EE:00:00:02", "hr C0:FF:EE:00:00:03", "thermo C0:FF:EE:00:00:04",
                       "bthome A4:C1:38:00:00:05 advertises non-connectable", "bthome A4:C1:38:00:00:05 advertisement changes",
                       "bthome A4:C1:38:00:00:05 a connection attempt fails"] {
            #expect(lines.contains { $0.contains(device) }, "no check of \(device)")
        }

        _ = kill(server, SIGTERM)
        let serverStatus = await Self.waitExit(server, until: .now + .seconds(10))
        serverPID = serverStatus == nil ? server : 0
        #expect(serverStatus == 0)
        #expect(!FileManager.default.fileExists(atPath: socket))
    }
}
