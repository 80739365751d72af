import AdvertisementCodec
import BinaryCoding
import BridgeConfig
import BridgeCore
import GattLayout

/// Where the advertisement profile finds a device's format: the built-ins by name, then the
/// configuration's `advertisement_formats`, each parsed by `parse` (the layout formats' parser).
/// Injectable, so tests supply formats of their own.
public struct AdvertisementFormatResolver: Sendable {
    /// The built-in formats' names, in order (what a `format:` may name besides the user's).
    public var builtinNames: [String]
    public var builtin: @Sendable (String) -> (any AdvertisementFormat)?
    /// A user format from its definition (`advertisement_formats.NAME`); throws with what is wrong.
    /// Nil: this build reads no user formats (each is refused with that said).
    public var parse: (@Sendable (_ name: String, _ definition: JSONValue) throws -> any AdvertisementFormat)?

    public init(builtinNames: [String], builtin: @escaping @Sendable (String) -> (any AdvertisementFormat)?,
                parse: (@Sendable (_ name: String, _ definition: JSONValue) throws -> any AdvertisementFormat)?) {
        self.builtinNames = builtinNames
        self.builtin = builtin
        self.parse = parse
    }

    /// The built-ins of `AdvertisementFormats`; the user's formats are layout formats
    /// (``LayoutFormat``, docs/advertisement-layouts.md).
    public static var standard: AdvertisementFormatResolver {
        AdvertisementFormatResolver(builtinNames: AdvertisementFormats.builtinNames, builtin: { AdvertisementFormats.builtin(named: $0) },
                                    parse: { name, definition in try LayoutFormat(json: definition, name: name) })
    }

    /// The format `name`: a built-in, else the user's definition in `formats`; nil when neither has it.
    public func format(named name: String, formats: [String: JSONValue]) throws(ConfigError) -> (any AdvertisementFormat)? {
        if let f = builtin(name) { return f }
        guard let definition = formats[name] else { return nil }
        return try userFormat(name, definition)
    }

    /// A user format parsed, its errors as the configuration's: path `advertisement_formats.NAME`,
    /// followed by the key path inside the definition when the layout parser names one
    /// (`advertisement_formats.NAME.layout.fields[2].type`).
    func userFormat(_ name: String, _ definition: JSONValue) throws(ConfigError) -> any AdvertisementFormat {
        let path = "advertisement_formats.\(name)"
        guard let parse else {
            throw ConfigError(path: path, line: nil, message: "this build reads no user advertisement formats")
        }
        do { return try parse(name, definition) } catch let GattLayoutError.invalidLayout(inner, reason) {
            throw ConfigError(path: inner.isEmpty ? path : "\(path).\(inner)", line: nil, message: reason)
        } catch {
            throw ConfigError(path: path, line: nil, message: "\(error)")
        }
    }
}

/// The `advertisement` profile (docs/configuration.md, "Passive devices"): a device that is never
/// connected, read from its advertisements by a format (BTHome, Xiaomi, the layout formats, the
/// user's). The bridge gets its ``PassiveDecoder`` (``makeDecoder(for:formats:)``) instead of a
/// driver; a scan guesses the built-in format a sighting is of, and `device/add` takes a built-in
/// format's name as a template (`profile: bthome`) or `profile: advertisement` with a `format`.
public struct AdvertisementProfile: DeviceProfile {
    public let id: ProfileID = .advertisement
    public let resolver: AdvertisementFormatResolver

    public init(resolver: AdvertisementFormatResolver = .standard) { self.resolver = resolver }

    /// A device entry's own checks: its format is a built-in (a user format is checked with the
    /// file, ``validate(configuration:)``, or by the bridge for `device/add`) and takes a key if
    /// one is given.
    public func validate(_ device: DeviceConfig, path: String) throws(ConfigError) {
        guard let name = device.format, let format = resolver.builtin(name) else { return }
        try checkKey(device, format, path: path)
    }

    /// The file's formats (parsed, no name a built-in's) and every passive device's `format`.
    public func validate(configuration c: Configuration) throws(ConfigError) {
        var parsed: [String: any AdvertisementFormat] = [:]
        for name in c.advertisementFormats.keys.sorted() {
            let path = "advertisement_formats.\(name)"
            if resolver.builtinNames.contains(name) {
                throw ConfigError(path: path, line: c.lines[path], message: "'\(name)' is a built-in format's name: give yours another")
            }
            do { parsed[name] = try resolver.userFormat(name, c.advertisementFormats[name] ?? .null) } catch {
                throw ConfigError(path: error.path, line: c.line(near: error.path), message: error.message)
            }
        }
        for (i, d) in c.devices.enumerated() where d.profile == id {
            let path = "devices[\(i)].format"
            guard let name = d.format else { continue }  // required: the loader said so
            guard let format = resolver.builtin(name) ?? parsed[name] else {
                throw ConfigError(path: path, line: c.lines[path], message: "'\(name)' is not a format: \(knownText(c.advertisementFormats))")
            }
            try checkKey(d, format, path: "devices[\(i)]")
        }
    }

