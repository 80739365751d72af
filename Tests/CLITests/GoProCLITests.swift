import Foundation
import Testing

/// The `gatt2mqtt gopro` contract (docs/gopro.md), checked on the built executable.
@Suite struct GoProCLITests {
    func json(_ text: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test func encodeShutter() async throws {
        let r = try await CLI.run(["gopro", "encode", #"{"command":"set_shutter","value":true}"#])
        #expect(r.status == 0)
        #expect(r.stdout == #"{"characteristic":"GP-0072","message":"010101","packets":["2003010101"]}"# + "\n")
    }

    @Test func encodeFromStdinAndMultiPacket() async throws {
        let r = try await CLI.run(["gopro", "encode"], stdin: #"{"command":"request_wifi_connect_new","ssid":"HomeNet","password":"secret123"}"#)
        #expect(r.status == 0)
        let o = try json(r.stdout)
        #expect(o["characteristic"] as? String == "GP-0091")
        #expect(o["message"] as? String == "02050a07486f6d654e657412097365637265743132335001")
        #expect(o["packets"] as? [String] == ["201802050a07486f6d654e657412097365637265", "80743132335001"])
    }

    @Test func encodeSettingAndQuery() async throws {
        let s = try await json(CLI.run(["gopro", "encode", #"{"setting":2,"value":"4K"}"#]).stdout)
        #expect(s["characteristic"] as? String == "GP-0074")
        #expect(s["message"] as? String == "020101")
        let q = try await json(CLI.run(["gopro", "encode", #"{"query":"get_status_values","ids":[70,"encoding"]}"#]).stdout)
        #expect(q["characteristic"] as? String == "GP-0076")
        #expect(q["message"] as? String == "13460a")
    }

    @Test func decodeQueryResponseAcrossPackets() async throws {
        let r = try await CLI.run(["gopro", "decode", "--characteristic", "GP-0077",
                             "203953000101010201030801000a01010d040000", "8002f221010023040000151844010046014d1e0a",
                             "8047503234353030343536360800000000019582", "8060"])
        #expect(r.status == 0, "\(r.stderr)")
        let o = try json(r.stdout)
        #expect(o["id"] as? Int == 0x53)
        #expect(o["status"] as? Int == 0)
        let entries = try #require(o["entries"] as? [[String: Any]])
        #expect(entries.count == 11)
        #expect(entries.first?["id"] as? Int == 1)
        #expect(entries.first?["value"] as? String == "01")
        #expect(entries.last?["value"] as? String == "0000000001958260")
        #expect(o["internal_battery_percentage"] as? Int == 77)
        #expect(o["encoding"] as? Bool == true)
        #expect(o["access_point_ssid"] as? String == "GP24500456")
    }

    @Test func decodeCommandSettingAndProtobuf() async throws {
        let c = try await json(CLI.run(["gopro", "decode", "--characteristic", "GP-0073", "020100"]).stdout)
        #expect(c["id"] as? Int == 1 && c["status"] as? Int == 0)
        let s = try await json(CLI.run(["gopro", "decode", "--characteristic", "GP-0075", "020202"]).stdout)
        #expect(s["id"] as? Int == 2 && s["status"] as? Int == 2)
        let q = try await json(CLI.run(["gopro", "decode", "--characteristic", "GP-0077", "0b1200020109030100790100"]).stdout)
        #expect(q["video_resolution"] as? String == "1080")
        let p = try await json(CLI.run(["gopro", "decode", "--characteristic", "GP-0073", "2004f1e90801"]).stdout)
        #expect(p["feature_id"] as? Int == 0xF1)
        #expect(p["action_id"] as? Int == 0xE9)
        #expect(p["message"] as? String == "ResponseGeneric")
        #expect((p["fields"] as? [String: Any])?["result"] as? String == "RESULT_SUCCESS")
    }

    @Test func packetizeAndReassemble() async throws {
        let payload = (0..<31).map { String(format: "%02x", $0) }.joined()
        let p = try await CLI.run(["gopro", "packetize", payload])
        #expect(p.status == 0)
        #expect(p.stdout == "201f000102030405060708090a0b0c0d0e0f1011\n8012131415161718191a1b1c1d1e\n")
        let r = try await CLI.run(["gopro", "reassemble"] + p.stdout.split(separator: "\n").map(String.init))
        #expect(r.status == 0)
        #expect(r.stdout == payload + "\n")
    }

    @Test func invalidInputIsOneLineExitOne() async throws {
        try await CLI.expectOneLineFailure(["gopro", "encode", #"{"command":"fly"}"#], mentioning: "fly")
        try await CLI.expectOneLineFailure(["gopro", "encode", #"{"command":"set_shutter","value":"yes"}"#], mentioning: "value")
        try await CLI.expectOneLineFailure(["gopro", "encode", "{not json"], mentioning: "JSON")
        try await CLI.expectOneLineFailure(["gopro", "decode", "--characteristic", "GP-0077", "80aa"], mentioning: "continuation")
        try await CLI.expectOneLineFailure(["gopro", "decode", "--characteristic", "GP-0077", "2010aa"], mentioning: "incomplete")
        try await CLI.expectOneLineFailure(["gopro", "decode", "--characteristic", "GP-0099", "020100"], mentioning: "GP-0099")
        try await CLI.expectOneLineFailure(["gopro", "decode", "--characteristic", "GP-0077", "041300460a"], mentioning: "offset")
        try await CLI.expectOneLineFailure(["gopro", "decode", "--characteristic", "GP-0073", "zz"], mentioning: "hex")
        try await CLI.expectOneLineFailure(["gopro", "reassemble", "60"], mentioning: "reserved")
        try await CLI.expectOneLineFailure(["gopro", "reassemble", "2014aa", "80bb", "82cc"], mentioning: "gap")
        try await CLI.expectOneLineFailure(["gopro", "packetize", String(repeating: "00", count: 8192)], mentioning: "8191")
        try await CLI.expectOneLineFailure(["gopro", "packetize", "--general", String(repeating: "00", count: 32)], mentioning: "31")
    }
}
