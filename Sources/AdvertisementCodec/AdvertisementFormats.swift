import BinaryCoding

/// The built-in advertisement formats, by the name a device's `format:` gives: the specified
/// ones (BTHome v2, Xiaomi MiBeacon: ``specified``) and those written as layouts (ATC/PVVX,
/// RuuviTag, Govee: ``layouts``).
public enum AdvertisementFormats {
    /// Every built-in format, specified first.
    public static var builtins: [any AdvertisementFormat] { specified + layouts }

    /// The names of the built-ins, in order.
    public static var builtinNames: [String] { builtins.map(\.name) }

    /// The built-in format called `name`.
    public static func builtin(named name: String) -> (any AdvertisementFormat)? {
        builtins.first { $0.name == name }
    }

    /// The first built-in format whose advertisements `packet` is one of (a scan's guess).
    public static func guess(_ packet: AdvertisementPacket) -> (any AdvertisementFormat)? {
        builtins.first { $0.matches(packet) }
    }
}
