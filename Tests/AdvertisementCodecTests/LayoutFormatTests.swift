import AdvertisementCodec
import BinaryCoding
import GattLayout
import Testing

func hexBytes(_ hex: String) -> [UInt8] { (try? Hex.decode(hex)) ?? [] }

func jsonValue(_ text: String) -> JSONValue {
    do { return try JSONValue(parsing: text) } catch {
        Issue.record("bad JSON in test: \(error)")
        return .null
    }
}

/// A packet carrying `bytes` where a variant of `format` reads them.
func packet(for format: LayoutFormat, variant: Int = 0, _ bytes: [UInt8], name: String? = nil) -> AdvertisementPacket {
    switch format.variants[variant].match.source {
    case let .serviceData(uuid): AdvertisementPacket(address: "A4:C1:38:0B:2C:5F", name: name, serviceData: [uuid: bytes])
    case let .manufacturer(id): AdvertisementPacket(address: "A4:C1:38:0B:2C:5F", name: name, manufacturerData: [id: bytes])
    }
}

func builtinLayout(_ name: String) throws -> LayoutFormat {
    try #require(AdvertisementFormats.builtin(named: name) as? LayoutFormat)
}

/// Whether `values` has exactly `expected`'s keys, in order, with numbers within 1e-9.
func same(_ values: JSONObject, _ expected: [(String, Double)]) -> Bool {
    guard values.keys.map({ $0 }) == expected.map(\.0) else { return false }
    return expected.allSatisfy { key, number in
        if case let .bool(b)? = values[key] { return (b ? 1 : 0) == number }
        guard let d = values[key]?.doubleValue else { return false }
        return abs(d - number) < 1e-9
    }
}

@Suite struct LayoutFormatTests {
    struct Vector: Sendable {
        let format: String
        let hex: String
        let values: [(String, Double)]
        let packetID: UInt32?
        let source: String
    }

    static let vectors: [Vector] = [
        // ATC1441's README layout (13 bytes, big-endian); the bytes are built from it.
        Vector(format: "atc", hex: "a4c1380b2c5f 00e6 2d 5d 0b9f 1b",
               values: [("temperature", 23), ("humidity", 45), ("battery", 93), ("voltage", 2.975)], packetID: 27,
               source: "ATC1441 README, advertising format"),
        Vector(format: "atc", hex: "a4c1380b2c5f ff9c 2d 5d 0b9f 1c",
               values: [("temperature", -10), ("humidity", 45), ("battery", 93), ("voltage", 2.975)], packetID: 28,
               source: "ATC1441, a negative temperature"),
        // PVVX's custom format (15 bytes, little-endian, MAC reversed).
        Vector(format: "atc", hex: "5f2c0b38c1a4 8709 3412 9f0b 5d 1b 04",
               values: [("temperature", 24.39), ("humidity", 46.6), ("voltage", 2.975), ("battery", 93)], packetID: 27,
               source: "PVVX README, custom format"),
        // Ruuvi's test vectors for data format 5 (docs.ruuvi.com, "Data format 5").
        Vector(format: "ruuvi", hex: "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F",
               values: [("temperature", 24.3), ("humidity", 53.49), ("pressure", 1000.44),
                        ("acceleration_x", 0.004 * 9.80665), ("acceleration_y", -0.004 * 9.80665), ("acceleration_z", 1.036 * 9.80665),
                        ("voltage", 2.977), ("tx_power", 4), ("movement_counter", 66)], packetID: 205,
               source: "Ruuvi data format 5, valid data"),
        Vector(format: "ruuvi", hex: "057FFFFFFEFFFE7FFF7FFF7FFFFFDEFEFFFECBB8334C884F",
               values: [("temperature", 163.835), ("humidity", 163.835), ("pressure", 1155.34),
                        ("acceleration_x", 32.767 * 9.80665), ("acceleration_y", 32.767 * 9.80665), ("acceleration_z", 32.767 * 9.80665),
                        ("voltage", 3.646), ("tx_power", 20), ("movement_counter", 254)], packetID: 65534,
               source: "Ruuvi data format 5, maximum values"),
        Vector(format: "ruuvi", hex: "058001000000008001800180010000000000CBB8334C884F",
               values: [("temperature", -163.835), ("humidity", 0), ("pressure", 500),
                        ("acceleration_x", -32.767 * 9.80665), ("acceleration_y", -32.767 * 9.80665), ("acceleration_z", -32.767 * 9.80665),
                        ("voltage", 1.6), ("tx_power", -40), ("movement_counter", 0)], packetID: 0,
               source: "Ruuvi data format 5, minimum values"),
        Vector(format: "ruuvi", hex: "058000FFFFFFFF800080008000FFFFFFFFFFFFFFFFFFFFFF",
               values: [], packetID: nil, source: "Ruuvi data format 5, invalid values"),
        // Govee H5075 captures (GoveeWatcher, govee-ble's worked example).
        Vector(format: "govee", hex: "00 034db2 64 00",
               values: [("temperature", 21.6), ("humidity", 49.8), ("battery", 100), ("problem", 0)], packetID: nil,
               source: "govee-ble, H5075 worked example"),
        Vector(format: "govee", hex: "00 81c289 64 00",
               values: [("temperature", -11.5), ("humidity", 33.7), ("battery", 100), ("problem", 0)], packetID: nil,
               source: "GoveeWatcher, H5075 below zero"),
        Vector(format: "govee", hex: "00 03bb94 e4 00",
               values: [("temperature", 24.4), ("humidity", 62.8), ("battery", 100), ("problem", 1)], packetID: nil,
               source: "GoveeWatcher, H5075 with the error bit"),
        // H5074: int16 LE 0.01 °C, uint16 LE 0.01 %, battery (govee-ble's layout; bytes built from it).
        Vector(format: "govee", hex: "00 ab07 e615 64 02",
               values: [("temperature", 19.63), ("humidity", 56.06), ("battery", 100)], packetID: nil,
               source: "govee-ble, H5074 layout"),
    ]

