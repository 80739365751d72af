/// The fixed-layout formats, written in the layout language (ATC/PVVX, RuuviTag, Govee).
extension AdvertisementFormats {
    public static let layouts: [any AdvertisementFormat] = []
}
