import ArgumentParser
import BridgeConfig
import DeviceProfiles

/// `gatt2mqtt config-schema`: prints the configuration's JSON Schema (docs/config-schema.json),
/// generated from the declarations the loader reads by.
struct ConfigSchemaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config-schema",
        abstract: "Print the configuration's JSON Schema (draft-07; docs/config-schema.json)."
    )

    func run() throws {
        print(ConfigSchema.text(profiles: DeviceProfiles.all.map(\.id)), terminator: "")
    }
}
