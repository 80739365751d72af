import ArgumentParser

/// `gatt2mqtt layout` (placeholder until the codec lands).
struct LayoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "layout", abstract: "Declarative GATT characteristic layouts.")
}
