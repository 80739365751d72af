import ArgumentParser
import BinaryCoding
import Foundation
import BridgeConfig
import GattLayout

/// `gatt2mqtt layout`: decode and encode characteristic values with a declarative layout
/// (docs/layouts.md). Any invalid input exits 1 with one line on stderr.
struct LayoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "layout", abstract: "Declarative GATT characteristic layouts.",
        subcommands: [Decode.self, Encode.self, Show.self])

    /// `gatt2mqtt layout decode --layout FILE|builtin:NAME HEX` → one JSON object on stdout.
    struct Decode: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Decode a characteristic value (hex) to JSON.")
        @Option(name: .long, help: "A layout file (YAML or JSON) or builtin:NAME.") var layout: String
        @Argument(help: "The value as hex (stdin when absent or '-').") var hex: String?

        func run() throws {
            let loaded = try LayoutSource.load(layout)
            let bytes: [UInt8]
            do throws(Hex.DecodeError) { bytes = try Hex.decode(argumentOrStdin(hex)) } catch { throw CLIError(error.description) }
            do throws(GattLayoutError) { emit(try loaded.decode(bytes).jsonText) } catch { throw CLIError(error.description) }
        }
    }

    /// `gatt2mqtt layout encode --layout FILE|builtin:NAME JSON` → lowercase hex on stdout.
    struct Encode: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Encode a JSON object to a characteristic value (hex).")
        @Option(name: .long, help: "A layout file (YAML or JSON) or builtin:NAME.") var layout: String
        @Argument(help: "The JSON object (stdin when absent or '-').") var json: String?

        func run() throws {
            let loaded = try LayoutSource.load(layout)
            let value: JSONValue
            do throws(JSONParseError) { value = try JSONValue(parsing: argumentOrStdin(json)) } catch { throw CLIError(error.description) }
            do throws(GattLayoutError) { emit(Hex.encode(try loaded.encode(value))) } catch { throw CLIError(error.description) }
        }
    }

    /// `gatt2mqtt layout show --layout FILE|builtin:NAME` → the layout definition as JSON.
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a layout's definition as JSON (checks it too).")
        @Option(name: .long, help: "A layout file (YAML or JSON) or builtin:NAME.") var layout: String

        func run() throws {
            let (definition, _) = try LayoutSource.definition(layout)
            emit(definition.prettyJSONText)
        }
    }
}

/// Where a layout comes from: `builtin:NAME`, or a YAML/JSON file.
enum LayoutSource {
    static func load(_ source: String) throws -> GattLayout {
        let (definition, root) = try definition(source)
        do throws(GattLayoutError) {
            return try GattLayout(json: definition)
        } catch {
            var message = "layout \(source): \(error.description)"
            if case let .invalidLayout(path, _) = error, let line = root?.line(of: path) {
                message += " (line \(line))"
            }
            throw CLIError(message)
        }
    }

    /// The layout's JSON definition, and the YAML tree it came from (for line numbers).
    static func definition(_ source: String) throws -> (JSONValue, YAMLTree?) {
        if source.hasPrefix("builtin:") {
            let name = String(source.dropFirst("builtin:".count))
            guard let builtin = BuiltinLayout(rawValue: name) else {
                throw CLIError(GattLayoutError.unknownBuiltin(name: name, known: BuiltinLayout.allCases.map(\.rawValue)).description)
            }
            return (builtin.definition, nil)
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: source))
        } catch {
            throw CLIError("cannot read layout file '\(source)': \((error as NSError).localizedDescription)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CLIError("layout file '\(source)' is not UTF-8 text")
        }
        if source.lowercased().hasSuffix(".json") {
            do throws(JSONParseError) { return (try JSONValue(parsing: text), nil) } catch { throw CLIError("layout \(source): \(error.description)") }
        }
        do throws(YAMLConversionError) {
            let (value, tree) = try YAMLDocument.parse(text)
            return (value, tree)
        } catch {
            throw CLIError("layout \(source): \(error.description)")
        }
    }
}
