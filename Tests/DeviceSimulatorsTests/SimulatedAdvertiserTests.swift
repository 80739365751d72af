import BinaryCoding
import BlueZSimulator
import Testing
@testable import DeviceSimulators

/// The passive advertisers' payloads, checked byte by byte against their specifications
/// (worked out by hand in the comments), and their drift and counter.
@Suite struct SimulatedAdvertiserTests {
    static let address = "A4:C1:38:01:02:03"
    static let readings = SimulatedThermometer.Readings(centiCelsius: 2150, centiPercent: 4500, battery: 92)

    /// The frame at `counter` with `readings` for `payload`'s data.
    func data(_ payload: AdvertiserPayload, counter: UInt32 = 7,
              _ readings: SimulatedThermometer.Readings = readings) -> AdvertiserPayload.Data {
        payload.encode(.init(counter: counter, readings: readings, address: [0xA4, 0xC1, 0x38, 0x01, 0x02, 0x03]))
    }

    @Test func bthomeV2PlainObjectsInIDOrder() throws {
        // 0x40 (v2, unencrypted), 00 packet id 7, 01 battery 92 %, 02 temperature 2150 = 0x0866
        // LE, 03 humidity 4500 = 0x1194 LE.
        #expect(data(.bthome).serviceData == ["FCD2": [0x40, 0x00, 0x07, 0x01, 0x5C, 0x02, 0x66, 0x08, 0x03, 0x94, 0x11]])
        #expect(data(.bthome).manufacturerData.isEmpty)
        // The specification's examples: temperature 02 CA 09 = 25.06 °C, humidity 03 BF 13 = 50.55 %.
        let spec = try #require(data(.bthome, .init(centiCelsius: 2506, centiPercent: 5055, battery: 100)).serviceData["FCD2"])
        #expect(Array(spec[5...]) == [0x02, 0xCA, 0x09, 0x03, 0xBF, 0x13])
        // sint16: −12.34 °C = 0xFB2E; the packet id is the counter's low byte.
        let cold = try #require(data(.bthome, counter: 0x1_02, .init(centiCelsius: -1234, centiPercent: 0, battery: 5)).serviceData["FCD2"])
        #expect(cold == [0x40, 0x00, 0x02, 0x01, 0x05, 0x02, 0x2E, 0xFB, 0x03, 0x00, 0x00])
    }

    @Test func atc1441ThirteenBytesBigEndian() {
        // MAC as written, 215 = 0x00D7 (0.1 °C), 45 %, 92 %, 2920 mV = 0x0B68, frame 7.
        #expect(data(.atc).serviceData == ["181A": [0xA4, 0xC1, 0x38, 0x01, 0x02, 0x03, 0x00, 0xD7, 0x2D, 0x5C, 0x0B, 0x68, 0x07]])
        // −12.34 °C → −123 = 0xFF85.
        #expect(data(.atc, .init(centiCelsius: -1234, centiPercent: 10000, battery: 100)).serviceData["181A"]?[6...8]
            == [0xFF, 0x85, 100])
        #expect(AdvertiserPayload.atc.name([0xA4, 0xC1, 0x38, 0x01, 0x02, 0x03]) == "ATC_010203")
    }

    @Test func pvvxFifteenBytesLittleEndian() {
        // MAC reversed, 2150 = 0x0866, 4500 = 0x1194, 2920 mV = 0x0B68, 92 %, counter 7, flags 0.
        #expect(data(.pvvx).serviceData == ["181A": [0x03, 0x02, 0x01, 0x38, 0xC1, 0xA4, 0x66, 0x08, 0x94, 0x11, 0x68, 0x0B, 0x5C, 0x07, 0x00]])
    }

    @Test func ruuviDataFormat5() throws {
        let bytes = try #require(data(.ruuvi).manufacturerData[0x0499])
        #expect(bytes.count == 24)
        // 05; 21.50 °C / 0.005 = 4300 = 0x10CC; 45.00 % / 0.0025 = 18000 = 0x4650; 101307 Pa − 50000
        // = 51307 = 0xC86B; 0, 0, 1000 mG; power (2920 − 1600) << 5 | (4 + 40) / 2 = 0xA516;
        // movement 0; sequence 7; MAC.
        #expect(bytes == [0x05, 0x10, 0xCC, 0x46, 0x50, 0xC8, 0x6B, 0x00, 0x00, 0x00, 0x00, 0x03, 0xE8, 0xA5, 0x16,
                          0x00, 0x00, 0x07, 0xA4, 0xC1, 0x38, 0x01, 0x02, 0x03])
        // The specification's valid-data example starts 05 12 FC 53 94: 24.3 °C, 53.49 %.
        let spec = try #require(data(.ruuvi, .init(centiCelsius: 2430, centiPercent: 5349, battery: 97)).manufacturerData[0x0499])
        #expect(Array(spec[0..<5]) == [0x05, 0x12, 0xFC, 0x53, 0x94])
    }

    @Test func goveeH5075PackedDecimal() {
        // 215 × 1000 + 450 = 215450 = 0x03499A; battery 92 %.
        #expect(data(.govee).manufacturerData == [0xEC88: [0x00, 0x03, 0x49, 0x9A, 0x5C, 0x00]])
        // Below zero: bit 23 and the magnitude, −5.0 °C, 45.0 % → 0x800000 | 50450 = 0x80C512.
        #expect(data(.govee, .init(centiCelsius: -500, centiPercent: 4500, battery: 50)).manufacturerData[0xEC88]
            == [0x00, 0x80, 0xC5, 0x12, 0x32, 0x00])
        #expect(AdvertiserPayload.govee.name([0xA4, 0xC1, 0x38, 0x01, 0x02, 0x03]) == "GVH5075_0203")
    }

    @Test func stepsDriftTheReadingsAndCountFrames() throws {
        let a = SimulatedAdvertiser(address: Self.address.lowercased(), payload: .bthome)
        #expect(a.address == Self.address)
        #expect(!a.connectable)
        #expect(a.services.isEmpty)
        let first = a.advertisement.serviceData[SimUUID.full("FCD2")]
        #expect(first?[2] == 0)
        var previous = a.frame
        for n in 1...300 {
            let f = a.step()
            #expect(f.counter == UInt32(n))
            #expect(abs(Int(f.readings.centiCelsius) - Int(previous.readings.centiCelsius)) == 5)
            #expect((1900...2400).contains(f.readings.centiCelsius))
            previous = f
        }
        #expect(previous.readings.battery == 89)
        let now = try #require(a.advertisement.serviceData[SimUUID.full("FCD2")])
        #expect(now[2] == UInt8(300 & 0xFF))
        #expect(now != first)
    }

    @Test func specKindsMakeAdvertisers() throws {
        for kind in SimulatedDeviceSpec.Kind.allCases where kind.advertiserPayload != nil {
            let spec = try #require(SimulatedDeviceSpec(parsing: "\(kind.rawValue)@\(Self.address)"))
            let p = SimulatedPeripheral(spec)
            #expect(p.kind == kind)
            #expect(!p.device.connectable)
            let ad = p.device.advertisement
            #expect(!ad.serviceData.isEmpty || !ad.manufacturerData.isEmpty, "\(kind)")
        }
        #expect(SimulatedDeviceSpec(parsing: "miflora@\(Self.address)") == nil)
        #expect(SimulatedPeripheral(SimulatedDeviceSpec(kind: .thermo, address: Self.address)).device.connectable)
    }
}
