import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A private `dbus-daemon` of its own: session-like (anyone may own any name and eavesdrop),
/// listening on a fresh `unix:tmpdir=/tmp` socket, stopped by its pid — `stop()`, and `deinit`
/// as the safety net. `gatt2mqtt simulate` puts the BlueZ emulator on one; the integration tests
/// start one per test.
public final class PrivateBus: Sendable {
    /// The daemon's configuration (dbus-daemon(1), "CONFIGURATION FILE").
    public static let configuration = """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <keep_umask/>
          <listen>unix:tmpdir=/tmp</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """

    /// The bus address the daemon printed (`unix:path=…` or `unix:abstract=…`, with its guid).
    public let address: String
    public let pid: Int32
    private let process: Process

    /// Starts `/usr/bin/dbus-daemon --nofork --print-address=1` and waits up to `timeout` for the
    /// address. Throws `.connectionFailed(name: "dbus-daemon", …)` when it cannot be started or
    /// prints no address in time (then it is killed).
    public init(timeout: Duration = .seconds(10)) throws(DBusError) {
        let config = FileManager.default.temporaryDirectory
            .appendingPathComponent("gatt2mqtt-bus-\(getpid())-\(UInt64.random(in: 0...UInt64.max)).conf")
        do {
            try Self.configuration.write(to: config, atomically: true, encoding: .utf8)
        } catch {
            throw .connectionFailed(name: "dbus-daemon", message: "cannot write \(config.path): \(error)")
        }
        // The daemon has read its configuration once it prints its address.
        defer { try? FileManager.default.removeItem(at: config) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(config.path)", "--print-address=1", "--nofork"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw .connectionFailed(name: "dbus-daemon", message: "cannot start /usr/bin/dbus-daemon: \(error)")
        }
        let text = Self.firstLine(of: out.fileHandleForReading.fileDescriptor, within: timeout)
        guard text.hasPrefix("unix:") else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            throw .connectionFailed(name: "dbus-daemon", message: "dbus-daemon printed no address within \(timeout): \(text)")
        }
        self.process = process
        address = text
        pid = process.processIdentifier
    }

    /// Whether ``stop()`` has reaped the daemon.
    private let reaped = Mutex(false)

    /// Kills the daemon (idempotent) and reaps it with `waitpid`, at once. Not `Process.waitUntilExit`:
    /// that learns of the exit through Dispatch's global queue, whose threads the caller may be
    /// holding (a test's synchronous `defer` on Swift's cooperative pool), and could wait for ever.
    public func stop() {
        reaped.withLock { done in
            guard !done else { return }
            done = true
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        }
    }

    deinit { stop() }

    /// What `fd` gives until its first newline, end of file or `timeout` (a daemon that hangs
    /// before printing cannot hold the caller: each read waits in `poll` for what is left).
    private static func firstLine(of fd: Int32, within timeout: Duration) -> String {
        let deadline = ContinuousClock.now + timeout
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 256)
        while !bytes.contains(UInt8(ascii: "\n")) {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            var watched = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1
            let ready = poll(&watched, 1, Int32(clamping: milliseconds))
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { break }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }  // end of file: the daemon is gone
            bytes += chunk[..<n]
        }
        return String(decoding: bytes.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
    }
}
