import AdvertisementCodec
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

    /// `gatt2mqtt layout decode --layout FILE|builtin:NAME HEX` → one JSON object on stdout;
    /// `… --advertisement FORMAT [--service UUID | --manufacturer ID] HEX` → the reading.
    struct Decode: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Decode a characteristic value, or an advertisement's service or manufacturer data (hex), to JSON.")
        @Option(name: .long, help: "A layout file (YAML or JSON) or builtin:NAME.") var layout: String?
        @Option(name: .long, help: "An advertisement format: a built-in's name or a format file (YAML or JSON).")
        var advertisement: String?
        @Option(name: .long, help: "With --advertisement: HEX is this service UUID's data (\"181A\", 128-bit…).")
        var service: String?
        @Option(name: .long, help: "With --advertisement: HEX is this company's manufacturer data (0x0499 or decimal).")
        var manufacturer: String?
        @Option(name: .long, help: "With --advertisement: the device's address (encrypted formats put it in the nonce).")
        var address: String = "00:00:00:00:00:00"
        @Option(name: .long, help: "With --advertisement: the advertised name (for formats that match a name prefix).")
        var name: String?
        @Option(name: .long, help: "With --advertisement: the bindkey (hex) of an encrypted format.") var key: String?
        @Argument(help: "The value as hex (stdin when absent or '-').") var hex: String?

        func run() throws {
            guard (layout == nil) != (advertisement == nil) else { throw CLIError("give either --layout or --advertisement") }
            if advertisement == nil, service != nil || manufacturer != nil || key != nil || name != nil {
                throw CLIError("--service, --manufacturer, --name and --key go with --advertisement")
            }
            if service != nil, manufacturer != nil { throw CLIError("give either --service or --manufacturer") }
            let bytes: [UInt8]
            do throws(Hex.DecodeError) { bytes = try Hex.decode(argumentOrStdin(hex)) } catch { throw CLIError(error.description) }
            if let advertisement {
                emit(try AdvertisementDecoding(self).decode(format: advertisement, bytes).jsonText)
                return
            }
            let loaded = try LayoutSource.load(layout ?? "")
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
        @Option(name: .long, help: "A layout file (YAML or JSON) or builtin:NAME.") var layout: String?
        @Option(name: .long, help: "An advertisement format written as a layout: a built-in's name or a file.")
        var advertisement: String?

        func run() throws {
            guard (layout == nil) != (advertisement == nil) else { throw CLIError("give either --layout or --advertisement") }
            if let advertisement {
                if let builtin = LayoutFormat.builtinDefinitions.first(where: { $0.name == advertisement }) {
                    emit((try? JSONValue(parsing: builtin.json))?.prettyJSONText ?? builtin.json)
                    return
                }
                _ = try AdvertisementDecoding.load(advertisement)  // checks it (a specified built-in has no layout)
                guard AdvertisementFormats.builtin(named: advertisement) == nil else {
                    throw CLIError("advertisement format '\(advertisement)' is decoded by code, not written as a layout")
                }
                emit(try LayoutSource.definition(advertisement).0.prettyJSONText)
                return
            }
            let (definition, _) = try LayoutSource.definition(layout ?? "")
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

/// `gatt2mqtt layout decode --advertisement FORMAT HEX` (docs/advertisement-layouts.md): the
/// bytes become one advertisement of the device, under the service UUID or company id given, or,
/// for a layout format without either, where each of its variants reads; the format's reading is
/// printed as `{"values":{…},"packet_id":…,"counter":…,"encrypted":…}`.
struct AdvertisementDecoding {
    let decode: LayoutCommand.Decode

    init(_ decode: LayoutCommand.Decode) { self.decode = decode }

    func decode(format source: String, _ bytes: [UInt8]) throws -> JSONValue {
        let format = try Self.load(source)
        let packet = try self.packet(for: format, bytes)
        let key: [UInt8]?
        do throws(Hex.DecodeError) { key = try decode.key.map { k throws(Hex.DecodeError) in try Hex.decode(k) } } catch {
            throw CLIError("--key: \(error.description)")
        }
        let reading: Reading?
        do throws(AdvertisementError) { reading = try format.decode(packet, key: key) } catch {
            throw CLIError("\(format.name): \(error.description)")
        }
        guard let reading else {
            throw CLIError("the bytes are not an advertisement of format '\(format.name)' (another service, company, prefix, length or name)")
        }
        var out = JSONObject()
        out["values"] = .object(reading.values)
        if let id = reading.packetID { out["packet_id"] = .int(Int64(id)) }
        if let counter = reading.counter { out["counter"] = .int(Int64(counter)) }
        out["encrypted"] = .bool(reading.encrypted)
        return .object(out)
    }

    /// A built-in's name, or a file holding one format (its `name:`, else the file's name).
    static func load(_ source: String) throws -> any AdvertisementFormat {
        if let builtin = AdvertisementFormats.builtin(named: source) { return builtin }
        guard source.contains("/") || source.contains(".") else {
            throw CLIError("unknown advertisement format '\(source)' (built-in: \(AdvertisementFormats.builtinNames.joined(separator: ", ")); or a file)")
        }
        let (definition, root) = try LayoutSource.definition(source)
        let stem = URL(fileURLWithPath: source).deletingPathExtension().lastPathComponent
        do throws(GattLayoutError) {
            return try LayoutFormat(json: definition, name: definition["name"] == nil ? stem : nil)
        } catch {
            var message = "advertisement format \(source): \(error.description)"
            if case let .invalidLayout(path, _) = error, let line = root?.line(of: path) { message += " (line \(line))" }
            throw CLIError(message)
        }
    }

    func packet(for format: any AdvertisementFormat, _ bytes: [UInt8]) throws -> AdvertisementPacket {
        let address = decode.address.uppercased()
        let parts = address.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isHexDigit) }) else {
            throw CLIError("--address: expected AA:BB:CC:DD:EE:FF, found '\(decode.address)'")
        }
        var packet = AdvertisementPacket(address: address, name: decode.name)
        if let service = decode.service {
            do throws(GattLayoutError) { packet.serviceData[try GattLayout.uuid(.string(service), path: "--service")] = bytes } catch {
                throw CLIError("--service: expected a 16-bit (\"181A\"), 32-bit or 128-bit UUID, found '\(service)'")
            }
        } else if let manufacturer = decode.manufacturer {
            let lower = manufacturer.lowercased()
            guard let id = lower.hasPrefix("0x") ? UInt16(lower.dropFirst(2), radix: 16) : UInt16(lower) else {
                throw CLIError("--manufacturer: expected a company identifier 0…0xFFFF (0x0499 or 1177), found '\(manufacturer)'")
            }
            packet.manufacturerData[id] = bytes
        } else if let layout = format as? LayoutFormat {
            for variant in layout.variants {
                switch variant.match.source {
                case let .serviceData(uuid): packet.serviceData[uuid] = bytes
                case let .manufacturer(id): packet.manufacturerData[id] = bytes
                }
            }
        } else {
            throw CLIError("format '\(format.name)': say whose data HEX is, with --service UUID or --manufacturer ID")
        }
        return packet
    }
}
