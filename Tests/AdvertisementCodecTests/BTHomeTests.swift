import AdvertisementCodec
import BinaryCoding
import Testing

private func hex(_ s: String) -> [UInt8] { try! Hex.decode(s.replacing(" ", with: "")) }

@Suite struct BTHomeTests {
    static let address = "54:48:E6:8F:80:A5"
    static let key = hex("231d39c1d7cc1ab1aee224cd096db932")

    private func decode(_ objects: String, key: [UInt8]? = nil) throws -> Reading {
        try BTHome.decode([0x40] + hex(objects), key: key, address: Self.address)
    }

    /// Every example of bthome.io/format: the object's bytes as the page gives them and the
    /// value the page says they mean.
    @Test(arguments: [
        ("518756", "acceleration", 22.151), ("630057D0FF", "acceleration", -3.123456), ("0161", "battery", 97),
        ("6001", "channel", 1), ("12E204", "co2", 1250), ("56E803", "conductivity", 1000), ("0960", "count", 96),
        ("3D0960", "count", 24585), ("3E2A2C0960", "count", 1_611_213_866), ("59EA", "count", -22),
        ("5AEAEA", "count", -5398), ("5BEA0234EA", "count", -365_690_134), ("434E34", "current", 13.39),
        ("5D02EA", "current", -5.63), ("08CA06", "dew_point", 17.38), ("5E9F8C", "direction", 359.99),
        ("400C00", "distance_mm", 12), ("414E00", "distance_m", 7.8), ("424E3400", "duration", 13.39),
        ("4d12138a14", "energy", 344_593.17), ("0A138A14", "energy", 1346.067), ("4B138A14", "gas", 1346.067),
        ("4C41018A01", "gas", 25821.505), ("528756", "gyroscope", 22.151), ("03BF13", "humidity", 50.55),
        ("2E23", "humidity", 35), ("05138A14", "illuminance", 13460.67), ("6402", "light_level", 2),
        ("065E1F", "mass_kg", 80.3), ("073E1D", "mass_lb", 74.86), ("14020C", "moisture", 30.74), ("2F23", "moisture", 35),
        ("0D120C", "pm2_5", 3090), ("0E021C", "pm10", 7170), ("0B021B00", "power", 69.14), ("5C02FBFFFF", "power", -12.78),
        ("5FA00F", "precipitation", 400.0), ("04138A01", "pressure", 1008.83), ("3F020C", "rotation", 307.4),
        ("61AC0D", "rotational_speed", 3500), ("6503", "settings_revision", 3), ("444E34", "speed", 133.9),
        ("624099DFFF", "speed", -2.123456), ("57EA", "temperature", -22), ("58EA", "temperature", -7.7),
        ("451101", "temperature", 27.3), ("02CA09", "temperature", 25.06), ("505d396164", "timestamp", 1_684_093_277),
        ("133301", "tvoc", 307), ("0C020C", "voltage", 3.074), ("4A020C", "voltage", 307.4), ("4E87562A01", "volume_l", 19551.879),
        ("478756", "volume_l", 2215.1), ("48DC87", "volume_ml", 34780), ("5587562A01", "volume_storage", 19551.879),
        ("49DC87", "volume_flow_rate", 34.78), ("4632", "uv_index", 5.0), ("4F87562A01", "water", 19551.879),
        ("F00100", "device_type_id", 1),
    ] as [(String, String, Double)])
    func sensorExamples(bytes: String, name: String, expected: Double) throws {
        let reading = try decode(bytes)
        #expect(reading.values.keys == [name])
        let value = try #require(reading.values[name]?.doubleValue)
        #expect(abs(value - expected) < 1e-9, "\(bytes): \(value) ≠ \(expected)")
    }

