import DBus
import Foundation
import Synchronization
import Testing

/// A private dbus-daemon for one test, configured by the committed `Fixtures/test-bus.conf`,
/// listening on a fresh `unix:tmpdir=/tmp` socket; stopped by its pid.
final class TestBus: Sendable {
    let address: String
    let pid: Int32
    private let process: Process

    static var fixture: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent()
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

/// Runs `body` with a fresh bus that is stopped afterwards, whatever happens.
func withBus(_ body: (TestBus) async throws -> Void) async throws {
    let bus = try TestBus()
    defer { bus.stop() }
    try await body(bus)
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

/// Consumes a signal stream in a task and lets the test wait (with a deadline) for what arrived.
final class SignalCollector: Sendable {
    private struct State {
        var messages: [DBusMessage] = []
        var end: DBusError?? = nil  // .some(nil): finished normally; .some(e): threw e
    }
    private final class Store: Sendable {
        let state = Mutex(State())
    }
    private let store = Store()
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(_ stream: DBusSignalStream) {
        let t = Task { [store] in
            do {
                for try await m in stream { store.state.withLock { $0.messages.append(m) } }
                store.state.withLock { $0.end = .some(nil) }
            } catch {
                store.state.withLock { $0.end = .some(error as? DBusError ?? .cancelled) }
            }
        }
        task.withLock { $0 = t }
    }

    var messages: [DBusMessage] { store.state.withLock { $0.messages } }

    /// Waits until at least `count` messages arrived (or `seconds` passed) and returns them all.
    func wait(count: Int, seconds: Double = 5) async -> [DBusMessage] {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            let m = messages
            if m.count >= count { return m }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return messages
    }

    /// Waits until the stream ended; returns how (`nil` if it has not ended in time).
    func waitEnd(seconds: Double = 5) async -> DBusError?? {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let end = store.state.withLock({ $0.end }) { return end }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    func cancel() { task.withLock { $0?.cancel() } }
    deinit { cancel() }
}