    @Test(arguments: vectors) func decodesTheSpecificationsVectors(_ v: Vector) throws {
        let format = try builtinLayout(v.format)
        let bytes = hexBytes(v.hex)
        let index = try #require(format.variants.firstIndex { $0.match.length == bytes.count }, "\(v.source)")
        let p = packet(for: format, variant: index, bytes)
        #expect(format.matches(p))
        let reading = try #require(try format.decode(p, key: nil))
        #expect(same(reading.values, v.values), "\(v.source): \(reading.values)")
        #expect(reading.packetID == v.packetID, "\(v.source)")
        #expect(!reading.encrypted && reading.counter == nil)
        #expect(!format.takesKey)
    }

    @Test func theBuiltinsAreRegistered() throws {
        #expect(AdvertisementFormats.layouts.map(\.name) == ["atc", "ruuvi", "govee"])
        for (name, _) in LayoutFormat.builtinDefinitions { _ = try builtinLayout(name) }
        // Not theirs: another service, another company, the wrong length or data format.
        let atc = try builtinLayout("atc"), ruuvi = try builtinLayout("ruuvi")
        let other = AdvertisementPacket(address: "A4:C1:38:0B:2C:5F", serviceData: [AdvertisementPacket.uuid(0xFCD2): hexBytes("40")])
        #expect(!atc.matches(other))
        #expect(try atc.decode(other, key: nil) == nil)
        #expect(try atc.decode(packet(for: atc, hexBytes("a4c1380b2c5f00e62d5d0b9f")), key: nil) == nil)  // 12 bytes
        #expect(try ruuvi.decode(packet(for: ruuvi, hexBytes("0312FC5394C37C0004FFFC040CAC364200CDCBB8334C884F")), key: nil) == nil)
    }

    @Test func keysForHomeAssistant() throws {
        let atc = try builtinLayout("atc").keys
        #expect(atc.map(\.name) == ["temperature", "humidity", "battery", "voltage"])
        #expect(atc.map(\.unit) == ["°C", "%", "%", "V"])
        #expect(atc.allSatisfy { !$0.isConditional })
        let ruuvi = try builtinLayout("ruuvi").keys
        #expect(ruuvi.map(\.name) == ["temperature", "humidity", "pressure", "acceleration_x", "acceleration_y", "acceleration_z", "voltage", "tx_power", "movement_counter"])
        #expect(ruuvi.allSatisfy { $0.isConditional })  // each has a "not available" value
        let govee = try builtinLayout("govee").keys
        #expect(govee.map(\.name) == ["temperature", "humidity", "battery", "problem"])
        #expect(govee.map(\.isConditional) == [false, false, false, true])  // H5074 has no error bit
        #expect(govee.last?.kind == .boolean)
    }

