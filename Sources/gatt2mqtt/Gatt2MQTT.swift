import ArgumentParser
import BridgeConfig
import BridgeRuntime
import Foundation
import Reactor
import UnixSignals

/// The `gatt2mqtt` executable: argument parsing and dispatch only; the work lives in the modules.
@main
struct Gatt2MQTT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatt2mqtt",
        abstract: "A bridge between MQTT and Bluetooth LE devices (GoPro cameras, Rokid glasses, GATT sensors).",
        subcommands: [CapsCommand.self, GoProCommand.self, LayoutCommand.self, CheckConfigCommand.self, ConfigSchemaCommand.self, RunCommand.self, HealthCommand.self,
                      ScanCommand.self, GattCommand.self, SimulateCommand.self, PeripheralsCommand.self]
    )

    /// Contract: any invalid input exits with status 1 and one line on stderr; help exits 0.
    static func main() async {
        #if !DEBUG
        // Code mapped page by page as it runs, not 64 KiB around each fault (docs/benchmarks.md).
        // Release builds only: the test suite's many debug processes (an 80 MB binary each)
        // faulting page by page loaded the 2-core CI machine enough to make its timing checks
        // miss (three fresh-clone runs).
        CodePages.mapOnDemand()
        #endif
        CrashTrace.install()  // a crash says so on stderr, with the last message and a backtrace
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            if code == .success { exit(withError: error) }
            if let exit = error as? ExitCode, exit != .failure { Foundation.exit(exit.rawValue) }
            let text = message(for: error)
            let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? "failed"
            FileHandle.standardError.write(Data(("error: " + line + "\n").utf8))
            Foundation.exit(1)
        }
    }
}

/// An error for the CLI: one line that says what is wrong and where.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }

    /// A `--<option>` number of seconds as a duration within `range` (the one checked parser,
    /// ``checkedDuration(seconds:in:)``): NaN, infinite, negative or too large is an error naming
    /// the option and the limit.
    static func seconds(_ option: String, _ value: Double, in range: ClosedRange<Duration>) throws(CLIError) -> Duration {
        do { return try checkedDuration(seconds: value, in: range) } catch { throw CLIError("--\(option) \(value) \(error.message)") }
    }
}

/// Reads the argument, or all of standard input when the argument is absent or "-".
func argumentOrStdin(_ value: String?) -> String {
    if let value, value != "-" { return value }
    let data = FileHandle.standardInput.readDataToEndOfFile()
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Prints one line to standard output.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// SIGINT and SIGTERM, caught (handled, not fatal) from the moment this is made, so a command that
/// makes it first can stop what it starts even when the signal comes during its start-up (a
/// `simulate` killed by SIGTERM between starting its dbus-daemon and waiting would leave the
/// daemon behind). ``wait(after:)`` returns at once for a signal that came earlier. The signals
/// arrive through service-lifecycle's `UnixSignalsSequence`, as `run`'s do (its `ServiceGroup`'s
/// graceful shutdown, the bridge's SIGHUP): one way in for every signal the commands handle.
struct StopSignals {
    private let signals: UnixSignalsSequence

    init() async {
        // Not fatal from here on, also on a thread the sequence's handler does not run on.
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
    }

    /// Returns on SIGINT or SIGTERM (since ``init()``), or after `duration` when given: how
    /// `simulate` and `peripherals` run until stopped.
    func wait(after duration: Duration?) async {
        let signals = self.signals
        guard let duration else {
            for await _ in signals { break }
            return
        }
        _ = await withDeadline(duration) { () async -> Void? in
            for await _ in signals { break }
            return ()
        }
    }
}
