import AdvertisementCodec

extension AdvertiserPayload {
    /// The bindkey of `simulate --device xiaomi@ADDRESS` when none is given: the example key of
    /// docs/advertisements.md. A demo key: anyone can read what it encrypts.
    public static let xiaomiDemoKey: [UInt8] = [0xE9, 0xEA, 0x89, 0x5F, 0xAC, 0x7C, 0xCA, 0x6D,
                                                 0x30, 0x53, 0x24, 0x32, 0xA5, 0x16, 0xF3, 0xA8]

    /// Xiaomi MiBeacon v5, encrypted with a bindkey, as a LYWSD03MMC on its stock firmware sends
    /// it, sealed by AdvertisementCodec's `MiBeacon.encode`: product id 0x055B, the MAC in the
    /// frame, one object per advertisement in turn — temperature (0x1004, 0.1 °C), humidity
    /// (0x1006, 0.1 %), battery (0x100A, %) — under AES-CCM with `key` (16 bytes). Its counter
    /// (`extended counter << 8 | frame counter`) is `counterBase + frame counter` (as for
    /// ``bthomeEncrypted(key:counterBase:)``). Named `LYWSD03MMC`.
    public static func xiaomi(key: [UInt8], counterBase: UInt32 = 0) -> AdvertiserPayload {
        AdvertiserPayload(name: { _ in "LYWSD03MMC" }) { f in
            let r = f.readings, counter = counterBase &+ f.counter
            let encryption = MiBeacon.Encryption(key: key, extendedCounter: counter >> 8)
            return Data(serviceData: ["FE95": sealed("MiBeacon") {
                let object: MiBeacon.Object = switch f.counter % 3 {
                case 0: try .temperature(Double(r.centiCelsius) / 100)
                case 1: try .humidity(Double(r.centiPercent) / 100)
                default: .battery(min(r.battery, 100))
                }
                return try MiBeacon.encode(productID: 0x055B, frameCounter: UInt8(truncatingIfNeeded: counter),
                                           address: f.addressText, objects: [object], encryption: encryption)
            }])
        }
    }
}