    func knownText(_ formats: [String: JSONValue]) -> String {
        let names = resolver.builtinNames + formats.keys.sorted()
        return names.isEmpty ? "no format is built in and advertisement_formats declares none" : "one of \(names.joined(separator: ", "))"
    }

    func checkKey(_ device: DeviceConfig, _ format: any AdvertisementFormat, path: String) throws(ConfigError) {
        if device.bindkey != nil, !format.takesKey {
            let key = device.bindkeyFile != nil ? "bindkey_file" : "bindkey"
            throw ConfigError(path: "\(path).\(key)", line: nil, message: "format \(format.name) is never encrypted: it takes no bindkey")
        }
    }

    /// A passive device has no driver: the bridge never connects it (it asks ``makeDecoder(for:formats:)``).
    public func makeDriver(for device: DeviceConfig, context: DriverContext) throws -> any DeviceDriver {
        throw ConfigError(path: "devices[\(device.id)].profile", line: nil, message: "a passive device (profile: advertisement) is never connected")
    }

    public func makeDecoder(for device: DeviceConfig, formats: [String: JSONValue]) throws -> (any PassiveDecoder)? {
        let path = "devices[\(device.id)].format"
        guard let name = device.format else { throw ConfigError(path: path, line: nil, message: "required for profile: advertisement") }
        guard let format = try resolver.format(named: name, formats: formats) else {
            throw ConfigError(path: path, line: nil, message: "'\(name)' is not a format: \(knownText(formats))")
        }
        try checkKey(device, format, path: "devices[\(device.id)]")
        return FormatDecoder(format: format, key: device.bindkey)
    }

    // MARK: Guesses and templates

    /// The built-in formats' names: `device/add` takes `profile: bthome` for a passive BTHome device.
    public var templateNames: [String] { resolver.builtinNames }

    public func template(named name: String, withBattery: Bool) -> ProfileGuess? {
        guard resolver.builtin(name) != nil else { return nil }
        return ProfileGuess(name: name, profile: id, characteristics: [], fields: ["format": .string(name)])
    }

    /// The first built-in format the sighting is of (its name is the scan's `profile_guess`).
    public func matches(_ ad: Advertisement) -> ProfileGuess? {
        let packet = FormatDecoder.packet(ad)
        guard let name = resolver.builtinNames.first(where: { resolver.builtin($0)?.matches(packet) ?? false }) else { return nil }
        return template(named: name, withBattery: false)
    }

    // MARK: Home Assistant

    public func homeAssistantModel(for device: DeviceConfig, hardware: JSONObject) -> HomeAssistantDiscovery.Model {
        .init(manufacturer: "Bluetooth LE", model: "Passive sensor (\(device.format ?? "advertisement"))")
    }
}

/// A device's format with its key: advertisement → reading (``PassiveDecoder``).
struct FormatDecoder: PassiveDecoder {
    let format: any AdvertisementFormat
    let key: [UInt8]?

    /// The key's check value: the first 8 bytes of AES-128 of a zero block under it (a KCV, as
    /// banks and HSMs print: it tells keys apart and does not reveal one).
    let keyCheck: Int64?

    init(format: any AdvertisementFormat, key: [UInt8]?) {
        self.format = format
        self.key = key
        keyCheck = key.flatMap { try? AES128(key: $0) }.map { aes in
            aes.encrypt([UInt8](repeating: 0, count: 16)).prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
        }
    }

    func decode(_ ad: Advertisement) throws(PassiveDecodeError) -> PassiveReading? {
        let packet = Self.packet(ad)
        guard format.matches(packet) else { return nil }
        do {
            guard let r = try format.decode(packet, key: key) else { return nil }
            return PassiveReading(values: r.values, packetID: r.packetID, counter: r.counter)
        } catch {
            throw PassiveDecodeError(error.description)
        }
    }

    static func packet(_ ad: Advertisement) -> AdvertisementPacket {
        AdvertisementPacket(address: ad.address, name: ad.name, serviceData: ad.serviceData, manufacturerData: ad.manufacturerData)
    }
}
