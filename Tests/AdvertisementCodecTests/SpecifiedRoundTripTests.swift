@testable import AdvertisementCodec
import BinaryCoding
import Testing
import TestSupport

/// Random readings encoded then decoded (values back within the object's resolution), and
/// random or damaged bytes that must return or throw, never trap.
@Suite struct SpecifiedRoundTripTests {
    private static let address = "A4:C1:38:12:34:56"

    private func randomKey(_ rng: inout SeededRandom) -> [UInt8] { (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) } }

    private func randomAddress(_ rng: inout SeededRandom) -> String {
        (0..<6).map { _ in
            let h = String(UInt8.random(in: 0...255, using: &rng), radix: 16, uppercase: true)
            return h.count == 1 ? "0" + h : h
        }.joined(separator: ":")
    }

    @Test func bthomeReadingsComeBack() throws {
        var rng = SeededRandom(seed: 0xB7_40_4E)
        let ids = (0..<256).filter { id in
            switch BTHome.objects[id]?.kind {
            case .number, .binary: true
            default: false
            }
        }
        #expect(ids.count > 70)
        for round in 0..<400 {
            var objects: [(id: UInt8, value: BTHome.Value)] = []
            var expected: [(name: String, value: JSONValue, resolution: Double)] = []
            var seen: [String: Int] = [:]
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let id = ids.randomElement(using: &rng)!
                let object = BTHome.objects[id]!
                seen[object.name, default: 0] += 1
                let name = seen[object.name]! == 1 ? object.name : "\(object.name)_\(seen[object.name]!)"
                switch object.kind {
                case .number(let size, let signed, let multiply, let divide):
                    let bits = 8 * size
                    let low: Int64 = signed ? -(1 << (bits - 1)) : 0
                    let high: Int64 = signed ? (1 << (bits - 1)) - 1 : (1 << bits) - 1
                    let raw = Int64.random(in: low...high, using: &rng)
                    let value = Double(raw * Int64(multiply)) / divide
                    objects.append((UInt8(id), .number(value)))
                    expected.append((name, .double(value), Double(multiply) / divide))
                default:
                    let on = Bool.random(using: &rng)
                    objects.append((UInt8(id), .bool(on)))
                    expected.append((name, .bool(on), 0))
                }
            }
            let packetID: UInt8? = Bool.random(using: &rng) ? UInt8.random(in: 0...255, using: &rng) : nil
            let key = randomKey(&rng)
            let address = randomAddress(&rng)
            let counter = UInt32.random(in: 0...UInt32.max, using: &rng)
            let encrypted = round % 2 == 1
            let data = try BTHome.encode(
                objects, packetID: packetID, triggerBased: round % 3 == 0,
                encryption: encrypted ? .init(key: key, counter: counter, address: address) : nil)
            let reading = try BTHome.decode(data, key: encrypted ? key : nil, address: address)
            #expect(reading.packetID == packetID.map(UInt32.init))
            #expect(reading.counter == (encrypted ? counter : nil))
            #expect(reading.encrypted == encrypted && reading.triggerBased == (round % 3 == 0))
            #expect(reading.values.keys == expected.map(\.name), "round \(round)")
            for (name, value, resolution) in expected {
                if let number = value.doubleValue {
                    let got = try #require(reading.values[name]?.doubleValue, "round \(round): \(name)")
                    #expect(abs(got - number) <= resolution / 2 + 1e-9 * max(1, abs(number)), "round \(round): \(name) \(got) ≠ \(number)")
                } else {
                    #expect(reading.values[name] == value, "round \(round): \(name)")
                }
            }
        }
    }

    @Test func miBeaconReadingsComeBack() throws {
        var rng = SeededRandom(seed: 0xFE95)
        for round in 0..<300 {
            let temperature = Double(Int.random(in: -400...600, using: &rng)) / 10
            let humidity = Double(Int.random(in: 0...1000, using: &rng)) / 10
            let battery = UInt8.random(in: 0...100, using: &rng)
            let frameCounter = UInt8.random(in: 0...255, using: &rng)
            let extended = UInt32.random(in: 0..<(1 << 24), using: &rng)
            let key = randomKey(&rng)
            let address = randomAddress(&rng)
            let encrypted = round % 2 == 0
            let objects: [MiBeacon.Object] = try round % 3 == 0
                ? [.temperatureAndHumidity(temperature, humidity), .battery(battery)]
                : [.temperature(temperature), .humidity(humidity), .battery(battery)]
            let frame = try MiBeacon.encode(
                productID: UInt16.random(in: 0...0xFFFF, using: &rng), frameCounter: frameCounter, address: address,
                includeMAC: Bool.random(using: &rng), objects: objects,
                encryption: encrypted ? .init(key: key, extendedCounter: extended) : nil)
            let reading = try MiBeacon.decode(frame, key: encrypted ? key : nil, address: address)
            #expect(reading.values.keys == ["temperature", "humidity", "battery"])
            #expect(abs(reading.values["temperature"]!.doubleValue! - temperature) < 0.05)
            #expect(abs(reading.values["humidity"]!.doubleValue! - humidity) < 0.05)
            #expect(reading.values["battery"] == .int(Int64(battery)))
            #expect(reading.packetID == UInt32(frameCounter))
            #expect(reading.counter == (encrypted ? extended << 8 | UInt32(frameCounter) : nil))
        }
    }

    /// Random bytes, valid frames cut short, lengths past the end, huge values: every decode
    /// returns or throws an ``AdvertisementError``.
    @Test func garbageNeverTraps() throws {
        var rng = SeededRandom(seed: 0x6A_7B_A6E)
        let key = randomKey(&rng)
        let bthome = try BTHome.encode(
            [(0x02, .number(21.5)), (0x03, .number(40)), (0x53, .text("hello")), (0x3C, .event("rotate_left", steps: 2))],
            packetID: 7, encryption: .init(key: key, counter: 9, address: Self.address))
        let plainBTHome = try BTHome.encode([(0x02, .number(21.5)), (0x54, .bytes([1, 2, 3])), (0xF1, .text("1.2.3.4"))], packetID: 7)
        let mi = try MiBeacon.encode(frameCounter: 3, address: Self.address, objects: [.temperature(21.5), .battery(50)], encryption: .init(key: key, extendedCounter: 5))
        let plainMi = try MiBeacon.encode(frameCounter: 3, address: Self.address, includeMAC: true, objects: [.temperatureAndHumidity(1, 2)])
        var inputs: [[UInt8]] = []
        for valid in [bthome, plainBTHome, mi, plainMi] {
            for cut in 0..<valid.count { inputs.append(Array(valid.prefix(cut))) }
            for _ in 0..<50 {
                var damaged = valid
                damaged[Int.random(in: 0..<damaged.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                inputs.append(damaged)
            }
        }
        for _ in 0..<3000 {
            var bytes = (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if !bytes.isEmpty && Bool.random(using: &rng) { bytes[0] = [0x40, 0x44, 0x41, 0x58, 0x50][Int.random(in: 0..<5, using: &rng)] }
            if bytes.count > 1 && Bool.random(using: &rng) { bytes[1] = [0x50, 0x30, 0x58, 0x20][Int.random(in: 0..<4, using: &rng)] }
            inputs.append(bytes)
        }
        inputs.append([0x40, 0x53, 0xFF, 0x41])  // a text length past the end
        inputs.append([0x40, 0x3B, 0x1F, 0x01])  // command arguments past the end
        inputs.append([0x40] + [UInt8](repeating: 0x3E, count: 5) + [0xFF, 0xFF, 0xFF, 0xFF])  // huge count
        var decoded = 0, refused = 0
        for bytes in inputs {
            for format in AdvertisementFormats.specified {
                for k in [nil, key] {
                    let packet = AdvertisementPacket(
                        address: Self.address,
                        serviceData: [AdvertisementPacket.uuid(0xFCD2): bytes, AdvertisementPacket.uuid(0xFE95): bytes])
                    do throws(AdvertisementError) {
                        let reading = try format.decode(packet, key: k)
                        #expect((reading?.values.count ?? 0) <= bytes.count)
                        decoded += 1
                    } catch {
                        refused += 1
                    }
                }
            }
        }
        #expect(decoded > 100 && refused > 100)
    }
}
