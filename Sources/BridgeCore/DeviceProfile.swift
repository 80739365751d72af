import BinaryCoding
import BridgeConfig
import Foundation

/// One kind of device (GoPro, Rokid glasses, a GATT device described by layouts), everything the
/// bridge knows of it in one place (docs/adding-a-device.md): its id — the configuration's
/// `profile` — and its own checks of a device entry (``ProfileRules``), its driver, what a scan's
/// advertisement says of it and the templates `device/add` takes, its Home Assistant entities and
/// model, and the controls a user interface offers beyond those entities. The implementations live
/// in the DeviceProfiles module, a folder each, registered in one list (`DeviceProfiles.all`); the
/// core knows them only through this protocol, by id (``ProfileCatalog``).
public protocol DeviceProfile: ProfileRules {
    /// The driver of one configured device of this profile (a configuration error when the
    /// device's mappings do not hold, e.g. a layout that does not parse).
    func makeDriver(for device: DeviceConfig, context: DriverContext) throws -> any DeviceDriver
    /// What an advertisement makes of a device (`bridge/request/scan`'s `profile_guess`): nil when
    /// it is not this profile's.
    func matches(_ advertisement: Advertisement) -> ProfileGuess?
    /// Device templates of this profile that `device/add` takes as a `profile` besides the
    /// profile's own id (the layout profile's SIG devices: `heart_rate`…).
    var templateNames: [String] { get }
    /// The template called `name`; `withBattery`: the device advertises the Battery service too.
    func template(named name: String, withBattery: Bool) -> ProfileGuess?
    /// The device's own Home Assistant entities (the bridge adds every device's RSSI and last
    /// seen), from its configuration only, so the config topics are stable.
    func homeAssistantEntities(for device: DeviceConfig, topics: Topics) -> [HomeAssistantDiscovery.Entity]
    /// The same, for a profile whose entities follow what the device sent (a passive BTHome
    /// sensor's fields are known once it advertised them): `state` is its last known state (the
    /// store's, so a restart publishes them at once). The default is the configuration's only.
    func homeAssistantEntities(for device: DeviceConfig, topics: Topics, state: JSONObject) -> [HomeAssistantDiscovery.Entity]
    /// The same, with the configuration's `advertisement_formats` (a passive device of a user's
    /// format has an entity per field the format declares). The default ignores them.
    func homeAssistantEntities(for device: DeviceConfig, topics: Topics, state: JSONObject,
                               formats: [String: JSONValue]) -> [HomeAssistantDiscovery.Entity]
    /// The Home Assistant device's maker and model; `hardware` is what the state learnt of the
    /// device (a GoPro's Get Hardware Info).
    func homeAssistantModel(for device: DeviceConfig, hardware: JSONObject) -> HomeAssistantDiscovery.Model
    /// Controls a user interface offers beyond the Home Assistant entities' commands (every GoPro
    /// setting, a layout device's reads and writes), in the shape of `Bridge.controls(for:)`;
    /// `named`: the objects those entities already offer.
    func controls(for device: DeviceConfig, topics: Topics, besides named: Set<String>) -> [JSONValue]
    /// A passive device's decoder (its format with its key; `formats`: the configuration's
    /// `advertisement_formats`); nil for a profile whose devices connect. Throws a
    /// configuration error when the device's format is not one there is.
    func makeDecoder(for device: DeviceConfig, formats: [String: JSONValue]) throws -> (any PassiveDecoder)?
}

extension DeviceProfile {
    public func matches(_ advertisement: Advertisement) -> ProfileGuess? { nil }
    public var templateNames: [String] { [] }
    public func template(named name: String, withBattery: Bool) -> ProfileGuess? { nil }
    public func homeAssistantEntities(for device: DeviceConfig, topics: Topics) -> [HomeAssistantDiscovery.Entity] { [] }
    public func homeAssistantEntities(for device: DeviceConfig, topics: Topics, state: JSONObject) -> [HomeAssistantDiscovery.Entity] {
        homeAssistantEntities(for: device, topics: topics)
    }
    public func homeAssistantEntities(for device: DeviceConfig, topics: Topics, state: JSONObject,
                                      formats: [String: JSONValue]) -> [HomeAssistantDiscovery.Entity] {
        homeAssistantEntities(for: device, topics: topics, state: state)
    }
    public func controls(for device: DeviceConfig, topics: Topics, besides named: Set<String>) -> [JSONValue] { [] }
    public func makeDecoder(for device: DeviceConfig, formats: [String: JSONValue]) throws -> (any PassiveDecoder)? { nil }
}

