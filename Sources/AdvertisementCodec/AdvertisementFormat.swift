import BinaryCoding
import GattLayout

// The interface every advertisement format implements (docs/advertisements.md). Pure: no I/O,
// no clock. The bridge's `advertisement` profile (DeviceProfiles/Advertisement) turns a
// `BLEScan`'s sightings into `AdvertisementPacket`s, asks the device's format for a `Reading`,
// drops repeats by `packetID`, refuses replays by `counter` (``ReplayGuard``) and publishes the
// values.

/// The parts of one advertisement (or scan response) that the formats read.
public struct AdvertisementPacket: Sendable, Equatable {
    /// `AA:BB:CC:DD:EE:FF`, upper case (the encrypted formats put it in their nonce).
    public var address: String
    public var name: String?
    /// Service UUID → data. Keys as BlueZ gives them: 128-bit, lower case
    /// (`0000fcd2-0000-1000-8000-00805f9b34fb`); ``serviceData(_:)`` looks up a 16-bit one.
    public var serviceData: [String: [UInt8]]
    /// Company identifier → data (the identifier itself is not in the bytes).
    public var manufacturerData: [UInt16: [UInt8]]

    public init(address: String, name: String? = nil, serviceData: [String: [UInt8]] = [:], manufacturerData: [UInt16: [UInt8]] = [:]) {
        self.address = address
        self.name = name
        self.serviceData = serviceData
        self.manufacturerData = manufacturerData
    }

    /// The 128-bit form of a 16-bit SIG UUID (`0000XXXX-0000-1000-8000-00805f9b34fb`, lower case).
    public static func uuid(_ short: UInt16) -> String {
        let hex = String(short, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex + "-0000-1000-8000-00805f9b34fb"
    }

    /// The service data of a 16-bit SIG UUID (e.g. 0xFCD2 for BTHome).
    public func serviceData(_ short: UInt16) -> [UInt8]? { serviceData[Self.uuid(short)] }
}

/// What a format read from one advertisement.
public struct Reading: Sendable, Equatable {
    /// Measurement name (snake case, as the format's specification names it: `temperature` in
    /// °C, `humidity` in %, `battery` in %, `voltage` in V, `pressure` in hPa…) → number, bool
    /// or string, in the order the advertisement carried them. A name that occurs more than once
    /// gets `_2`, `_3`… after the first.
    public var values: JSONObject
    /// The format's packet or frame id, when it has one: the same id again is a repeat of the
    /// same reading (sensors send each several times), which the bridge drops.
    public var packetID: UInt32?
    /// The encryption counter of an encrypted advertisement: it must grow from one accepted
    /// advertisement to the next (``ReplayGuard``).
    public var counter: UInt32?
    /// The advertisement was encrypted (and its MIC checked with the key).
    public var encrypted: Bool
    /// The device says it advertises only when something happens (BTHome's trigger-based flag:
    /// a button), not at a regular interval, so silence does not mean it is gone.
    public var triggerBased: Bool

    public init(values: JSONObject, packetID: UInt32? = nil, counter: UInt32? = nil, encrypted: Bool = false, triggerBased: Bool = false) {
        self.values = values
        self.packetID = packetID
        self.counter = counter
        self.encrypted = encrypted
        self.triggerBased = triggerBased
    }
}

/// Why an advertisement of a format was not read.
public enum AdvertisementError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes do not hold what the format says (too short, a length past the end…).
    case malformed(String)
    /// The advertisement is encrypted and the device has no bindkey.
    case keyRequired
    /// The MIC did not match: a wrong bindkey, or altered bytes.
    case authenticationFailed
    /// A version, object id or frame the decoder does not know.
    case unsupported(String)

    public var description: String {
        switch self {
        case .malformed(let why): "malformed advertisement: \(why)"
        case .keyRequired: "encrypted advertisement and no bindkey configured"
        case .authenticationFailed: "the advertisement did not authenticate (wrong bindkey or altered bytes)"
        case .unsupported(let what): "unsupported: \(what)"
        }
    }
}

/// One advertisement format: BTHome, Xiaomi MiBeacon, or a layout (built-in or the user's).
public protocol AdvertisementFormat: Sendable {
    /// The name the configuration's `format:` gives.
    var name: String { get }
    /// Whether this format's advertisements can be encrypted (so a `bindkey` means something).
    var takesKey: Bool { get }
    /// Whether `packet` is one of this format's (cheap: the service UUID, company id, prefix).
    func matches(_ packet: AdvertisementPacket) -> Bool
    /// The reading; nil when `packet` is not this format's. Throws when it is but cannot be read.
    func decode(_ packet: AdvertisementPacket, key: [UInt8]?) throws(AdvertisementError) -> Reading?
    /// The fields this format's readings can have, with their kinds and units, when the format
    /// declares them (a layout format: ``LayoutFormat/keys``), so Home Assistant's entities
    /// exist before the first advertisement; empty when they are known only as they come
    /// (BTHome and MiBeacon send a few of many objects per advertisement).
    var declaredFields: [GattLayout.Key] { get }
}

extension AdvertisementFormat {
    public var declaredFields: [GattLayout.Key] { [] }
}

/// Refuses a replayed encrypted advertisement: accepts a counter only when it is greater than
/// the last one accepted (the bridge keeps `last` in its store across restarts).
public struct ReplayGuard: Sendable, Equatable {
    public var last: UInt32?
    public init(last: UInt32? = nil) { self.last = last }
    /// True (and remembers it) when `counter` is newer than the last accepted one.
    public mutating func accept(_ counter: UInt32) -> Bool {
        if let last, counter <= last { return false }
        last = counter
        return true
    }
}
