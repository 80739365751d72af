import AdvertisementCodec
import BinaryCoding
import BridgeConfig
import BridgeCore
import Testing
@testable import DeviceProfiles

/// The `advertisement` profile over formats the test supplies (the resolver is injected): the
/// file's checks of `format`, `bindkey` and `advertisement_formats` with key path and line, the
/// scan's guess, `device/add`'s templates, and the decoder it gives the bridge.
@Suite struct AdvertisementProfileTests {
    /// Service data 0xFFF0 `[id, value]` → `{"moisture": value}`; `keyed` takes a key, which must be `[0x5A] * 16`.
    struct TestFormat: AdvertisementFormat {
        let name: String
        var takesKey = false
        func matches(_ packet: AdvertisementPacket) -> Bool { packet.serviceData(0xFFF0) != nil }
        func decode(_ packet: AdvertisementPacket, key: [UInt8]?) throws(AdvertisementError) -> Reading? {
            guard let b = packet.serviceData(0xFFF0) else { return nil }
            guard b.count == 2 else { throw .malformed("expected 2 bytes") }
            if takesKey, key != Array(repeating: 0x5A, count: 16) { throw .authenticationFailed }
            return Reading(values: ["moisture": .int(Int64(b[1]))], packetID: UInt32(b[0]))
        }
    }

    static let resolver = AdvertisementFormatResolver(
        builtinNames: ["plain", "keyed"],
        builtin: { name in ["plain": TestFormat(name: "plain"), "keyed": TestFormat(name: "keyed", takesKey: true)][name] },
        parse: { name, definition in
            guard definition.objectValue?["match"] != nil else { throw AdvertisementError.malformed("match: required") }
            return TestFormat(name: name)
        })
    static let profile = AdvertisementProfile(resolver: resolver)

    func load(_ yaml: String) throws(ConfigError) -> Configuration {
        try Configuration(yaml: yaml, profiles: [Self.profile, LayoutProfile()])
    }

    func error(_ yaml: String) -> ConfigError? {
        do { _ = try load(yaml); return nil } catch { return error }
    }

    static func device(_ format: String, _ extra: String = "") -> String {
        "devices:\n  - id: plant\n    address: C0:FF:EE:00:00:07\n    profile: advertisement\n    format: \(format)\n" + extra
    }

    @Test func formatsAreCheckedAgainstWhatExists() throws {
        #expect(try load(Self.device("plain")).devices[0].format == "plain")
        let user = "advertisement_formats:\n  mine: {match: {service_data: FFF0}}\n" + Self.device("mine")
        #expect(try load(user).devices[0].format == "mine")
        let unknown = try #require(error(Self.device("nope")))
        #expect(unknown.path == "devices[0].format" && unknown.line == 5)
        #expect(unknown.message == "'nope' is not a format: one of plain, keyed")
        let shadow = try #require(error("advertisement_formats:\n  plain: {match: {}}\n"))
        #expect(shadow.path == "advertisement_formats.plain" && shadow.line == 2 && shadow.message.contains("built-in"))
        let broken = try #require(error("advertisement_formats:\n  mine: {fields: []}\n"))
        #expect(broken.path == "advertisement_formats.mine" && broken.line == 2 && broken.message.contains("match: required"))
        // Without a parser a user format is refused, said so.
        let none = AdvertisementProfile(resolver: AdvertisementFormatResolver(builtinNames: [], builtin: { _ in nil }, parse: nil))
        do {
            _ = try Configuration(yaml: "advertisement_formats:\n  mine: {match: {}}\n", profiles: [none])
            Issue.record("expected an error")
        } catch {
            #expect(error.path == "advertisement_formats.mine" && error.message.contains("no user advertisement formats"))
        }
    }

