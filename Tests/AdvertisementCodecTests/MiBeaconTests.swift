import AdvertisementCodec
import BinaryCoding
import Testing

private func hex(_ s: String) -> [UInt8] { try! Hex.decode(s.replacing(" ", with: "")) }

@Suite struct MiBeaconTests {
    /// Frames published with Home Assistant's xiaomi-ble tests (the bytes and what they mean),
    /// checked by hand against the frame layout.
    @Test func publishedPlainFrames() throws {
        // LYWSDCGQ: control 0x2050 (v2, MAC, object), product 0x01AA, frame 0xA3, MAC reversed,
        // 0x100D (18.0 °C, 66.1 %), 0x100A (59 %).
        let lywsdcgq = try MiBeacon.decode(hex("5020aa01a3bf2e3b342d58 0d1004b4009502 0a10013b"), key: nil, address: "58:2D:34:3B:2E:BF")
        #expect(lywsdcgq.values == ["temperature": 18.0, "humidity": 66.1, "battery": 59])
        #expect(lywsdcgq.packetID == 0xA3 && lywsdcgq.counter == nil && !lywsdcgq.encrypted)
        // HHCCJCY01: control 0x2071 (v2, MAC, capability, object), capability 0x0D, 0x1004 19.6 °C.
        let flora = try MiBeacon.decode(hex("712098 0012f34f6b8d7cc4 0d 041002c400"), key: nil, address: "C4:7C:8D:6B:4F:F3")
        #expect(flora.values == ["temperature": 19.6])
        #expect(flora.packetID == 0x12)
    }

    /// LYWSD03MMC, MiBeacon v5 encrypted, with its bindkey (xiaomi-ble's test): humidity 46.7 % (Home Assistant
    /// shows 46: it truncates this model's humidity to whole percents).
    @Test func publishedEncryptedFrame() throws {
        let frame = hex("58585b0550 f4830238c1a4 95ef58763c 260000 97e2abb5")
        let key = hex("e9ea895fac7cca6d30532432a516f3a8")
        let reading = try MiBeacon.decode(frame, key: key, address: "A4:C1:38:02:83:F4")
        #expect(reading.values == ["humidity": 46.7])
        #expect(reading.encrypted && reading.packetID == 0x50 && reading.counter == 0x26 << 8 | 0x50)
        #expect(throws: AdvertisementError.keyRequired) { try MiBeacon.decode(frame, key: nil, address: "A4:C1:38:02:83:F4") }
        var wrong = key
        wrong[15] ^= 1
        #expect(throws: AdvertisementError.authenticationFailed) { try MiBeacon.decode(frame, key: wrong, address: "A4:C1:38:02:83:F4") }
        for i in [2, 4, 11, 15, 17, 20] {
            var altered = frame
            altered[i] ^= 0x01
            #expect(throws: AdvertisementError.authenticationFailed) { try MiBeacon.decode(altered, key: key, address: "A4:C1:38:02:83:F4") }
        }
    }

    /// One hand-made frame per object id (the value bytes worked out from the layout).
    @Test(arguments: [
        ("0410 02 1201", ["temperature": 27.4]), ("0410 02 F6FF", ["temperature": -1.0]),
        ("0610 02 C601", ["humidity": 45.4]), ("0A10 01 64", ["battery": 100]),
        ("0D10 04 CEFF 2003", ["temperature": -5.0, "humidity": 80.0]), ("0710 03 A08601", ["illuminance": 100_000]),
        ("0810 01 1E", ["moisture": 30]), ("0910 02 F401", ["conductivity": 500]), ("1010 02 0A00", ["formaldehyde": 0.1]),
        ("1210 01 01", ["power_on": true]), ("1310 01 50", ["consumable": 80]), ("1410 01 00", ["moisture_detected": false]),
        ("1510 01 01", ["smoke": true]), ("1710 04 78000000", ["no_motion_time": 120]), ("1810 01 00", ["light": false]),
        ("1910 01 00", ["opening": true]), ("1910 01 01", ["opening": false]), ("1910 01 02", ["opening": true]), ("1910 01 03", [:]),
        ("014C 04 3333AB41", ["temperature": 21.4]), ("0148 04 3333AB41", ["temperature": 21.4]),  // 21.4 as float32
        ("024C 01 2E", ["humidity": 46]), ("0248 01 2E", ["humidity": 46]), ("084C 04 CDCC3442", ["humidity": 45.2]),
        ("034C 01 5A", ["battery": 90]), ("0348 01 5A", ["battery": 90]),
        ("FFFF 02 0102 0A10 01 07", ["battery": 7]),  // an unknown object is skipped (its length is known)
    ] as [(String, JSONObject)])
    func objects(bytes: String, expected: JSONObject) throws {
        // v5, no MAC in the frame, object included: the sender's address is taken.
        let reading = try MiBeacon.decode(hex("4050 5b05 07" + bytes.replacing(" ", with: "")), key: nil, address: "A4:C1:38:00:00:01")
        #expect(reading.values == expected, "\(bytes)")
    }

