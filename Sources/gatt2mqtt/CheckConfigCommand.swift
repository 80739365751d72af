import ArgumentParser
import BridgeConfig
import DeviceProfiles
import Foundation

/// `gatt2mqtt check-config FILE`: validates a configuration without starting anything.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file (errors name the key path and line)."
    )

    @Argument(help: "The YAML configuration file.")
    var file: String

    func run() throws {
        let config = try loadConfiguration(file)
        emit("\(file): ok — mqtt \(config.mqtt.useTLS ? "mqtts" : "mqtt")://\(config.mqtt.host):\(config.mqtt.port), base topic '\(config.mqtt.baseTopic)', \(Self.adapterSummary(config.bluetooth)), \(config.devices.count) device(s)")
        for d in config.devices {
            emit("  \(d.id): \(d.profile.rawValue) at \(d.address ?? "name ~ /\(d.namePattern ?? "")/")\(d.adapter.map { " through \($0)" } ?? ""), offline policy \(d.offlinePolicy.rawValue)")
        }
    }

    /// `adapter hci0`, or `adapters hci0, hci1 (at most 7 links each)`.
    static func adapterSummary(_ b: BluetoothSettings) -> String {
        b.adapters.count == 1 ? "adapter \(b.adapter)" : "adapters \(b.adapters.joined(separator: ", ")) (at most \(b.maxConnections) links each)"
    }
}

/// Reads and validates a configuration file, applying `GATT2MQTT_…` environment overrides.
func loadConfiguration(_ path: String) throws -> Configuration {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw CLIError("\(path): cannot read the file")
    }
    guard let text = String(data: data, encoding: .utf8) else {
        throw CLIError("\(path): not UTF-8 text")
    }
    do {
        return try Configuration(yaml: text, environment: ProcessInfo.processInfo.environment, profiles: DeviceProfiles.all)
    } catch {
        throw CLIError("\(path): \(error)")
    }
}
