import AdvertisementCodec
import BinaryCoding
import BlueZSimulator
import Testing
@testable import DeviceSimulators

/// The encrypted advertisers (`bthome-encrypted`, `xiaomi`): the frame's clear parts checked by
/// hand against the specifications, the sealed part opened by AdvertisementCodec's decoders with
/// the key (and refused with another), the counter growing with each reading.
@Suite struct SimulatedEncryptedAdvertiserTests {
    static let address = "A4:C1:38:01:02:03"
    static let addressBytes: [UInt8] = [0xA4, 0xC1, 0x38, 0x01, 0x02, 0x03]
    static let readings = SimulatedThermometer.Readings(centiCelsius: 2150, centiPercent: 4500, battery: 92)
    static let key = try! Hex.decode("00112233445566778899aabbccddeeff")

    func serviceData(_ payload: AdvertiserPayload, _ uuid: String, counter: UInt32) throws -> [UInt8] {
        try #require(payload.encode(.init(counter: counter, readings: Self.readings, address: Self.addressBytes)).serviceData[uuid])
    }

    @Test func bthomeEncryptedOpensWithTheKeyOnly() throws {
        let payload = AdvertiserPayload.bthomeEncrypted(key: Self.key, counterBase: 0x1122_3300)
        let data = try serviceData(payload, "FCD2", counter: 7)
        // 0x41: v2, encrypted, regular; 10 bytes of objects (00 07, 01 5c, 02 66 08, 03 94 11)
        // sealed; the counter 0x11223307 little endian; a 4-byte MIC.
        #expect(data.count == 1 + 10 + 4 + 4)
        #expect(data[0] == 0x41)
        #expect(Array(data[11..<15]) == [0x07, 0x33, 0x22, 0x11])
        #expect(Array(data[1..<11]) != [0x00, 0x07, 0x01, 0x5C, 0x02, 0x66, 0x08, 0x03, 0x94, 0x11], "not sealed")
        let reading = try BTHome.decode(data, key: Self.key, address: Self.address)
        #expect(reading.values == ["battery": 92, "temperature": 21.5, "humidity": 45.0])
        #expect(reading.encrypted && reading.packetID == 7 && reading.counter == 0x1122_3307)
        #expect(throws: AdvertisementError.authenticationFailed) {
            try BTHome.decode(data, key: AdvertiserPayload.bthomeDemoKey, address: Self.address)
        }
        #expect(throws: AdvertisementError.keyRequired) { try BTHome.decode(data, key: nil, address: Self.address) }
        // The nonce holds the address: the same bytes from another address do not open.
        #expect(throws: AdvertisementError.authenticationFailed) {
            try BTHome.decode(data, key: Self.key, address: "A4:C1:38:01:02:04")
        }
    }

    @Test func bthomeDemoKeyIsBthomeIOsExample() throws {
        #expect(AdvertiserPayload.bthomeDemoKey == (try Hex.decode("231d39c1d7cc1ab1aee224cd096db932")))
        #expect(AdvertiserPayload.xiaomiDemoKey == (try Hex.decode("e9ea895fac7cca6d30532432a516f3a8")))
        let p = try #require(SimulatedDeviceSpec.Kind.bthomeEncrypted.advertiserPayload)
        let data = try serviceData(p, "FCD2", counter: 1)
        #expect(try BTHome.decode(data, key: AdvertiserPayload.bthomeDemoKey, address: Self.address).values["temperature"] == 21.5)
    }

    @Test func xiaomiSendsOneObjectAtATimeLikeALYWSD03MMC() throws {
        let payload = AdvertiserPayload.xiaomi(key: Self.key, counterBase: 0x0102_0300)
        var merged = JSONObject()
        for counter: UInt32 in 3...5 {
            let data = try serviceData(payload, "FE95", counter: counter)
            // Frame control 0x5858 (v5, object, MAC, encrypted), product 0x055B, frame counter
            // (the counter's low byte), MAC reversed; then one object (3 + 2 or 1 bytes) sealed,
            // the 3-byte extended counter, the MIC.
            #expect(Array(data[0..<5]) == [0x58, 0x58, 0x5B, 0x05, UInt8(counter)])
            #expect(Array(data[5..<11]) == Self.addressBytes.reversed())
            let reading = try MiBeacon.decode(data, key: Self.key, address: Self.address)
            #expect(reading.encrypted && reading.packetID == counter && reading.counter == 0x0102_0300 + counter)
            #expect(Array(data.suffix(7).prefix(3)) == [0x03, 0x02, 0x01])
            #expect(reading.values.count == 1)
            merged.merge(reading.values)
            #expect(throws: AdvertisementError.authenticationFailed) {
                try MiBeacon.decode(data, key: AdvertiserPayload.xiaomiDemoKey, address: Self.address)
            }
        }
        #expect(merged == ["temperature": 21.5, "humidity": 45.0, "battery": 92])
    }

    @Test func theCounterGrowsWithEachReading() throws {
        for kind in [SimulatedDeviceSpec.Kind.bthomeEncrypted, .xiaomi] {
            let spec = try #require(SimulatedDeviceSpec(parsing: "\(kind.rawValue)@\(Self.address)#00112233445566778899AABBCCDDEEFF"))
            #expect(spec.key == Self.key)
            guard case let .advertiser(_, a) = SimulatedPeripheral(spec, counterBase: 1000) else { Issue.record("\(kind)"); continue }
            var last: UInt32?
            for _ in 0..<300 {
                let ad = a.advertisement
                let format: any AdvertisementFormat = kind == .xiaomi ? MiBeaconFormat() : BTHomeFormat()
                let packet = AdvertisementPacket(address: Self.address, serviceData: ad.serviceData)
                let counter = try #require(try format.decode(packet, key: Self.key)?.counter)
                if let last { #expect(counter == last + 1, "\(kind)") } else { #expect(counter == 1000) }
                last = counter
                a.step()
            }
        }
    }

    @Test func keysParseOnlyAs32HexDigitsOnEncryptedKinds() {
        let key = "231d39c1d7cc1ab1aee224cd096db932"
        #expect(SimulatedDeviceSpec(parsing: "xiaomi@\(Self.address)")?.key == nil)
        #expect(SimulatedDeviceSpec(parsing: "xiaomi@\(Self.address)#\(key)")?.key == AdvertiserPayload.bthomeDemoKey)
        for bad in ["bthome@\(Self.address)#\(key)", "bthome-encrypted@\(Self.address)#\(key.dropLast())",
                    "bthome-encrypted@\(Self.address)#\(key)0", "bthome-encrypted@\(Self.address)#+31d39c1d7cc1ab1aee224cd096db932",
                    "bthome-encrypted@\(Self.address)#231d39c1d7cc1ab1aee224cd096db93g", "bthome-encrypted@\(Self.address)#",
                    "bthome-encrypted@A4:C1:38:01:02#\(key)"] {
            #expect(SimulatedDeviceSpec(parsing: bad) == nil, "\(bad)")
        }
        #expect(SimulatedDeviceSpec(parsing: "bthome-encrypted@\(Self.address)#\(key)")?.description == "bthome-encrypted@\(Self.address)")
    }
}