    @Test func badFramesAreNamed() throws {
        let address = "A4:C1:38:00:00:01"
        #expect(throws: AdvertisementError.malformed("a MiBeacon frame has at least 5 bytes, this one 4")) { try MiBeacon.decode(hex("50205b05"), key: nil, address: address) }
        #expect(throws: AdvertisementError.unsupported("MiBeacon version 1 (2 and later only)")) { try MiBeacon.decode(hex("40105b0501"), key: nil, address: address) }
        #expect(throws: AdvertisementError.unsupported("MiBeacon mesh frames")) { try MiBeacon.decode(hex("c0505b0501"), key: nil, address: address) }
        #expect(throws: AdvertisementError.unsupported("MiBeacon v3 (legacy) encryption; v4 and v5 only")) {
            try MiBeacon.decode(hex("48305b0501 0102030405060708090a0b"), key: nil, address: address)
        }
        #expect(throws: AdvertisementError.malformed("MiBeacon object 0x1004 says 2 bytes, 1 left")) { try MiBeacon.decode(hex("40505b0501 041002c4"), key: nil, address: address) }
        #expect(throws: AdvertisementError.malformed("MiBeacon object 0x1004 has 1 bytes, not 2")) { try MiBeacon.decode(hex("40505b0501 041001c4"), key: nil, address: address) }
        #expect(throws: AdvertisementError.malformed("the MAC in the MiBeacon frame is not the sender's address \(address)")) {
            try MiBeacon.decode(hex("50505b0501 020000 38c1a4 041002c400"), key: nil, address: address)
        }
        #expect(throws: AdvertisementError.malformed("MiBeacon object 0x4C01 is not a finite number")) {
            try MiBeacon.decode(hex("40505b0501 014c040000807f"), key: nil, address: address)
        }
        // With a bindkey, a plain frame is refused: anyone could send it.
        #expect(throws: AdvertisementError.authenticationFailed) {
            try MiBeacon.decode(hex("40505b0501 041002c400"), key: [UInt8](repeating: 1, count: 16), address: address)
        }
        // A capability byte with bit 5 set is followed by an I/O capability byte.
        #expect(try MiBeacon.decode(hex("60505b0507 2801 0a100164"), key: nil, address: address).values == ["battery": 100])
        #expect(try MiBeacon.decode(hex("60505b0507 08 0a100164"), key: nil, address: address).values == ["battery": 100])
        #expect(throws: AdvertisementError.malformed("the MiBeacon frame ends before its I/O capability byte")) {
            try MiBeacon.decode(hex("60505b0507 28"), key: nil, address: address)
        }
        // A frame without objects only announces the device.
        #expect(try MiBeacon.decode(hex("10505b0501 010000 38c1a4"), key: nil, address: address).values.isEmpty)
    }

    @Test func theEncoderWritesWhatTheDecoderReads() throws {
        let key = hex("e9ea895fac7cca6d30532432a516f3a8")
        let address = "A4:C1:38:02:83:F4"
        let frame = try MiBeacon.encode(
            productID: 0x055B, frameCounter: 0x50, address: address, objects: [.humidity(46.7)],
            encryption: .init(key: key, extendedCounter: 0x26))
        #expect(frame == hex("58585b0550f4830238c1a495ef58763c26000097e2abb5"))  // the published frame
        let plain = try MiBeacon.encode(frameCounter: 1, address: address, includeMAC: false, objects: [.temperatureAndHumidity(-3.5, 41.2), .battery(88)])
        #expect(try MiBeacon.decode(plain, key: nil, address: address).values == ["temperature": -3.5, "humidity": 41.2, "battery": 88])
        #expect(throws: AdvertisementError.malformed("MiBeacon temperature: 3300.0 is out of its range")) { try MiBeacon.Object.temperature(3300) }
        #expect(throws: AdvertisementError.malformed("MiBeacon humidity: nan is out of its range")) { try MiBeacon.Object.humidity(.nan) }
        let format = try #require(AdvertisementFormats.builtin(named: "xiaomi"))
        #expect(format.takesKey)
        let packet = AdvertisementPacket(address: address, serviceData: [AdvertisementPacket.uuid(0xFE95): plain])
        #expect(format.matches(packet) && AdvertisementFormats.guess(packet)?.name == "xiaomi")
        #expect(try format.decode(packet, key: nil)?.values["battery"] == 88)
    }
}
