import BinaryCoding
import GoProCodec
import Testing

@Suite struct ResponseDecoderTests {
    func decode(_ hex: String, _ c: GoProCharacteristic) throws -> GoProResponse {
        try GoProResponse(decoding: Hex.decode(hex), on: c)
    }

    @Test func tlvVersusProtobufIsScopedByCharacteristic() throws {
        // 02 02 on GP-0073 is command 2 with status 2, not protobuf (0x02, 0x02) (§4.4).
        guard case let .command(r) = try decode("0202", .commandResponse) else { Issue.record("not TLV"); return }
        #expect(r.id == 2 && r.status == 2)
        // On GP-0092 everything is protobuf: 02 82 is the AP-scan response.
        guard case let .protobuf(p) = try decode("028208011002", .networkManagementResponse) else { Issue.record("not protobuf"); return }
        #expect(p.messageName == "ResponseStartScanning")
        #expect(try decode("028208011002", .networkManagementResponse).json["fields"]?["scanning_state"] == "SCANNING_STARTED")
        // F1 EB (turbo) and F5 ED (last media) are valid responses the SDK misses (§4.4).
        #expect(try decode("f1eb0801", .commandResponse).json["message"] == "ResponseGeneric")
        let media = try decode("f5ed080112170a073130304750524f120c47583031303030302e4d5034", .queryResponse).json
        #expect(media["message"] == "ResponseLastCapturedMedia")
        #expect(media["fields"]?["media"]?["file"] == "GX010000.MP4")
        #expect(media["fields"]?["media"]?["folder"] == "100GPRO")
        #expect(media["fields"]?["result"] == "RESULT_SUCCESS")
        // A setting response whose id equals a protobuf feature stays TLV unless the pair is listed there.
        guard case .setting = try decode("0200", .settingsResponse) else { Issue.record("not a setting response"); return }
    }

    @Test func presetStatusNotification() throws {
        // NotifyPresetStatus{ group { id 1000, preset { id 1, mode 12, setting {id 2, value 1} }, can_add true } }
        let body: [UInt8] = [0x0A, 0x13, 0x08, 0xE8, 0x07, 0x12, 0x0C, 0x08, 0x01, 0x10, 0x0C, 0x3A, 0x06, 0x08, 0x02, 0x10, 0x01, 0x18, 0x00, 0x18, 0x01]
        for action: UInt8 in [0xF2, 0xF3] {
            let r = try GoProResponse(decoding: [0xF5, action] + body, on: .queryResponse)
            let j = r.json
            #expect(j["message"] == "NotifyPresetStatus")
            let group = try #require(j["fields"]?["preset_group_array"]?.arrayValue?.first)
            #expect(group["id"] == 1000)
            #expect(group["can_add_preset"] == true)
            #expect(group["preset_array"]?.arrayValue?.first?["mode"] == 12)
            #expect(r.isAsynchronous == (action == 0xF3))
        }
    }

    @Test func undocumentedIdsAndZeroLengthValuesAreKept() throws {
        // status 3 (undocumented), 29 (SSID, empty), 33 = 0xFF (-1 Unknown), 40 (undocumented string)
        let r = try decode("1300030101" + "1d00" + "2101ff" + "2803414243", .queryResponse)
        guard case let .query(q) = r else { Issue.record("not a query"); return }
        #expect(q.entries.map(\.id) == [3, 29, 33, 40])
        #expect(q.entries.map(\.length) == [1, 0, 1, 3])
        let named = q.namedValues
        #expect(named["status_3"] == "01")
        #expect(named["connected_wifi_ssid"] == "")
        #expect(named["primary_storage"] == "Unknown")
        #expect(named["status_40"] == "414243")
    }

    @Test func valueTypesFollowTheTables() throws {
        let r = try decode("93000a0101" + "4601" + "54" + "3b04000001f4" + "1e0447503234", .queryResponse)
        guard case let .query(q) = r else { Issue.record("not a query"); return }
        #expect(r.isAsynchronous)
        let named = q.namedValues
        #expect(named["encoding"] == true)
        #expect(named["internal_battery_percentage"] == 84)
        #expect(named["time_since_last_hilight"] == 500)
        #expect(named["access_point_ssid"] == "GP24")
        let s = try decode("9200020101" + "0301ff", .queryResponse).json
        #expect(s["video_resolution"] == "4K")
        #expect(s["frames_per_second"] == 255)  // not an option: the number
    }

