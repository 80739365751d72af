import Foundation

/// A dbus-daemon of its own for the emulator (`gatt2mqtt simulate`, docs/bluez.md "CLI"): a
/// session-type bus on a fresh `unix:tmpdir=/tmp` socket where anyone may own any name (so the
/// emulator can own `org.bluez`), started from a temporary configuration file and stopped by its
/// pid (``stop()``, idempotent), the file removed with it.
public final class PrivateBus {
    /// The bus address the daemon printed (`unix:path=…,guid=…`).
    public let address: String
    /// The daemon's pid.
    public let pid: Int32
    private let process: Process
    private let configuration: URL

    /// The daemon's configuration.
    public static let configurationText = """
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

    /// Writes the configuration, starts `/usr/bin/dbus-daemon --nofork` and reads the address it
    /// prints; throws ``BlueZSimulatorError/privateBus(_:)`` (the daemon stopped) when it prints none.
    public init(daemon: String = "/usr/bin/dbus-daemon") throws(BlueZSimulatorError) {
        let file = FileManager.default.temporaryDirectory
            .appendingPathComponent("gatt2mqtt-sim-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).conf")
        do {
            try Self.configurationText.write(to: file, atomically: true, encoding: .utf8)
        } catch {
            throw .privateBus("cannot write \(file.path): \(error)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: daemon)
        process.arguments = ["--config-file=\(file.path)", "--print-address=1", "--nofork"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            try? FileManager.default.removeItem(at: file)
            throw .privateBus("cannot start \(daemon): \(error)")
        }
        // Until the first line, or end of file when the daemon exits without one.
        var text = ""
        while !text.contains("\n") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        self.process = process
        self.pid = process.processIdentifier
        self.configuration = file
        guard let line = text.split(separator: "\n").first, line.hasPrefix("unix:") else {
            address = ""
            stop()
            throw .privateBus("\(daemon) printed no address")
        }
        address = String(line)
    }

    /// Kills the daemon by its pid (SIGKILL: it keeps nothing), reaps it and removes the
    /// configuration file. Idempotent.
    public func stop() {
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: configuration)
    }

    deinit { stop() }
}
