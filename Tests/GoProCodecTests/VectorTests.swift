import BinaryCoding
import GoProCodec
import Testing

/// Every public vector of ../shared/vectors/gopro (copied into Vectors/).
@Suite struct FragmentationVectorTests {
    @Test func everyCaseReassemblesInAllForms() throws {
        let cases = try #require(try Fixtures.vector("fragmentation.json")["cases"]?.arrayValue)
        #expect(cases.count >= 6)
        for c in cases {
            let payload = try Fixtures.hex(c["payload"])
            #expect(payload.count == c["payload_length"]?.intValue)
            for key in ["packets", "packets_with_camera_counters", "packets_general_header"] {
                guard c[key] != nil else { continue }
                let packets = try Fixtures.hexList(c[key])
                #expect(try Fixtures.reassemble(packets) == [payload], "\(key) of \(payload.count) bytes")
            }
        }
    }

    @Test func packetizerMatchesTheSDKBelow8191() throws {
        let cases = try #require(try Fixtures.vector("fragmentation.json")["cases"]?.arrayValue)
        for c in cases {
            let payload = try Fixtures.hex(c["payload"])
            if payload.count < GoProPacketizer.maximumMessageLength {
                #expect(try GoProPacketizer.packetize(payload).arrays == Fixtures.hexList(c["packets"]))
                #expect(try GoProPacketizer.packetize(payload, continuation: .counting).arrays
                    == Fixtures.hexList(c["packets_with_camera_counters"]))
                if c["packets_general_header"] != nil {
                    #expect(try GoProPacketizer.packetize(payload, startHeader: .general).arrays
                        == Fixtures.hexList(c["packets_general_header"]))
                }
            } else if payload.count == GoProPacketizer.maximumMessageLength {
                // open-gopro uses extended-16 here; the spec forbids it towards the camera and
                // 13 bits hold 8191 (§3), so the packetizer writes 3F FF.
                let packets = try GoProPacketizer.packetize(payload)
                #expect(Array(packets[0].prefix(2)) == [0x3F, 0xFF])
                #expect(packets.allSatisfy { $0.count <= 20 })
                #expect(try Fixtures.reassemble(packets.arrays) == [payload])
            } else {
                #expect(throws: GoProError.messageTooLong(length: payload.count, maximum: 8191)) {
                    try GoProPacketizer.packetize(payload)
                }
            }
        }
    }
}

@Suite struct RequestVectorTests {
    /// The JSON vocabulary equivalent of each vector's SDK call.
    static let requests: [String: String] = [
        "set_shutter_on": #"{"command":"set_shutter","value":true}"#,
        "sleep": #"{"command":"sleep"}"#,
        "tag_hilight": #"{"command":"hilight_moment"}"#,
        "ap_control_off": #"{"command":"set_ap_control","value":false}"#,
        "load_preset_group_photo": #"{"command":"load_preset_group","group":"photo"}"#,
        "load_preset_2": #"{"command":"load_preset","preset":2}"#,
        "get_open_gopro_version": #"{"command":"get_open_gopro_version"}"#,
        "set_date_time": #"{"command":"set_date_time","date_time":"2023-01-31T03:04:05"}"#,
        "get_date_time": #"{"command":"get_date_time"}"#,
        "reboot": #"{"command":"reboot"}"#,
        "set_resolution_4k": #"{"setting":"video_resolution","value":"4K"}"#,
        "set_fps_30": #"{"setting":3,"value":8}"#,
        "get_setting_value_resolution": #"{"query":"get_setting_values","ids":["video_resolution"]}"#,
        "get_status_battery_percent": #"{"query":"get_status_values","ids":["internal_battery_percentage"]}"#,
        "get_all_statuses": #"{"query":"get_status_values"}"#,
        "get_all_setting_capabilities": #"{"query":"get_setting_capabilities"}"#,
        "unregister_status_encoding": #"{"query":"unregister_status_value_updates","ids":["encoding"]}"#,
        "unregister_status_busy": #"{"query":"unregister_status_value_updates","ids":[8]}"#,
        "unregister_status_internal_battery_percentage": #"{"query":"unregister_status_value_updates","ids":[70]}"#,
        "register_all_statuses": #"{"query":"register_status_value_updates"}"#,
        "register_all_settings": #"{"query":"register_setting_value_updates"}"#,
        "get_status_values_multi": #"{"query":"get_status_values","ids":[1,2,8,10,13,33,35,68,70]}"#,
        "set_camera_control_external": #"{"command":"set_camera_control","status":"external"}"#,
        "set_turbo_active_off": #"{"command":"set_turbo_active","active":false}"#,
        "get_preset_status_default": #"{"query":"get_preset_status"}"#,
        "set_pairing_complete": #"{"command":"set_pairing_complete","phone_name":"phoneName"}"#,
        "get_last_captured_media": #"{"query":"get_last_captured_media"}"#,
        "request_wifi_connect_new": #"{"command":"request_wifi_connect_new","ssid":"HomeNet","password":"secret123"}"#,
    ]