    @Test func truncatedQueryElementsAreReportedWithOffsets() throws {
        #expect(throws: GoProError.truncated(reason: "element 0x46 has no length byte", offset: 3)) {
            try decode("130046", .queryResponse)
        }
        #expect(throws: GoProError.truncated(reason: "element 0x46 declares 4 byte(s), 2 left", offset: 4)) {
            try decode("1300460401 02".replacingOccurrences(of: " ", with: ""), .queryResponse)
        }
        #expect(throws: GoProError.truncated(reason: "empty message, need an id", offset: 0)) { try decode("", .commandResponse) }
        #expect(throws: GoProError.truncated(reason: "need a status or action byte after id 0x01", offset: 1)) {
            try decode("01", .commandResponse)
        }
        #expect(throws: GoProError.unknownCharacteristic("GP-0072")) { try decode("0100", .command) }
    }

    @Test func invalidProtobufIsATypedError() throws {
        #expect(throws: GoProError.self) { try decode("f1e90aff", .commandResponse) }
        do {
            _ = try decode("f1e9ff", .commandResponse)
            Issue.record("accepted a broken varint")
        } catch {
            guard case let .invalidProtobuf(message, _)? = error as? GoProError else { Issue.record("wrong error \(error)"); return }
            #expect(message == "ResponseGeneric")
        }
    }

    @Test func unsupportedProtobufMatchesThePendingRequestByFeature() throws {
        let r = try decode("f502", .queryResponse)
        #expect(r.identifier == .protobufError(feature: 0xF5))
        let request = try GoProRequest(json: ["query": "get_last_captured_media"])
        #expect(request.expectedResponse.isAnswered(by: r.identifier))
        #expect(!GoProResponseID.protobuf(feature: 0xF1, action: 0xE9).isAnswered(by: r.identifier))
        #expect(GoProResponseID.command(1).isAnswered(by: try decode("0100", .commandResponse).identifier))
    }

    @Test func commandPayloads() throws {
        let dt = try decode("0e000707e7011f030405", .commandResponse).json
        #expect(dt["date_time"] == "2023-01-31T03:04:05")
        let local = try decode("10000a07e7011f030405ff8801", .commandResponse).json
        #expect(local["date_time"] == "2023-01-31T03:04:05")
        #expect(local["utc_offset_minutes"] == -120)
        #expect(local["dst"] == true)
        let keepAlive = try decode("5b00", .settingsResponse).json
        #expect(keepAlive["name"] == "keep_alive")
        #expect(keepAlive["status"] == 0)
    }

    @Test func characteristicNames() throws {
        #expect(try GoProCharacteristic(identifier: "GP-0077") == .queryResponse)
        #expect(try GoProCharacteristic(identifier: "gp-0092") == .networkManagementResponse)
        #expect(try GoProCharacteristic(identifier: "b5f90073-aa8d-11e3-9046-0002a5d5c51b") == .commandResponse)
        #expect(GoProCharacteristic.command.uuid == "b5f90072-aa8d-11e3-9046-0002a5d5c51b")
        #expect(throws: GoProError.unknownCharacteristic("GP-0099")) { try GoProCharacteristic(identifier: "GP-0099") }
        // The spelled-out UUIDs are the short names' (§1), and each names its characteristic in
        // either case.
        for c in GoProCharacteristic.allCases {
            #expect(c.uuid == "b5f9\(c.shortName.dropFirst(3).lowercased())-aa8d-11e3-9046-0002a5d5c51b")
            #expect(try GoProCharacteristic(identifier: c.uuid) == c)
            #expect(try GoProCharacteristic(identifier: c.uuid.uppercased()) == c)
        }
    }
}

@Suite struct RequestJSONTests {
    func request(_ json: String) throws -> GoProRequest { try GoProRequest(json: JSONValue(parsing: json)) }