/// What a profile's driver may take from the bridge when it is built.
public struct DriverContext: Sendable {
    /// Wall-clock nanoseconds since the epoch (the Rokid handshake's client time).
    public var now: @Sendable () -> UInt64

    public init(now: @escaping @Sendable () -> UInt64 = DriverContext.wallClock) { self.now = now }

    /// The system's wall clock; a clock set before 1970 (or absurdly late) reads 0, not a trap.
    public static let wallClock: @Sendable () -> UInt64 = {
        UInt64(exactly: (max(0, Date().timeIntervalSince1970) * 1e9).rounded(.down)) ?? 0
    }
}

/// The profiles a bridge runs, in registration order (`DeviceProfiles.all`), looked up by id: who
/// builds a device's driver, which profile a scan guesses, what `device/add` takes by name. Tests
/// may replace the drivers (``replacingDrivers(_:)``) and keep the rest.
public struct ProfileCatalog: Sendable {
    public let profiles: [any DeviceProfile]
    let context: DriverContext
    let driverFactory: Bridge.DriverFactory?

    public init(_ profiles: [any DeviceProfile], context: DriverContext = DriverContext()) {
        self.profiles = profiles
        self.context = context
        driverFactory = nil
    }

    /// The same profiles with every device's driver built by `factory` instead.
    public func replacingDrivers(_ factory: @escaping Bridge.DriverFactory) -> ProfileCatalog {
        ProfileCatalog(profiles: profiles, context: context, driverFactory: factory)
    }

    private init(profiles: [any DeviceProfile], context: DriverContext, driverFactory: Bridge.DriverFactory?) {
        self.profiles = profiles
        self.context = context
        self.driverFactory = driverFactory
    }

    public subscript(id: ProfileID) -> (any DeviceProfile)? { profiles.first { $0.id == id } }

    /// The profiles as the configuration checks a device against them.
    public var rules: [any ProfileRules] { profiles.map { $0 } }

    /// The driver of `device`, by its profile (checked first, as the configuration would).
    public func makeDriver(for device: DeviceConfig) throws -> any DeviceDriver {
        if let driverFactory { return try driverFactory(device) }
        guard let profile = self[device.profile] else {
            throw ConfigError(path: "devices[\(device.id)].profile", line: nil,
                              message: "'\(device.profile)' is not one of \(profiles.map(\.id.rawValue).joined(separator: ", "))")
        }
        try profile.validate(device, path: "devices[\(device.id)]")
        return try profile.makeDriver(for: device, context: context)
    }

    /// A passive device's decoder, by its profile (nil: the device connects); `formats`: the
    /// configuration's `advertisement_formats`.
    public func makeDecoder(for device: DeviceConfig, formats: [String: JSONValue]) throws -> (any PassiveDecoder)? {
        try self[device.profile]?.makeDecoder(for: device, formats: formats)
    }

    /// The profiles and templates `device/add` accepts by name: the profiles' ids, then their templates.
    public var names: [String] { profiles.map(\.id.rawValue) + profiles.flatMap(\.templateNames) }

    /// A profile (no mappings) or a template by name.
    public func named(_ name: String, withBattery: Bool = false) -> ProfileGuess? {
        if let p = profiles.first(where: { $0.id.rawValue == name }) { return ProfileGuess(name: name, profile: p.id, characteristics: []) }
        for p in profiles { if let t = p.template(named: name, withBattery: withBattery) { return t } }
        return nil
    }

    /// The guess for one advertisement: the first profile, in registration order, that matches it.
    public func guess(_ ad: Advertisement) -> ProfileGuess? {
        for p in profiles { if let g = p.matches(ad) { return g } }
        return nil
    }
}
