import BinaryCoding
import Testing

@testable import CapsCodec

@Suite struct CXRTests {
    func vector(_ id: String) throws -> [UInt8] {
        let v = try #require(try Vectors.vectors("cxr_packets.json").first { $0["id"]?.stringValue == id })
        return try Vectors.bytes(v["hex"])
    }

    @Test func brightnessCommandIsTheWorkedExample() throws {
        // Spec §3.6, vector cxr_request_brightness.
        let command = try CXRCommand(jsonText: #"{"command":"set_brightness","value":8}"#)
        #expect(command == .setBrightness(8))
        #expect(try command.encoded(requestID: 1) == vector("cxr_request_brightness"))
    }

    @Test func commandsMatchTheirVectors() throws {
        #expect(try CXRCommand(jsonText: #"{"command":"get_glass_info"}"#).encoded(requestID: 3) == vector("cxr_request_glass_info"))
        let update = #"{"command":"update_custom_view","update":[{"id":"tv_title","props":{"text":"Updated"}}]}"#
        #expect(try CXRCommand(jsonText: update).encoded(requestID: 5) == vector("cxr_request_update_custom_view"))
        #expect(try CXRCommand(jsonText: #"{"command":"tts_result","text":"It is 21 degrees."}"#).encoded(requestID: 9)
                == vector("cxr_request_tts"))
    }

    @Test func teleprompterConfigKeepsNumberForms() throws {
        // Vector cxr_request_wordtips_config: "textSize":16.0 must stay 16.0 in the JSON text.
        let json = #"{"command":"set_teleprompter_config","config":{"textSize":16.0,"lineSpacing":1.2,"mode":"normal","contentSite":{"startPointX":0,"startPointY":0,"width":480,"height":320}}}"#
        #expect(try CXRCommand(jsonText: json).encoded(requestID: 7) == vector("cxr_request_wordtips_config"))
        let payload: JSONValue = ["a": 1, "b": 2.5, "c": .double(3), "d": [true, .null, "x\"y"], "e": .double(1e20)]
        #expect(payload.payloadText == #"{"a":1,"b":2.5,"c":3.0,"d":[true,null,"x\"y"],"e":1e+20}"#)
    }

