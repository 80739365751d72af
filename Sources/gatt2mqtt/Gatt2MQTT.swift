import ArgumentParser
import Foundation

/// The `gatt2mqtt` executable: argument parsing and dispatch only; the work lives in the modules.
@main
struct Gatt2MQTT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatt2mqtt",
        abstract: "A bridge between MQTT and Bluetooth LE devices (GoPro cameras, Rokid glasses, GATT sensors).",
        subcommands: [CapsCommand.self, GoProCommand.self, LayoutCommand.self, CheckConfigCommand.self, RunCommand.self,
                      ScanCommand.self, GattCommand.self, SimulateCommand.self, PeripheralsCommand.self]
    )

    /// Contract: any invalid input exits with status 1 and one line on stderr; help exits 0.
    static func main() async {
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

/// Returns on SIGINT or SIGTERM (handled, not fatal, so the caller can stop what it started), or
/// after `seconds` when given: how `simulate` and `peripherals` run until stopped.
func untilStopped(after seconds: Double?) async {
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
    let timer = Task {
        guard let seconds else { return }
        try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
        stop.continuation.yield()
    }
    defer { timer.cancel() }
    for await _ in stop.stream { break }
}
