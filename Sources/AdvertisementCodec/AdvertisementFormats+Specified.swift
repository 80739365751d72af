/// The formats decoded by code, each after its specification (BTHome v2, Xiaomi MiBeacon).
extension AdvertisementFormats {
    public static let specified: [any AdvertisementFormat] = [BTHomeFormat(), MiBeaconFormat()]
}
