import Foundation
import TestSupport
import Testing

/// bleak (PyPI, installed by scripts/setup), an independent BlueZ client, against
/// `gatt2mqtt simulate`: Tests/CLITests/Bleak/bleak_gopro.py finds the simulated GoPro with
/// `BleakScanner.find_device_by_address`, which only sees a device through the advertisement
/// updates bluetoothd sends while discovering (spec/bluez.md behaviour 10; docs/bluez.md "While
/// discovering"), then connects and commands it, with no `pair()` call (bluetoothd pairs on the
/// first encrypted access by itself: docs/bluez.md "Automatic security").
@Suite(.serialized, .timeLimit(.minutes(5))) struct BleakCLITests {
    static let gopro = "C0:FF:EE:00:00:07"
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Bleak").appendingPathComponent("bleak_gopro.py").path

    /// A finished (or killed) child process.
    struct Finished {
        var status: Int32
        var timedOut: Bool
        var lines: [String]
        var stderr: String
    }

    /// Runs the bleak script against the bus, waiting at most `limit`; killed by its pid then.
    static func bleak(_ bus: String, _ args: [String], limit: TimeInterval = 40) async throws -> Finished {
        try await offThePool { try runBleak(bus, args, limit: limit) }
    }

    private static func runBleak(_ bus: String, _ args: [String], limit: TimeInterval) throws -> Finished {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", script] + args
        var env = ProcessInfo.processInfo.environment
        env["DBUS_SYSTEM_BUS_ADDRESS"] = bus
        env["PYTHONUNBUFFERED"] = "1"
        p.environment = env
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        let ended = DispatchSemaphore(value: 0)
        p.terminationHandler = { _ in ended.signal() }
        // The script writes a few lines (far below a pipe's buffer): read once it has ended.
        try p.run()
        let timedOut = ended.wait(timeout: .now() + limit) == .timedOut
        if timedOut {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        return Finished(status: p.terminationStatus, timedOut: timedOut,
                        lines: String(decoding: o, as: UTF8.self).split(separator: "\n").map(String.init),
                        stderr: String(decoding: e, as: UTF8.self))
    }

    /// `simulate --device gopro@…`; stop it by pid.
    static func simulate(_ extra: [String]) async throws -> (Process, String) {
        try await BluetoothCLITests.simulate(["--device", "gopro@\(gopro)"] + extra)
    }

    static func stop(_ sim: Process) {
        reap(sim)
    }

    @Test("bleak finds, connects and commands the simulated GoPro without pair(): paired on the way")
    func bleakDrivesTheSimulatedGoPro() async throws {
        let (sim, bus) = try await Self.simulate([])
        defer { Self.stop(sim) }
        let run = try await Self.bleak(bus, [Self.gopro])
        #expect(!run.timedOut)
        #expect(run.status == 0, "bleak: \(run.lines) \(run.stderr)")
        #expect(run.lines == ["found \(Self.gopro) GoPro 1234", "connected True",
                              "subscribed b5f90073-aa8d-11e3-9046-0002a5d5c51b", "written 03010101",
                              "answer 020100", "disconnected"])
        // Paired and bonded by bluetoothd's automatic security, with no Pair call.
        let device = "/org/bluez/hci0/dev_" + Self.gopro.replacingOccurrences(of: ":", with: "_")
        for property in ["Paired", "Bonded"] {
            let value = try await tool("/usr/bin/gdbus", ["call", "--address", bus, "--dest", "org.bluez", "--object-path", device,
                                                          "--method", "org.freedesktop.DBus.Properties.Get", "org.bluez.Device1", property])
            #expect(value.trimmingCharacters(in: .whitespacesAndNewlines) == "(<true>,)", "\(property): \(value)")
        }
        let received = try await tool("/usr/bin/gdbus", ["call", "--address", bus, "--dest", "org.bluez", "--object-path",
                                                         "/org/gatt2mqtt/Simulator", "--method",
                                                         "org.gatt2mqtt.Simulator1.Received", Self.gopro])
        #expect(received.contains("'SecurityPairing'") && !received.contains("'Pair'"), "\(received)")
    }

    /// The emulator as it was before behaviour 10 (announced once, then silent): bleak's
    /// `find_device_by_address` subscribes after StartDiscovery and never sees the device.
    @Test func withoutAdvertisementUpdatesBleakFindsNothing() async throws {
        let (sim, bus) = try await Self.simulate(["--advertising-interval", "0"])
        defer { Self.stop(sim) }
        let run = try await Self.bleak(bus, [Self.gopro, "--find-only", "--find-timeout", "3"])
        #expect(!run.timedOut)
        #expect(run.status == 2, "bleak: \(run.lines) \(run.stderr)")
        #expect(run.lines == ["not-found \(Self.gopro)"])
    }
}
