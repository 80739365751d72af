import Foundation

/// `gatt2mqtt run --config CONFIG --log-level LEVEL` as its own process, stderr appended to `log`,
/// with this process' environment less `dropping` prefixes plus `environment`.
func launchBridge(config: String, logLevel: String, log: String, environment: [String: String] = [:],
                  dropping prefixes: [String] = []) throws -> Process {
    let p = Process()
    p.executableURL = CLI.executable
    p.arguments = ["run", "--config", config, "--log-level", logLevel]
    var env = ProcessInfo.processInfo.environment.filter { entry in !prefixes.contains { entry.key.hasPrefix($0) } }
    env["SWIFT_BACKTRACE"] = "enable=no"
    env.merge(environment) { _, new in new }
    p.environment = env
    p.standardOutput = FileHandle.nullDevice
    if !FileManager.default.fileExists(atPath: log) { _ = FileManager.default.createFile(atPath: log, contents: nil) }
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
    handle.seekToEndOfFile()
    p.standardError = handle
    try p.run()
    return p
}
