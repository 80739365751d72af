import ArgumentParser
import BlueZSimulator
import DBus
import Foundation

/// `gatt2mqtt simulate`: a private dbus-daemon with the emulated BlueZ and a battery + heart-rate
/// device, for demos and end-to-end tests (docs/bluez.md). Prints the bus address as
/// `DBUS_SYSTEM_BUS_ADDRESS=…` and runs until SIGINT/SIGTERM or `--seconds`; the daemon is
/// stopped by its pid.
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run an emulated BlueZ on a private D-Bus with a simulated battery + heart-rate device."
    )

    @Option(help: "Address of the simulated device.")
    var address: String = "C0:FF:EE:00:00:01"

    @Option(help: "Stop after this many seconds (default: run until SIGINT/SIGTERM).")
    var seconds: Double?

    @Option(help: "Notify a heart-rate measurement every this many seconds while subscribed (0: never).")
    var heartRateInterval: Double = 1

    static let busConfig = """
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

    func validate() throws {
        let parts = address.split(separator: ":")
        guard parts.count == 6, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isHexDigit) }) else {
            throw CLIError("--address \(address): expected six hex pairs like C0:FF:EE:00:00:01")
        }
        if let seconds, !(seconds > 0) { throw CLIError("--seconds must be positive") }
        guard heartRateInterval >= 0 else { throw CLIError("--heart-rate-interval must not be negative") }
    }

    func run() async throws {
        let conf = FileManager.default.temporaryDirectory.appendingPathComponent("gatt2mqtt-sim-\(getpid()).conf")
        try Self.busConfig.write(to: conf, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: conf) }
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        daemon.arguments = ["--config-file=\(conf.path)", "--print-address=1", "--nofork"]
        let out = Pipe()
        daemon.standardOutput = out
        daemon.standardError = FileHandle.nullDevice
        do { try daemon.run() } catch { throw CLIError("cannot start /usr/bin/dbus-daemon: \(error)") }
        defer {
            if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) }
            daemon.waitUntilExit()
        }
        var text = ""
        while !text.contains("\n") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let line = text.split(separator: "\n").first, line.hasPrefix("unix:") else {
            throw CLIError("dbus-daemon printed no address")
        }
        let busAddress = String(line)
        let connection = try await DBusConnection.connect(.address(busAddress), timeout: .seconds(10))
        defer { connection.close() }
        let sim = BlueZSimulator(connection: connection)
        try await sim.start()
        defer { sim.stop() }
        let device = GenericDevice.batteryHeartRate(address: address)
        try sim.add(device)
        emit("DBUS_SYSTEM_BUS_ADDRESS=\(busAddress)")

        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let stop = AsyncStream<Void>.makeStream()
        let sources = [SIGINT, SIGTERM].map { sig -> DispatchSourceSignal in
            let s = DispatchSource.makeSignalSource(signal: sig)
            s.setEventHandler { stop.continuation.yield() }
            s.resume()
            return s
        }
        defer { sources.forEach { $0.cancel() } }
        if let seconds {
            let limit = Duration.milliseconds(Int64(seconds * 1000))
            Task {
                try? await Task.sleep(for: limit)
                stop.continuation.yield()
            }
        }
        let beats = Task {
            guard heartRateInterval > 0 else { return }
            var bpm: UInt8 = 60
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Int64(heartRateInterval * 1000)))
                bpm = bpm >= 90 ? 60 : bpm + 1
                device.notify("2A37", [0x00, bpm])
            }
        }
        defer { beats.cancel() }
        for await _ in stop.stream { break }
    }
}