    @Test func sceneControlMatchesTheCapture() throws {
        // Spec §5.3: the S8 btsnoop capture, byte for byte.
        let json = #"{"name":"mix_record","open":true}"#
        let expected = try Hex.decode("0000004905047575534f" + "8120" + "41" + "03" + Hex.encode(Array("Sys".utf8))
            + "00000038050253530d" + Hex.encode(Array("Scene_Control".utf8)) + "21" + Hex.encode(Array(json.utf8)))
        let command = try CXRCommand(jsonText: #"{"command":"scene_control","name":"mix_record","open":true}"#)
        #expect(try command.encoded(requestID: 65) == expected)
        let packet = try CXRPacket(decoding: expected)
        #expect(packet.channel == "Sys" && packet.subCommand == "Scene_Control" && packet.requestID == 65)
        #expect(packet.payload == ["name": "mix_record", "open": true])
    }

    @Test func everyNamedCommandBuildsItsRequest() throws {
        let cases: [(String, String, String, [CapsValue])] = [
            (#"{"command":"set_volume","value":15}"#, "Dev", "Dev_GlassSound", [.uint32(15)]),
            (#"{"command":"set_brightness","value":0}"#, "Dev", "Dev_GlassBrightness", [.uint32(0)]),
            (#"{"command":"open_custom_view","layout":{"type":"LinearLayout","props":{},"children":[]}}"#, "Custom_View",
             "Open_Custom_View", [.string(#"{"type":"LinearLayout","props":{},"children":[]}"#)]),
            (#"{"command":"open_custom_view","layout":"{\"type\":\"TextView\"}"}"#, "Custom_View", "Open_Custom_View",
             [.string(#"{"type":"TextView"}"#)]),
            (#"{"command":"close_custom_view"}"#, "Custom_View", "Close_Custom_View", []),
            (#"{"command":"send_custom_view_icons","icons":[]}"#, "Custom_View", "Send_Custom_View_Icons", [.string("[]")]),
            (#"{"command":"scene_control","name":"word_tips","open":false}"#, "Sys", "Scene_Control",
             [.string(#"{"name":"word_tips","open":false}"#)]),
            (#"{"command":"get_scene_status"}"#, "Sys", "Scene_GetSceneStatusInfo", []),
            (#"{"command":"set_teleprompter_config","config":{"textSize":16,"mode":"normal","contentSite":{"width":480}}}"#,
             "Sys", "WordTips_SetTvConfig", [.string(#"{"textSize":16,"mode":"normal","contentSite":{"width":480}}"#)]),
            (#"{"command":"request","channel":"Med","sub_command":"Sync_Start","data":[{"type":"Android"}]}"#, "Med",
             "Sync_Start", [.string(#"{"type":"Android"}"#)]),
            (#"{"command":"request","channel":"CXRControl","sub_command":"cancelAudioPlay","data":[{"type":"u","value":3}]}"#,
             "CXRControl", "cancelAudioPlay", [.uint32(3)]),
        ]
        for (json, channel, sub, data) in cases {
            let command = try CXRCommand(jsonText: json)
            let bytes = try command.encoded(requestID: 42)
            let packet = try CXRPacket(decoding: bytes)
            #expect(packet == .request(requestID: 42, channel: channel, args: Caps([.string(sub)] + data)), "\(json)")
            // The JSON form reads back to the same command.
            #expect(try CXRCommand(json: command.json) == command, "\(json)")
        }
    }

    @Test func badCommandsNameTheField() throws {
        let cases: [(String, String)] = [
            (#"{"command":"set_brightness","value":16}"#, "value"),
            (#"{"command":"set_brightness","value":-1}"#, "value"),
            (#"{"command":"set_brightness","value":"8"}"#, "value"),
            (#"{"command":"set_brightness","value":8.5}"#, "value"),
            (#"{"command":"set_brightness","value":true}"#, "value"),
            (#"{"command":"set_brightness"}"#, "value"),
            (#"{"command":"set_volume","value":99}"#, "value"),
            (#"{"command":"set_volume","value":5,"extra":1}"#, "extra"),
            (#"{"command":"launch_rocket"}"#, "command"),
            (#"{"value":8}"#, "command"),
            (#"{"command":8}"#, "command"),
            (#"[1]"#, "$"),
            (#"{"command":"open_custom_view","layout":[1]}"#, "layout"),
            (#"{"command":"open_custom_view","layout":"not json"}"#, "layout"),
            (#"{"command":"open_custom_view"}"#, "layout"),
            (#"{"command":"update_custom_view","update":3}"#, "update"),
            (#"{"command":"scene_control","name":"word_tips","open":"yes"}"#, "open"),
            (#"{"command":"scene_control","name":"","open":true}"#, "name"),
            (#"{"command":"scene_control","name":5,"open":true}"#, "name"),
            (#"{"command":"set_teleprompter_config","config":{"textSize":"big"}}"#, "config.textSize"),
            (#"{"command":"set_teleprompter_config","config":{"contentSite":{"width":"x"}}}"#, "config.contentSite.width"),
            (#"{"command":"set_teleprompter_config","config":{"mode":1}}"#, "config.mode"),
            (#"{"command":"set_teleprompter_config","config":[]}"#, "config"),
            (#"{"command":"request","channel":"Sys"}"#, "sub_command"),
            (#"{"command":"request","channel":"Sys","sub_command":"X","data":[{"type":"u","value":-3}]}"#, "data[0].value"),
        ]
        for (json, field) in cases {
            do {
                _ = try CXRCommand(jsonText: json)
                Issue.record("\(json) accepted")
            } catch {
                guard case let .invalidCommand(f, _) = error else { Issue.record("\(json): \(error)"); continue }
                #expect(f == field, "\(json)")
            }
        }
    }

    @Test func packetVectorsDecodeToTypedPackets() throws {
        #expect(try CXRPacket(decoding: vector("cxr_auth_request")) == .authRequest(CXRAuthRequest(
            major: 1, minor: 12, serviceRecord: "12345678-1234-5678-9abc-def012345678", clientTime: 1_765_983_621_057_000_000)))
        let notify = try CXRPacket(decoding: vector("cxr_notify_battery"))
        #expect(notify.type == .notify && notify.channel == "Dev" && notify.subCommand == "Dev_BatteryChanged")
        #expect(notify.payload == ["level": 87])
        #expect(notify.requestID == nil)
        let start = try CXRPacket(decoding: vector("cxr_transfer_start"))
        #expect(start == .transferStart(totalSize: 44, channel: "Sys",
                                        args: CXRPacket.args("WordTips_SendData", .string(#"{"fileName":"speech.txt"}"#))))
        let account = try CXRPacket(decoding: vector("cxr_change_account"))
        #expect(account == .other(type: .changeRokidAccount, members: [.string("demo-account")]))
        #expect(account.json["type"] == "CHANGE_ROKID_ACCOUNT")
        for id in ["cxr_auth_request", "cxr_request_brightness", "cxr_notify_battery", "cxr_transfer_start", "cxr_change_account",
                   "cxr_request_wordtips_config", "cxr_request_update_custom_view"] {
            let bytes = try vector(id)
            #expect(try CXRPacket(decoding: bytes).encoded() == bytes, "\(id) rebuilds byte for byte")
        }
    }

    @Test func authResponseAndTransfersRoundTrip() throws {
        let packets: [CXRPacket] = [
            .authResponse(CXRAuthResponse(major: 1, minor: 4, retCode: -6, clientMac: "AA:BB:CC:DD:EE:FF")),
            .response(requestID: 9, args: CXRPacket.args("Dev_GetGlassInfo", .string(#"{"battery":80}"#))),
            .transfer(chunk: [1, 2, 3], last: false),
            .transfer(chunk: [], last: true),
        ] + (try CXRPacket.transferPackets(channel: "Sys", subCommand: "WordTips_SendData", json: ["fileName": "a.txt"],
                                           data: Array(repeating: 0x41, count: 1000)))
        for p in packets {
            #expect(try CXRPacket(decoding: p.encoded()) == p)
        }
        let chunks = try CXRPacket.transferPackets(channel: "Sys", subCommand: "X", json: [:], data: Array(repeating: 1, count: 961))
        #expect(chunks.map(\.type) == [.transferStart, .transfer, .transfer, .transferLast])
        let sizes = chunks.compactMap { p -> Int? in if case let .transfer(c, _) = p { return c.count }; return nil }
        #expect(sizes == [480, 480, 1])
    }

    @Test func responseJSONHasTheBridgeFields() throws {
        let p = CXRPacket.response(requestID: 7, args: CXRPacket.args("Dev_GlassBrightness", .uint32(8)))
        let json = p.json
        #expect(json["type"] == "RESPONSE")
        #expect(json["request_id"] == 7)
        #expect(json["channel"] == .null)
        #expect(json["sub_command"] == "Dev_GlassBrightness")
        #expect(json["payload"] == 8)
        #expect(try Caps(json: try #require(json["args"])) == p.args)
        let auth = CXRPacket.authResponse(CXRAuthResponse(major: 1, minor: 4, retCode: 0, clientMac: "m")).json
        #expect(auth["payload"] == ["major": 1, "minor": 4, "ret_code": 0, "client_mac": "m"])
        #expect(auth["request_id"] == .null && auth["sub_command"] == .null)
    }

    @Test func wrongPacketLayoutsNameTheMember() throws {
        let cases: [(Caps, String)] = [
            ([], "member 0 (packet type)"),
            ([.string("x")], "member 0 (packet type)"),
            ([.uint32(0x1001), .int32(1), .string("Dev"), .object([])], "member 1 (request id)"),
            ([.uint32(0x1001), .uint32(1), .string("Dev")], "REQUEST layout"),
            ([.uint32(0x1003), .string("Dev"), .string("x")], "member 2 (args)"),
            ([.uint32(0x1005), .uint32(1), .uint32(4), .uint32(0), .string("m")], "member 3 (ret code)"),
            ([.uint32(0x2002), .string("x")], "member 1 (chunk)"),
        ]
        for (caps, field) in cases {
            do {
                _ = try CXRPacket(caps: caps)
                Issue.record("\(caps) accepted")
            } catch {
                guard case let .invalidPacket(f, _) = error else { Issue.record("\(error)"); continue }
                #expect(f == field)
            }
        }
        #expect(try CXRPacket(caps: [.uint32(0x4242), .void]) == .other(type: CXRPacketType(rawValue: 0x4242), members: [.void]))
        #expect(CXRPacketType(rawValue: 0x4242).name == "0x4242")
    }

    /// §4.1: the 0x9301 value (vector `gatt_9301_connection_info_shape`) gives the service
    /// record for AUTH_REQ; a value without a usable member 0 is a typed error naming it.
    @Test func connectionInfoFromThe9301Vector() throws {
        let bytes = try vector("gatt_9301_connection_info_shape")
        let info = try CXRConnectionInfo(decoding: bytes)
        #expect(info == CXRConnectionInfo(serviceRecord: "12345678-1234-5678-9abc-def012345678", mac: "AA:BB:CC:DD:EE:FF",
                                          account: "demo-account", glassesType: 1, extra: 1))
        #expect(try info.encoded() == bytes)
        // Only member 0 is required; a trailing member of another type is left nil.
        #expect(try CXRConnectionInfo(caps: [.string("r"), .uint32(7)]) == CXRConnectionInfo(serviceRecord: "r"))
        #expect(throws: CapsError.invalidPacket(field: "0x9301 member 0 (service record)", reason: "expected S, found u")) {
            try CXRConnectionInfo(caps: [.uint32(1), .string("r")])
        }
        #expect(throws: CapsError.invalidPacket(field: "0x9301 member 0 (service record)", reason: "the string is empty")) {
            try CXRConnectionInfo(caps: [.string("")])
        }
        #expect(throws: CapsError.invalidPacket(field: "0x9301 member 0 (service record)", reason: "the object is empty")) {
            try CXRConnectionInfo(caps: [])
        }
        #expect(throws: CapsError.self) { try CXRConnectionInfo(decoding: Array(bytes.dropLast())) }
    }
}

@Suite struct CXRRequestCounterTests {
    @Test func idsStartAtOneAndSkipZeroOnWrap() throws {
        var c = CXRRequestCounter()
        #expect(c.next() == 1)
        #expect(c.next() == 2)
        var w = CXRRequestCounter(after: .max - 1)
        #expect(w.next() == .max)
        #expect(w.next() == 1)
    }

    @Test func encodingWithACounterReturnsTheIdUsed() throws {
        var c = CXRRequestCounter()
        let (bytes, id) = try CXRCommand.setBrightness(8).encoded(using: &c)
        #expect(id == 1)
        #expect(try CXRPacket(decoding: bytes).requestID == 1)
        #expect(try CXRCommand.getGlassInfo.encoded(using: &c).requestID == 2)
    }
}

