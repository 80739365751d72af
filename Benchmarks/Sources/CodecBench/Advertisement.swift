import AdvertisementCodec

/// Advertisement decode benchmarks (docs/advertisements.md): one advertisement as BlueZ gives
/// it (service data keyed by the 128-bit UUID) through the format's `decode`, as the bridge
/// calls it for every advertisement it hears.
func advertisementBenchmarks() {
    let address = "A4:C1:38:12:34:56"
    let key: [UInt8] = [0x23, 0x1d, 0x39, 0xc1, 0xd7, 0xcc, 0x1a, 0xb1, 0xae, 0xe2, 0x24, 0xcd, 0x09, 0x6d, 0xb9, 0x32]
    let objects: [(id: UInt8, value: BTHome.Value)] = [(0x01, .number(87)), (0x02, .number(21.37)), (0x03, .number(48.5))]
    let plain = try! BTHome.encode(objects, packetID: 42)
    let encrypted = try! BTHome.encode(objects, encryption: .init(key: key, counter: 1000, address: address))
    let mi = try! MiBeacon.encode(frameCounter: 9, address: address, objects: [.temperatureAndHumidity(21.4, 48.5), .battery(87)])
    let miEncrypted = try! MiBeacon.encode(frameCounter: 9, address: address, objects: [.temperature(21.4)], encryption: .init(key: key, extendedCounter: 77))
    func packet(_ uuid: UInt16, _ data: [UInt8]) -> AdvertisementPacket {
        AdvertisementPacket(address: address, name: "sensor", serviceData: [AdvertisementPacket.uuid(uuid): data])
    }
    let bthome = AdvertisementFormats.builtin(named: "bthome")!
    let xiaomi = AdvertisementFormats.builtin(named: "xiaomi")!
    let cases: [(String, any AdvertisementFormat, AdvertisementPacket, [UInt8]?)] = [
        ("Advertisement BTHome plain decode (4 objects)", bthome, packet(0xFCD2, plain), nil),
        ("Advertisement BTHome encrypted decode (3 objects)", bthome, packet(0xFCD2, encrypted), key),
        ("Advertisement Xiaomi plain decode (0x100D+0x100A)", xiaomi, packet(0xFE95, mi), nil),
        ("Advertisement Xiaomi encrypted decode (0x1004)", xiaomi, packet(0xFE95, miEncrypted), key),
    ]
    for (name, format, packet, key) in cases {
        precondition((try? format.decode(packet, key: key)) != nil, name)
        bench(name) { blackHole(try! format.decode(packet, key: key)) }
    }
}