    @Test(arguments: [
        ("1501", "battery_low", true), ("1601", "battery_charging", true), ("1700", "carbon_monoxide", false), ("1801", "cold", true),
        ("1900", "connectivity", false), ("1A00", "door", false), ("1B01", "garage_door", true), ("1C01", "gas_detected", true),
        ("0F01", "generic", true), ("1D00", "heat", false), ("1E01", "light", true), ("1F01", "lock", true),
        ("2001", "moisture_detected", true), ("2100", "motion", false), ("2201", "moving", true), ("2301", "occupancy", true),
        ("1100", "opening", false), ("2400", "plug", false), ("1001", "power_on", true), ("2500", "presence", false),
        ("2601", "problem", true), ("2701", "running", true), ("2800", "safety", false), ("2901", "smoke", true),
        ("2A00", "sound", false), ("2B00", "tamper", false), ("2C01", "vibration", true), ("2D01", "window", true),
    ])
    func binaryExamples(bytes: String, name: String, expected: Bool) throws {
        #expect(try decode(bytes).values == [name: .bool(expected)])
    }

    @Test(arguments: [
        ("3A00", ["button": "none"]), ("3A01", ["button": "press"]), ("3A02", ["button": "double_press"]),
        ("3A03", ["button": "triple_press"]), ("3A04", ["button": "long_press"]), ("3A05", ["button": "long_double_press"]),
        ("3A06", ["button": "long_triple_press"]), ("3A80", ["button": "hold_press"]),
        ("3A003A01", ["button": "none", "button_2": "press"]),
        ("3B0000", ["command": "off"]), ("3B0001", ["command": "on"]), ("3B0002", ["command": "toggle"]),
        ("3B010305", ["command": "step_up", "command_arguments": "05"]), ("3B010405", ["command": "step_down", "command_arguments": "05"]),
        ("530C48656C6C6F20576F726C6421", ["text": "Hello World!"]), ("540C48656C6C6F20576F726C6421", ["raw": "48656c6c6f20576f726c6421"]),
        ("F100010204", ["firmware": "4.2.1.0"]), ("F2000106", ["firmware": "6.1.0"]),
    ] as [(String, [String: String])])
    func eventAndTextExamples(bytes: String, expected: [String: String]) throws {
        let reading = try decode(bytes)
        #expect(reading.values.count == expected.count)
        for (k, v) in expected { #expect(reading.values[k] == .string(v), "\(bytes): \(k)") }
    }

    @Test func dimmerEventsCarryTheirSteps() throws {
        #expect(try decode("3C0103").values == ["dimmer": "rotate_left", "dimmer_steps": 3])
        #expect(try decode("3C020A3C0103").values == ["dimmer": "rotate_right", "dimmer_steps": 10, "dimmer_2": "rotate_left", "dimmer_steps_2": 3])
    }

    /// The page's opening example (temperature and humidity), a packet id, and repeated ids.
    @Test func theFormatPagesExampleAPacketIDAndRepeats() throws {
        let first = try BTHome.decode(hex("4002C40903BF13"), key: nil, address: Self.address)
        #expect(first.values == ["temperature": 25.0, "humidity": 50.55])
        #expect(first.packetID == nil && first.counter == nil && !first.encrypted && !first.triggerBased)
        let withID = try decode("000902C409")
        #expect(withID.packetID == 9)
        #expect(withID.values == ["temperature": 25.0])
        let three = try decode("02C40902CA094511010161")
        #expect(three.values.keys == ["temperature", "temperature_2", "temperature_3", "battery"])
        #expect(three.values["temperature_3"] == 27.3)
    }

    @Test func theDeviceInformationByte() throws {
        let trigger = try BTHome.decode(hex("443A01"), key: nil, address: Self.address)
        #expect(trigger.triggerBased && trigger.values == ["button": "press"])
        #expect(throws: AdvertisementError.unsupported("BTHome version 1 (only version 2)")) {
            try BTHome.decode(hex("2002C409"), key: nil, address: Self.address)
        }
        #expect(throws: AdvertisementError.unsupported("BTHome version 3 (only version 2)")) {
            try BTHome.decode(hex("6002C409"), key: nil, address: Self.address)
        }
        #expect(throws: AdvertisementError.malformed("BTHome service data is empty (no device information byte)")) {
            try BTHome.decode([], key: nil, address: Self.address)
        }
    }

    /// An unknown id ends the reading: what came before is kept, nothing before is an error.
    @Test func anUnknownObjectIDStopsTheReading() throws {
        #expect(try decode("02C409FE0102").values == ["temperature": 25.0])
        #expect(throws: AdvertisementError.unsupported("BTHome object id 0xFE")) { try decode("FE0102") }
        #expect(throws: AdvertisementError.unsupported("BTHome object id 0x66")) { try decode("0001660102") }
    }

    @Test func aTruncatedObjectIsMalformed() throws {
        #expect(throws: AdvertisementError.malformed("BTHome object 0x02 (temperature) needs 2 bytes, 1 left")) { try decode("0161 02C4") }
        #expect(throws: AdvertisementError.malformed("BTHome object 0x53 (text) needs 13 bytes, 3 left")) { try decode("530C4865") }
        #expect(throws: AdvertisementError.unsupported("BTHome button event 0x07")) { try decode("3A07") }
    }

    /// bthome.io/encryption: key 231d39c1…, MAC 54:48:E6:8F:80:A5, counter 0x00112233, the
    /// service data d2fc41e445f3c9962b332211006c7c4519 (the UUID d2fc is not in BlueZ's bytes).
    @Test func theEncryptionPagesExample() throws {
        let data = hex("41e445f3c9962b332211006c7c4519")
        let reading = try BTHome.decode(data, key: Self.key, address: Self.address)
        #expect(reading.values == ["temperature": 25.06, "humidity": 50.55])
        #expect(reading.counter == 1_122_867 && reading.encrypted)
        let encoded = try BTHome.encode(
            [(0x02, .number(25.06)), (0x03, .number(50.55))],
            encryption: .init(key: Self.key, counter: 1_122_867, address: Self.address))
        #expect(encoded == data)
        #expect(throws: AdvertisementError.keyRequired) { try BTHome.decode(data, key: nil, address: Self.address) }
        var wrongKey = Self.key
        wrongKey[0] ^= 1
        #expect(throws: AdvertisementError.authenticationFailed) { try BTHome.decode(data, key: wrongKey, address: Self.address) }
        for i in 1..<data.count {
            var altered = data
            altered[i] ^= 0x10
            #expect(throws: AdvertisementError.authenticationFailed) { try BTHome.decode(altered, key: Self.key, address: Self.address) }
        }
        #expect(throws: AdvertisementError.authenticationFailed) { try BTHome.decode(data, key: Self.key, address: "54:48:E6:8F:80:A6") }
        // With a key, a plain advertisement from the address is refused: anyone could send it.
        #expect(throws: AdvertisementError.authenticationFailed) { try BTHome.decode(hex("4002C409"), key: Self.key, address: Self.address) }
        #expect(throws: AdvertisementError.malformed("an AES-128 key is 16 bytes, this one has 15")) {
            try BTHome.decode(data, key: Array(Self.key.prefix(15)), address: Self.address)
        }
    }

    @Test func theFormatReadsServiceDataOfFCD2() throws {
        let format = try #require(AdvertisementFormats.builtin(named: "bthome"))
        #expect(format.takesKey)
        let packet = AdvertisementPacket(address: Self.address, serviceData: [AdvertisementPacket.uuid(0xFCD2): hex("4002C409")])
        #expect(format.matches(packet))
        #expect(try format.decode(packet, key: nil)?.values == ["temperature": 25.0])
        let other = AdvertisementPacket(address: Self.address, serviceData: [AdvertisementPacket.uuid(0xFE95): hex("4002C409")])
        #expect(!format.matches(other))
        #expect(try format.decode(other, key: nil) == nil)
        #expect(AdvertisementFormats.guess(packet)?.name == "bthome")
    }

    @Test func theEncoderRefusesWhatItCannotWrite() {
        #expect(throws: AdvertisementError.malformed("BTHome object 0x01 (battery): 256.0 is out of its range")) {
            try BTHome.encode([(0x01, .number(256))])
        }
        #expect(throws: AdvertisementError.malformed("BTHome object 0x02 (temperature): -327.69 is out of its range")) {
            try BTHome.encode([(0x02, .number(-327.69))])
        }
        #expect(throws: AdvertisementError.unsupported("BTHome object id 0xFE")) { try BTHome.encode([(0xFE, .number(1))]) }
        #expect(throws: AdvertisementError.malformed("the address \"nowhere\" is not six hex bytes separated by colons")) {
            try BTHome.encode([(0x01, .number(1))], encryption: .init(key: Self.key, counter: 1, address: "nowhere"))
        }
    }
}