    @Test func everyRequestVectorEncodes() throws {
        let list = try #require(try Fixtures.vector("requests.json")["requests"]?.arrayValue)
        #expect(list.count == Self.requests.count)
        for v in list {
            let name = try #require(v["name"]?.stringValue)
            let json = try #require(Self.requests[name], "no JSON for vector \(name)")
            let request = try GoProRequest(json: JSONValue(parsing: json))
            #expect(request.characteristic.shortName == v["write_characteristic"]?["short"]?.stringValue, "\(name)")
            #expect(request.characteristic.uuid == v["write_characteristic"]?["full"]?.stringValue, "\(name)")
            #expect(request.message == (try Fixtures.hex(v["message"])), "\(name)")
            #expect(try request.packets().arrays == Fixtures.hexList(v["packets"]), "\(name)")
            let expected = try #require(v["expected_response_id"])
            switch expected["kind"]?.stringValue {
            case "ProtobufId":
                let f = try #require(expected["feature_id"]?.intValue), a = try #require(expected["action_id"]?.intValue)
                #expect(request.expectedResponse == .protobuf(feature: UInt8(f), action: UInt8(a)), "\(name)")
            case "SettingId":
                #expect(request.expectedResponse == .setting(UInt8(try #require(expected["value"]?.intValue))), "\(name)")
            default:
                let id = UInt8(try #require(expected["value"]?.intValue))
                #expect(request.expectedResponse == (request.characteristic == .query ? .query(id) : .command(id)), "\(name)")
            }
        }
    }
}

@Suite struct ResponseVectorTests {
    @Test func everyResponseVectorDecodes() throws {
        let list = try #require(try Fixtures.vector("responses.json")["responses"]?.arrayValue)
        #expect(list.count >= 13)
        for v in list {
            let name = try #require(v["name"]?.stringValue)
            let characteristic = try GoProCharacteristic(identifier: try #require(v["notify_characteristic"]?["short"]?.stringValue))
            let messages = try Fixtures.reassemble(try Fixtures.hexList(v["packets"]))
            let payload = try Fixtures.hex(v["payload"])
            #expect(messages == [payload], "\(name)")
            let response = try GoProResponse(decoding: payload, on: characteristic)
            // Where the SDK is wrong the vector says what the spec expects.
            let expected = try #require(v["expected_per_spec"] ?? v["open_gopro_result"])
            try check(response, against: expected, raw: v["raw_entries"], name: name)
        }
    }

    func check(_ response: GoProResponse, against expected: JSONValue, raw: JSONValue?, name: String) throws {
        let json = response.json
        if let identifier = expected["identifier"] {
            if identifier["kind"]?.stringValue == "ProtobufId" {
                let feature = try #require(identifier["feature_id"]?.intValue)
                #expect(json["feature_id"]?.intValue == feature, "\(name)")
                if let action = identifier["action_id"]?.intValue {
                    #expect(json["action_id"]?.intValue == action, "\(name)")
                    #expect(response.identifier == .protobuf(feature: UInt8(feature), action: UInt8(action)), "\(name)")
                } else {
                    #expect(response.identifier == .protobufError(feature: UInt8(feature)), "\(name)")
                    #expect(json["status"]?.intValue == expected["status"]?["value"]?.intValue, "\(name)")
                }
            } else {
                #expect(json["id"]?.intValue == identifier["value"]?.intValue, "\(name)")
                #expect(json["status"]?.intValue == expected["status"]?["value"]?.intValue, "\(name)")
            }
        }
        if let raw = raw?.arrayValue {
            let entries = try #require(json["entries"]?.arrayValue, "\(name)")
            #expect(entries.count == raw.count, "\(name)")
            for (e, r) in zip(entries, raw) {
                #expect(e["id"]?.intValue == r["id"]?.intValue, "\(name)")
                #expect(e["value"]?.stringValue == r["value"]?.stringValue, "\(name)")
                #expect((e["value"]?.stringValue?.count ?? -1) / 2 == r["len"]?.intValue, "\(name)")
            }
        }
        guard let data = expected["data"]?.objectValue else {
            if let s = expected["data"]?.stringValue { #expect(json["version"]?.stringValue == s, "\(name)") }
            return
        }
        if case let .query(q) = response {
            for (key, value) in data {
                let id = UInt8(try #require(Int(key.split(separator: ":")[0])))
                let ours = q.entries.filter { $0.id == id }.compactMap { q.decodedValue(of: $0) }
                let theirs = value.arrayValue ?? [value]
                #expect(ours.count == theirs.count, "\(name) \(key)")
                for (o, t) in zip(ours, theirs) { #expect(Self.same(o, t), "\(name) \(key): \(o) vs \(t.jsonText)") }
            }
        } else if case .protobuf = response {
            let fields = try #require(json["fields"]?.objectValue, "\(name)")
            for (key, value) in data {
                let enumName = value["enum"]?.stringValue
                #expect(fields[key]?.stringValue == enumName || fields[key] == value, "\(name) \(key)")
            }
        } else {
            for (key, value) in data {
                #expect(json[key] == value || json[key]?.stringValue == value.stringValue, "\(name) \(key)")
            }
        }
    }

    static func same(_ ours: GoProValue, _ theirs: JSONValue) -> Bool {
        switch ours {
        case let .bool(b): return theirs.boolValue == b
        case let .integer(n): return theirs.uint64Value == n
        case let .option(n, _): return theirs["value"]?.int64Value == n || theirs.int64Value == n
        case let .string(s): return theirs.stringValue == s
        case .bytes: return false
        }
    }
}