    /// A user's format for an invented device: manufacturer 0xFFFF, a leading byte, a 10-bit
    /// moisture with a sentinel in a 16-bit word, a flag bit, a sentinel temperature.
    static let soilProbe = #"""
    {"match": {"manufacturer_id": "0xFFFF", "prefix": "50", "name_prefix": "SOIL"},
     "packet_id": "sequence",
     "layout": {"fields": [
       {"type": "pad", "value": "50"},
       {"name": "sequence", "type": "u8"},
       {"type": "flags", "size": 2, "bits": [
         {"name": "moisture", "bit": 0, "width": 10, "scale": "1/10", "invalid": 1023, "unit": "%"},
         {"name": "battery_low", "bit": 15}]},
       {"name": "temperature", "type": "i16", "scale": "1/100", "invalid": 32767, "unit": "°C"},
       {"name": "conductivity", "type": "u16", "endian": "big", "unit": "µS/cm"}]}}
    """#

    @Test func aUsersFormatDecodes() throws {
        let soil = try LayoutFormat(json: jsonValue(Self.soilProbe), name: "soil_probe")
        #expect(soil.name == "soil_probe")
        let p = AdvertisementPacket(address: "00:11:22:33:44:55", name: "SOIL-1", manufacturerData: [0xFFFF: hexBytes("50 2a c781 3a07 015e")])
        let reading = try #require(try soil.decode(p, key: nil))
        #expect(reading.values == jsonValue(#"{"moisture":45.5,"battery_low":true,"temperature":18.5,"conductivity":350}"#).objectValue)
        #expect(reading.packetID == 42)
        var missing = p
        missing.manufacturerData[0xFFFF] = hexBytes("50 2b ff03 ff7f 015e")
        #expect(try soil.decode(missing, key: nil)?.values == jsonValue(#"{"battery_low":false,"conductivity":350}"#).objectValue)
        var unnamed = p
        unnamed.name = "OTHER"
        #expect(!soil.matches(unnamed))
        var short = p
        short.manufacturerData[0xFFFF] = hexBytes("50 2a c781")
        #expect(throws: AdvertisementError.malformed("soil_probe: need more data: field 'temperature' at byte 4 needs 2 byte(s), only 0 left")) {
            try soil.decode(short, key: nil)
        }
        #expect(try soil.encode(reading) == hexBytes("50 2a c781 3a07 015e"))
    }

    @Test(arguments: [
        (#"{"match":{"service_data":"181A"},"layout":{"fields":[{"name":"a","type":"u8"}]}}"#, "", "missing key 'name'"),
        (#"{"name":"x","layout":{"fields":[{"name":"a","type":"u8"}]}}"#, "", "missing key 'match'"),
        (#"{"name":"x","match":{"service_data":181},"layout":{"fields":[{"name":"a","type":"u8"}]}}"#,
         "match.service_data", "write the UUID as text, e.g. \"2A37\" (a number is ambiguous: 181)"),
        (#"{"name":"x","match":{"manufacturer_id":70000},"layout":{"fields":[{"name":"a","type":"u8"}]}}"#,
         "match.manufacturer_id", "expected a company identifier 0…0xFFFF, found 70000"),
        (#"{"name":"x","match":{"service_data":"181A","manufacturer_id":1},"layout":{"fields":[{"name":"a","type":"u8"}]}}"#,
         "match.manufacturer_id", "give either 'service_data' or 'manufacturer_id', not both"),
        (#"{"name":"x","match":{},"layout":{"fields":[{"name":"a","type":"u8"}]}}"#,
         "match", "give 'service_data' (a UUID) or 'manufacturer_id' (a company identifier)"),
        (#"{"name":"x","match":{"service_data":"181A","prefix":"0g"},"layout":{"fields":[{"name":"a","type":"u8"}]}}"#,
         "match.prefix", "expected 1…31 bytes as hex text (\"05\"), found \"0g\""),
        (#"{"name":"x","match":{"service_data":"181A","length":0},"layout":{"fields":[{"name":"a","type":"u8"}]}}"#,
         "match.length", "expected a byte count 1…255, found 0"),
        (#"{"name":"x","match":{"service_data":"181A"},"packet_id":"b","layout":{"fields":[{"name":"a","type":"u8"}]}}"#,
         "packet_id", "expected the name of a numeric field of the layout (a), found \"b\""),
        (#"{"name":"x","variants":[{"match":{"service_data":"181A"},"layout":{"fields":[{"name":"a","type":"u8"}]}},{"match":{"service_data":"181A"},"layout":{"fields":[{"name":"a","type":"u7"}]}}]}"#,
         "variants[1].layout.fields[0].type", "unknown type 'u7' (u8…u64, i8…i64, float32, float64, sfloat, medfloat16, medfloat32, utf8, bytes, pad, flags, struct, date_time)"),
        (#"{"name":"x","match":{"service_data":"181A"},"layuot":{}}"#,
         "layuot", "unknown key 'layuot' (allowed: description, layout, match, name, packet_id)"),
    ])
    func badDefinitionsNameTheKeyPath(_ text: String, _ path: String, _ reason: String) {
        #expect(throws: GattLayoutError.invalidLayout(path: path, reason: reason)) { try LayoutFormat(json: jsonValue(text)) }
    }
}
