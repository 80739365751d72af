import DBus
import Foundation

/// A private dbus-daemon for one test, configured by the committed `Fixtures/test-bus.conf`,
/// listening on a fresh `unix:tmpdir=/tmp` socket; stopped by its pid.
final class TestBus: Sendable {
    let address: String
    let pid: Int32
    private let process: Process

    /// `Fixtures/test-bus.conf` of the test target this file is compiled into (it is shared
    /// with BlueZTests through a symlinked `Support` folder).
    static var fixture: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/test-bus.conf").path
    }

    init() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        p.arguments = ["--config-file=\(TestBus.fixture)", "--print-address=1", "--nofork"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        var text = ""
        let deadline = Date().addingTimeInterval(10)
        while !text.contains("\n"), Date() < deadline {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let line = text.split(separator: "\n").first, line.hasPrefix("unix:") else {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            throw DBusError.connectionFailed(name: "test", message: "dbus-daemon printed no address: \(text)")
        }
        address = String(line)
        pid = p.processIdentifier
        process = p
    }

    /// Kills the daemon (idempotent) and reaps it.
    func stop() {
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }

    func connect() async throws -> DBusConnection {
        try await DBusConnection.connect(.address(address), timeout: .seconds(10))
    }
}

/// Runs an external command (dbus-send, gdbus) and returns its stdout, failing on a non-zero exit.
func runTool(_ path: String, _ args: [String]) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else {
        throw DBusError.remote(name: "tool.failed", message: String(decoding: e, as: UTF8.self))
    }
    return String(decoding: o, as: UTF8.self)
}