    /// A boolean value names the setting's own "On"/"Off" option, never 1/0: LED On is option 2,
    /// HindSight Off is 4, GPS On is 1; a setting without the option refuses the boolean.
    @Test func booleanSettingValuesMapThroughOptionNames() throws {
        #expect(try request(#"{"setting":"led","value":true}"#).message == [0x5B, 0x01, 0x02])
        #expect(try request(#"{"setting":"led","value":false}"#).message == [0x5B, 0x01, 0x00])
        #expect(try request(#"{"setting":"led","value":"On"}"#).message == [0x5B, 0x01, 0x02])
        #expect(try request(#"{"setting":"hindsight","value":false}"#).message == [0xA7, 0x01, 0x04])
        #expect(try request(#"{"setting":"gps","value":true}"#).message == [0x53, 0x01, 0x01])
        #expect(throws: GoProError.self) { try request(#"{"setting":"hindsight","value":true}"#) }
        #expect(throws: GoProError.self) { try request(#"{"setting":"video_resolution","value":true}"#) }
    }

    @Test func vocabularyExamplesFromTheIssue() throws {
        #expect(try request(#"{"command":"set_local_date_time","date_time":"2023-01-31T03:04:05","utc_offset_minutes":-120,"dst":true}"#).message
            == [0x0F, 0x0A, 0x07, 0xE7, 0x01, 0x1F, 0x03, 0x04, 0x05, 0xFF, 0x88, 0x01])
        #expect(try request(#"{"setting":2,"value":"4K"}"#).message == [0x02, 0x01, 0x01])
        #expect(try request(#"{"setting":"video_resolution","value":1}"#).message == [0x02, 0x01, 0x01])
        #expect(try request(#"{"query":"get_status_values","ids":[70,"encoding"]}"#).message == [0x13, 0x46, 0x0A])
        #expect(try request(#"{"query":"get_setting_values","ids":["video_resolution",3]}"#).message == [0x12, 0x02, 0x03])
        #expect(try request(#"{"query":"unregister_setting_capability_updates"}"#).message == [0x82])
        #expect(try request(#"{"command":"load_preset_group","group":"video"}"#).message == [0x3E, 0x02, 0x03, 0xE8])
        #expect(try request(#"{"command":"load_preset_group","group":1002}"#).message == [0x3E, 0x02, 0x03, 0xEA])
        #expect(try request(#"{"command":"set_camera_control","status":"idle"}"#).message == [0xF1, 0x69, 0x08, 0x00])
        #expect(try request(#"{"command":"set_turbo_active","active":true}"#).message == [0xF1, 0x6B, 0x08, 0x01])
        #expect(try request(#"{"command":"set_camera_name","name":"Cam"}"#).message == [0xF1, 0x62, 0x0A, 0x03, 0x43, 0x61, 0x6D])
        #expect(try request(#"{"command":"scan_wifi_networks"}"#).message == [0x02, 0x02])
        #expect(try request(#"{"command":"set_ap_control","value":"bounce"}"#).message == [0x17, 0x01, 0x02])
        let ka = try request(#"{"command":"keep_alive"}"#)
        #expect(ka.characteristic == .settings && ka.message == [0x5B, 0x01, 0x42] && ka.expectedResponse == .setting(0x5B))
        for name in ["sleep", "reboot", "hilight_moment", "get_hardware_info", "get_open_gopro_version", "set_analytics",
                     "get_date_time", "get_local_date_time"] {
            let r = try request(#"{"command":"\#(name)"}"#)
            #expect(r.message.count == 1 && r.characteristic == .command, "\(name)")
            #expect(GoProCommandID(rawValue: r.message[0])?.name == name)
        }
        // Grey-zone wide settings (§8): above 255 as u32 BE.
        #expect(try request(#"{"setting":"nightlapse_rate","value":"Auto"}"#).message == [0x20, 0x04, 0x00, 0x00, 0x0E, 0x11])
    }

    @Test func badInputNamesTheField() throws {
        let cases: [(String, GoProError)] = [
            (#"{"command":"fly"}"#, .unknownOperation(field: "command", value: "fly")),
            (#"{"query":"nope"}"#, .unknownOperation(field: "query", value: "nope")),
            (#"{"setting":"nope","value":1}"#, .unknownOperation(field: "setting", value: "nope")),
            (#"{"command":"set_shutter"}"#, .invalidField(field: "value", reason: "missing")),
            (#"{"command":"set_shutter","value":2}"#, .invalidField(field: "value", reason: "expected true or false, got 2")),
            (#"{"command":"load_preset","preset":-1}"#, .invalidField(field: "preset", reason: "expected an integer 0–4294967295, got -1")),
            (#"{"command":"set_date_time","date_time":"2023-13-01T00:00:00"}"#,
             .invalidField(field: "date_time", reason: "date or time out of range in \"2023-13-01T00:00:00\"")),
            (#"{"command":"set_date_time","date_time":"yesterday"}"#,
             .invalidField(field: "date_time", reason: "expected YYYY-MM-DDTHH:MM:SS, got \"yesterday\"")),
            (#"{"setting":2,"value":"9K"}"#, .invalidField(field: "value", reason: "\"9K\" is not an option of setting video_resolution")),
            (#"{"setting":2,"value":300}"#, .invalidField(field: "value", reason: "300 does not fit the 1-byte value of setting video_resolution")),
            (#"{"query":"get_status_values","ids":["nope"]}"#, .invalidField(field: "ids[0]", reason: "unknown status \"nope\"")),
            (#"{"query":"get_status_values","ids":[256]}"#, .invalidField(field: "ids[0]", reason: "expected a name or an id 0–255, got 256")),
            (#"{"command":"set_camera_name","name":""}"#, .invalidField(field: "name", reason: "must not be empty")),
            (#"[1]"#, .invalidField(field: "request", reason: "expected a JSON object, got array")),
            (#"{}"#, .invalidField(field: "request", reason: "needs one of \"command\", \"setting\" or \"query\"")),
        ]
        for (json, error) in cases {
            #expect(throws: error, "\(json)") { try request(json) }
        }
        #expect(throws: GoProError.self) { try request(#"{"command":"set_camera_control","status":"boss"}"#) }
        #expect(throws: GoProError.self) { try request(#"{"query":"status_value_push"}"#) }
    }
}

@Suite struct OutcomeTests {
    func outcome(_ hex: String, _ c: GoProCharacteristic) throws -> GoProOutcome? {
        try GoProResponse(decoding: Hex.decode(hex), on: c).outcome
    }

    @Test func statusBytesAndResultsMapToStableCodes() throws {
        #expect(try outcome("0100", .commandResponse) == .success)
        #expect(try outcome("0101", .commandResponse) == .failure(code: "error"))
        #expect(try outcome("0202", .settingsResponse) == .failure(code: "invalid_parameter"))
        #expect(try outcome("0207", .settingsResponse) == .failure(code: "reserved_status_7"))
        #expect(try outcome("13000a0101", .queryResponse) == .success)
        #expect(try outcome("93000a0101", .queryResponse) == nil)
        #expect(try outcome("f1e90801", .commandResponse) == .success)
        #expect(try outcome("f1eb0803", .commandResponse) == .failure(code: "not_supported"))
        #expect(try outcome("f1e90802", .commandResponse) == .failure(code: "ill_formed"))
        #expect(try outcome("f502", .queryResponse) == .failure(code: "unsupported_protobuf"))
        #expect(try outcome("f5f20a00", .queryResponse) == .success)
        #expect(try outcome("f5f30a00", .queryResponse) == nil)
    }
}

@Suite struct NamedEntriesTests {
    @Test func repeatedIdsKeepTheLastValueOrCollectCapabilities() throws {
        guard case let .query(q) = try GoProResponse(decoding: Hex.decode("1200020101020104fa0100"), on: .queryResponse) else {
            Issue.record("not a query"); return
        }
        let named = q.namedEntries
        #expect(named.map(\.name) == ["video_resolution", "setting_250"])
        #expect(named[0].value == "2.7K")
        #expect(named[1].value == "00")
        guard case let .query(c) = try GoProResponse(decoding: Hex.decode("a20002010102010403010a"), on: .queryResponse) else {
            Issue.record("not a query"); return
        }
        #expect(c.namedEntries.map(\.name) == ["video_resolution", "frames_per_second"])
        #expect(c.namedEntries[0].value == ["4K", "2.7K"])
        #expect(c.namedEntries[1].value == ["24.0"])
        #expect(c.namedValues["frames_per_second"] == ["24.0"])
    }
}
