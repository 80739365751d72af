import ArgumentParser

/// `gatt2mqtt caps` (placeholder until the codec lands).
struct CapsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "caps", abstract: "Rokid Caps and CXR packets.")
}
