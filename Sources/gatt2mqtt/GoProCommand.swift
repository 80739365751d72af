import ArgumentParser

/// `gatt2mqtt gopro` (placeholder until the codec lands).
struct GoProCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "gopro", abstract: "Open GoPro BLE messages.")
}
