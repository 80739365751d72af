import AdvertisementCodec
import BinaryCoding
import BridgeConfig
import BridgeCore
import DeviceProfiles

/// A passive device's work per advertisement in the bridge (issue 23: "decode + publish decision
/// under 5 µs"): the decoder the advertisement profile makes for the device
/// (`AdvertisementProfile.makeDecoder`, which `DeviceSession.advertised` calls) and the
/// `PassiveTracker`'s decision (repeat, replay, change, `min_interval`). Each sensor's stream is
/// what BlueZ hands the bridge with duplicates reported: every reading heard 4 times (a new one
/// each second, an advertisement every 250 ms), so 1 change and 3 repeats in 4; an encrypted
/// sensor's repeats carry the same counter.
func passiveBenchmarks() {
    let key: [UInt8] = [0x23, 0x1d, 0x39, 0xc1, 0xd7, 0xcc, 0x1a, 0xb1, 0xae, 0xe2, 0x24, 0xcd, 0x09, 0x6d, 0xb9, 0x32]
    let keyHex = key.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    let address = "A4:C1:38:12:34:56"
    let readings = 16
    // Reading r: 21.00 °C + r × 0.05, 45 % + r × 0.25, battery 90 %.
    func centi(_ r: Int) -> (temperature: Int, humidity: Int) { (2100 + 5 * r, 4500 + 25 * r) }
    func bthome(_ r: Int, encrypted: Bool) -> [UInt8] {
        let (t, h) = centi(r)
        let objects: [(id: UInt8, value: BTHome.Value)] = [(0x01, .number(90)), (0x02, .number(Double(t) / 100)), (0x03, .number(Double(h) / 100))]
        return encrypted
            ? try! BTHome.encode(objects, encryption: .init(key: key, counter: 1000 + UInt32(r), address: address))
            : try! BTHome.encode(objects, packetID: UInt8(r))
    }
    func xiaomi(_ r: Int) -> [UInt8] {
        let (t, h) = centi(r)
        return try! MiBeacon.encode(frameCounter: UInt8(r), address: address, objects: [.temperatureAndHumidity(Double(t / 10) / 10, Double(h / 10) / 10)])
    }
    func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF)] }
    func be16(_ v: Int) -> [UInt8] { [UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
    // PVVX's custom format (15 bytes, little-endian): MAC reversed, temperature, humidity, mV, %, counter, flags.
    func pvvx(_ r: Int) -> [UInt8] {
        let (t, h) = centi(r)
        return [0x56, 0x34, 0x12, 0x38, 0xC1, 0xA4] + le16(t) + le16(h) + le16(2900) + [90, UInt8(r), 0]
    }
    // RuuviTag data format 5 (24 bytes, big-endian).
    func ruuvi(_ r: Int) -> [UInt8] {
        let (t, h) = centi(r)
        return [0x05] + be16(t * 2) + be16(h * 4) + be16(100_000 - 50_000) + be16(10) + be16(-20 & 0xFFFF) + be16(1000)
            + be16((1300 << 5) | 20) + [7] + be16(r) + [0xA4, 0xC1, 0x38, 0x12, 0x34, 0x56]
    }
    func serviceData(_ uuid: UInt16, _ data: [UInt8]) -> Advertisement {
        Advertisement(address: address, rssi: -70, serviceData: [AdvertisementPacket.uuid(uuid): data])
    }
    let cases: [(name: String, format: String, key: String?, ad: (Int) -> Advertisement)] = [
        ("BTHome plain", "bthome", nil, { serviceData(0xFCD2, bthome($0, encrypted: false)) }),
        ("BTHome encrypted", "bthome", keyHex, { serviceData(0xFCD2, bthome($0, encrypted: true)) }),
        ("Xiaomi plain (0x100D)", "xiaomi", nil, { serviceData(0xFE95, xiaomi($0)) }),
        ("ATC (PVVX custom)", "atc", nil, { serviceData(0x181A, pvvx($0)) }),
        ("Ruuvi format 5", "ruuvi", nil, { Advertisement(address: address, rssi: -70, manufacturerData: [0x0499: ruuvi($0)]) }),
    ]
    let profile = AdvertisementProfile()
    // Each stream twice: every advertisement decoded, then through `LastDecoded` as the session
    // does (a repeat's bytes not decoded again).
    for c in cases {
        for cached in [false, true] {
            var entry: JSONObject = ["id": "sensor", "address": .string(address), "profile": "advertisement", "format": .string(c.format)]
            if let k = c.key { entry["bindkey"] = .string(k) }
            let device = try! DeviceConfig(json: .object(entry))
            let decoder = try! profile.makeDecoder(for: device, formats: [:])!
            var last = LastDecoded(decoder)
            // 1 change, 3 repeats: the same advertisement 4 times.
            let stream = (0..<readings).flatMap { r in Array(repeating: c.ad(r), count: 4) }
            let step = Duration.milliseconds(250)
            var tracker = PassiveTracker(minInterval: device.minInterval, silence: device.availabilityTimeout)
            var now = ContinuousClock.now
            var i = 0
            var counts: [String: Int] = [:]
            func one() -> PassiveTracker.Outcome {
                if i == stream.count {
                    // The next round starts a fresh device: its packet ids and counters start over.
                    i = 0
                    tracker = PassiveTracker(minInterval: device.minInterval, silence: device.availabilityTimeout)
                }
                let ad = stream[i]
                i += 1
                now += step
                // The session's ticker: once a second here (every 4th advertisement).
                if i % 4 == 0 { blackHole(tracker.tick(at: now)) }
                let reading = cached ? try! last.decode(ad)! : try! decoder.decode(ad)!
                return tracker.accept(reading, at: now)
            }
            for _ in 0..<stream.count {
                switch one() {
                case .publish: counts["publish", default: 0] += 1
                case .held: counts["held", default: 0] += 1
                case .unchanged: counts["unchanged", default: 0] += 1
                case .repeated: counts["repeated", default: 0] += 1
                case .replayed: counts["replayed", default: 0] += 1
                }
            }
            guard counts["publish"] == readings else { fatalError("\(c.name): \(readings) readings, outcomes \(counts)") }
            let name = "Passive \(c.name): \(cached ? "LastDecoded" : "decode") + decision"
            bench(name) { blackHole(one()) }
            let outcomes = counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            if !cached, CommandLine.arguments.dropFirst().first.map({ name.contains($0) }) ?? true {
                print("    per \(stream.count) advertisements: \(outcomes)")
            }
        }
    }
}