    /// The standard resolver reads `advertisement_formats` as layout formats: a user's invented
    /// format (Tests/Layouts/soil-probe.yaml's, inline) decodes; a mistake inside a definition is
    /// named by its key path and line.
    @Test func theStandardResolverReadsLayoutFormats() throws {
        let yaml = """
            advertisement_formats:
              soil:
                match: {manufacturer_id: 0xFFFF, prefix: "50"}
                packet_id: sequence
                layout:
                  fields:
                    - {type: pad, value: "50"}
                    - {name: sequence, type: u8}
                    - type: flags
                      size: 2
                      bits:
                        - {name: moisture, bit: 0, width: 10, scale: 1/10, invalid: 0x3FF, unit: "%"}
                        - {name: battery_low, bit: 15}
                    - {name: temperature, type: i16, scale: 0.01, invalid: 0x7FFF, unit: °C}
                    - {name: conductivity, type: u16, endian: big, unit: µS/cm}
            devices:
              - {id: bed, address: "C0:FF:EE:00:00:09", profile: advertisement, format: soil}

            """
        let profile = AdvertisementProfile()
        let c = try Configuration(yaml: yaml, profiles: [profile, LayoutProfile()])
        let decoder = try #require(try profile.makeDecoder(for: c.devices[0], formats: c.advertisementFormats))
        let ad = Advertisement(address: "C0:FF:EE:00:00:09", manufacturerData: [0xFFFF: [0x50, 0x2A, 0xC7, 0x81, 0x3A, 0x07, 0x01, 0x5E]])
        #expect(try decoder.decode(ad) == PassiveReading(values: ["moisture": 45.5, "battery_low": true, "temperature": 18.5, "conductivity": 350],
                                                          packetID: 42))

        func failure(_ text: String) -> ConfigError? {
            do { _ = try Configuration(yaml: text, profiles: [profile, LayoutProfile()]); return nil } catch { return error }
        }
        let typo = try #require(failure(yaml.replacingOccurrences(of: "prefix: \"50\"}", with: "prefix: \"50\", lenght: 8}")))
        #expect(typo.path == "advertisement_formats.soil.match.lenght" && typo.line == 3, "\(typo)")
        #expect(typo.message.hasPrefix("unknown key 'lenght'"), "\(typo)")
        let badType = try #require(failure(yaml.replacingOccurrences(of: "type: i16", with: "type: i17")))
        #expect(badType.path == "advertisement_formats.soil.layout.fields[3].type" && badType.line == 14, "\(badType)")
        let badID = try #require(failure(yaml.replacingOccurrences(of: "packet_id: sequence", with: "packet_id: nope")))
        #expect(badID.path == "advertisement_formats.soil.packet_id" && badID.line == 4 && badID.message.contains("numeric field"), "\(badID)")
        // A built-in's name is not the user's to take.
        let shadow = try #require(failure(yaml.replacingOccurrences(of: "  soil:", with: "  ruuvi:")))
        #expect(shadow.path == "advertisement_formats.ruuvi" && shadow.line == 2)
    }

    /// A layout format declares its fields: a device of one (built-in or the user's) has their
    /// entities before anything is heard, with the layout's units; the packet id is none. BTHome's
    /// fields come as they are seen.
    @Test func homeAssistantEntitiesOfTheFieldsALayoutDeclares() throws {
        let profile = AdvertisementProfile()
        let topics = Topics(base: "gatt2mqtt")
        var d = DeviceConfig(id: "tag", profile: .advertisement)
        d.address = "C0:FF:EE:00:00:0A"
        d.format = "ruuvi"
        let ruuvi = profile.homeAssistantEntities(for: d, topics: topics, state: [:])
        #expect(ruuvi.map(\.object) == ["temperature", "humidity", "pressure", "acceleration_x", "acceleration_y", "acceleration_z",
                                         "voltage", "tx_power", "movement_counter"])
        #expect(ruuvi.first { $0.object == "pressure" }?.extra == ["device_class": "atmospheric_pressure", "unit_of_measurement": "hPa",
                                                                   "state_class": "measurement"])
        // A field the state has beyond the declared ones still gets its entity, once.
        let more = profile.homeAssistantEntities(for: d, topics: topics, state: ["temperature": 20, "extra": true, "rssi": -50])
        #expect(more.map(\.object) == ruuvi.map(\.object) + ["extra"])
        // The user's format, from the configuration's definitions: a flag is a binary sensor, the unit the layout's.
        d.format = "probe"
        let formats: [String: JSONValue] = [
            "probe": ["match": ["manufacturer_id": 65535], "packet_id": "seq",
                      "layout": ["fields": [["name": "seq", "type": "u8"], ["name": "temperature", "type": "i16", "unit": "°F"],
                                            ["type": "flags", "bits": [["name": "door", "bit": 0]]]]]],
        ]
        let probe = profile.homeAssistantEntities(for: d, topics: topics, state: [:], formats: formats)
        #expect(probe.map(\.object) == ["temperature", "door"])
        #expect(probe[0].extra["unit_of_measurement"] == "°F" && probe[0].extra["device_class"] == "temperature")
        #expect(probe[1].component == .binarySensor && probe[1].extra == ["device_class": "door"])
        #expect(profile.homeAssistantEntities(for: d, topics: topics, state: [:]).isEmpty, "without its definition: none declared")
        d.format = "bthome"
        #expect(profile.homeAssistantEntities(for: d, topics: topics, state: [:]).isEmpty)
    }

    @Test func aKeyOnlyForAFormatThatTakesOne() throws {
        let key = String(repeating: "5a", count: 16)
        #expect(try load(Self.device("keyed", "    bindkey: \(key)\n")).devices[0].bindkey == Array(repeating: 0x5A, count: 16))
        let plain = try #require(error(Self.device("plain", "    bindkey: \(key)\n")))
        #expect(plain.path == "devices[0].bindkey" && plain.message.contains("takes no bindkey"))
    }

    @Test func theDecoderReadsTheDevicesFormatWithItsKey() throws {
        var d = DeviceConfig(id: "plant", profile: .advertisement)
        d.address = "C0:FF:EE:00:00:07"
        d.format = "keyed"
        d.bindkey = Array(repeating: 0x5A, count: 16)
        let decoder = try #require(try Self.profile.makeDecoder(for: d, formats: [:]))
        let ad = Advertisement(address: "C0:FF:EE:00:00:07", serviceData: [AdvertisementPacket.uuid(0xFFF0): [3, 42]])
        #expect(try decoder.decode(ad) == PassiveReading(values: ["moisture": 42], packetID: 3))
        #expect(try decoder.decode(Advertisement(address: "C0:FF:EE:00:00:07")) == nil)  // not this format's
        #expect(throws: PassiveDecodeError("malformed advertisement: expected 2 bytes")) {
            try decoder.decode(Advertisement(address: "C0:FF:EE:00:00:07", serviceData: [AdvertisementPacket.uuid(0xFFF0): [1]]))
        }
        d.bindkey = Array(repeating: 0, count: 16)
        let wrongKey = try #require(try Self.profile.makeDecoder(for: d, formats: [:]))
        #expect(throws: PassiveDecodeError(AdvertisementError.authenticationFailed.description)) { try wrongKey.decode(ad) }
        // A user format comes from the configuration's definitions.
        d.format = "mine"
        d.bindkey = nil
        #expect(try Self.profile.makeDecoder(for: d, formats: ["mine": ["match": [:]]]) != nil)
        #expect(throws: ConfigError.self) { try Self.profile.makeDecoder(for: d, formats: [:]) }
        // Other profiles' devices have none.
        #expect(try LayoutProfile().makeDecoder(for: d, formats: [:]) == nil)
    }

    @Test func scanGuessAndTemplates() throws {
        let ad = Advertisement(address: "C0:FF:EE:00:00:07", serviceData: [AdvertisementPacket.uuid(0xFFF0): [1, 2]])
        let guess = try #require(Self.profile.matches(ad))
        #expect(guess.name == "plain" && guess.profile == .advertisement && guess.fields == ["format": "plain"])
        #expect(Self.profile.matches(Advertisement(address: "C0:FF:EE:00:00:07")) == nil)
        #expect(Self.profile.templateNames == ["plain", "keyed"])
        #expect(Self.profile.template(named: "keyed", withBattery: false)?.fields == ["format": "keyed"])
        // Registered before the layout profile, so a format's service data is not taken for a GATT template.
        let ids = DeviceProfiles.all.map(\.id)
        #expect(ids.firstIndex(of: .advertisement)! < ids.firstIndex(of: .custom)!)
    }

    @Test func homeAssistantEntitiesFollowTheFieldsSeen() throws {
        var d = DeviceConfig(id: "porch", profile: .advertisement)
        d.address = "A4:C1:38:00:00:01"
        d.format = "plain"
        let topics = Topics(base: "gatt2mqtt")
        #expect(Self.profile.homeAssistantEntities(for: d, topics: topics, state: [:]).isEmpty)
        let state: JSONObject = ["temperature": 21.5, "temperature_2": 3, "humidity": 40, "energy": 1.5, "motion": true, "generic": false,
                                 "button": "press", "tx_power": 4, "mystery": 7, "list": [1], "rssi": -60, "last_seen": "2026-01-01T00:00:00Z"]
        let entities = Self.profile.homeAssistantEntities(for: d, topics: topics, state: state)
        let byObject = Dictionary(uniqueKeysWithValues: entities.map { ($0.object, $0) })
        #expect(entities.map(\.object) == ["temperature", "temperature_2", "humidity", "energy", "motion", "generic", "button", "tx_power", "mystery"])
        #expect(byObject["temperature"]?.extra == ["device_class": "temperature", "unit_of_measurement": "°C", "state_class": "measurement"])
        #expect(byObject["temperature_2"]?.extra["device_class"] == "temperature")
        #expect(byObject["temperature"]?.state == .number(["temperature"]))
        #expect(byObject["energy"]?.extra["state_class"] == "total_increasing")
        #expect(byObject["motion"]?.component == .binarySensor && byObject["motion"]?.extra == ["device_class": "motion"])
        #expect(byObject["generic"]?.component == .binarySensor && byObject["generic"]?.extra == [:])
        #expect(byObject["button"]?.component == .sensor && byObject["button"]?.state == .text(["button"]))
        #expect(byObject["tx_power"]?.extra["entity_category"] == "diagnostic")
        #expect(byObject["mystery"]?.extra == ["state_class": "measurement"])
        // Every measurement name of a number the formats share has a meaning, and none of the booleans is a number.
        #expect(Set(AdvertisementProfile.measures.keys).isDisjoint(with: AdvertisementProfile.binaryClasses.keys))
    }
}
