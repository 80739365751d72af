import Foundation
import Testing

/// The `gatt2mqtt caps …` contract, checked from outside the process.
@Suite struct CapsCLITests {
    static let brightness = "0000002e05047575534f812001034465760000001d05025375134465765f476c6173734272696768746e65737308"

    func expectOneLineError(_ r: CLI.Result, contains text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == 1, sourceLocation: sourceLocation)
        #expect(r.stdout.isEmpty, sourceLocation: sourceLocation)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(r.stderr)", sourceLocation: sourceLocation)
        #expect(r.stderr.contains(text), "\(r.stderr)", sourceLocation: sourceLocation)
        #expect(!r.stderr.contains("Fatal error"), sourceLocation: sourceLocation)
    }

    @Test func encodeFromArgumentAndStdin() async throws {
        let typed = #"[{"type":"u","value":4097},{"type":"u","value":1},{"type":"S","value":"Dev"},{"type":"O","value":[{"type":"S","value":"Dev_GlassBrightness"},{"type":"u","value":8}]}]"#
        let a = try await CLI.run(["caps", "encode", typed])
        #expect(a.status == 0)
        #expect(a.stdout == Self.brightness + "\n")
        let b = try await CLI.run(["caps", "encode"], stdin: typed + "\n")
        #expect(b.stdout == Self.brightness + "\n")
        let loose = try await CLI.run(["caps", "encode", #"[4097, 1, "Dev", ["Dev_GlassBrightness", 8]]"#])
        #expect(loose.stdout == Self.brightness + "\n")
    }

    @Test func decodePrintsCanonicalJSON() async throws {
        let r = try await CLI.run(["caps", "decode", Self.brightness])
        #expect(r.status == 0)
        #expect(r.stdout == #"[{"type":"u","value":4097},{"type":"u","value":1},{"type":"S","value":"Dev"},{"type":"O","value":[{"type":"S","value":"Dev_GlassBrightness"},{"type":"u","value":8}]}]"# + "\n")
        let all = try await CLI.run(["caps", "decode", "0000003a050a4f425364666b6c756956000000080501750704deadbeef046361707300000000000004c00000003f80808080802090dd7bac027e"])
        #expect(all.stdout == #"[{"type":"O","value":[{"type":"u","value":7}]},{"type":"B","value":"3q2+7w=="},{"type":"S","value":"caps"},{"type":"d","value":-2.5},{"type":"f","value":0.5},{"type":"k","value":"1099511627776"},{"type":"l","value":"-70000"},{"type":"u","value":300},{"type":"i","value":-2},{"type":"V"}]"# + "\n")
        // decode → encode is the identity on canonical bytes.
        let again = try await CLI.run(["caps", "encode", all.stdout])
        #expect(again.stdout == "0000003a050a4f425364666b6c756956000000080501750704deadbeef046361707300000000000004c00000003f80808080802090dd7bac027e\n")
    }

    @Test func splitReassemblesChunksIntoObjects() async throws {
        let b = Self.brightness
        let chunks = [String(b.prefix(10)), String(b.dropFirst(10).prefix(40)), String(b.dropFirst(50)) + "000000080501", "", "7508"]
        let r = try await CLI.run(["caps", "split"], stdin: chunks.joined(separator: "\n") + "\n")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.first?.hasPrefix(#"[{"type":"u","value":4097}"#) == true)
        #expect(lines.last == #"[{"type":"u","value":8}]"#)
    }

    @Test func splitReportsErrorsWithTheLine() async throws {
        let short = try await CLI.run(["caps", "split"], stdin: "0000000805\n04\n")
        expectOneLineError(short, contains: "6 byte(s) at stream offset 0 never completed")
        let version = try await CLI.run(["caps", "split"], stdin: "00000008\n0401\n")
        expectOneLineError(version, contains: "line 2: malformed Caps at byte 4: unsupported version 4")
        let after = try await CLI.run(["caps", "split"], stdin: "000000080501750700000005\n")
        #expect(after.status == 1)
        #expect(after.stdout == #"[{"type":"u","value":7}]"# + "\n")
        #expect(after.stderr == "error: line 1: malformed Caps at byte 8: total size 5 is too small (at least 6)\n")
        let hex = try await CLI.run(["caps", "split"], stdin: "000000\nzz\n")
        expectOneLineError(hex, contains: "line 2: invalid hex")
        let truncated = try await CLI.run(["caps", "split"], stdin: Self.brightness + "\n00000009\n")
        #expect(truncated.status == 1)
        #expect(truncated.stdout.split(separator: "\n").count == 1, "the complete object is still printed")
        #expect(truncated.stderr.contains("end of input inside an object"))
    }

    @Test func cxrBuildsRequests() async throws {
        let r = try await CLI.run(["caps", "cxr", #"{"command":"set_brightness","value":8}"#])
        #expect(r.status == 0)
        #expect(r.stdout == Self.brightness + "\n")
        let id = try await CLI.run(["caps", "cxr", #"{"command":"get_glass_info"}"#, "--request-id", "3"])
        #expect(id.stdout == "0000002905047575534f8120030344657600000018050153104465765f476574476c617373496e666f\n")
        let stdin = try await CLI.run(["caps", "cxr", "--request-id", "1"], stdin: #"{"command":"set_brightness","value":8}"#)
        #expect(stdin.stdout == Self.brightness + "\n")
    }

    @Test func cxrDecodePrintsThePacket() async throws {
        let r = try await CLI.run(["caps", "cxr-decode", Self.brightness])
        #expect(r.status == 0)
        #expect(r.stdout.hasPrefix(#"{"type":"REQUEST","packet_type":4097,"request_id":1,"channel":"Dev","sub_command":"Dev_GlassBrightness","payload":8,"#))
        let notify = try await CLI.run(["caps", "cxr-decode", "00000037050375534f8320034465760000002805025353124465765f426174746572794368616e6765640c7b226c6576656c223a38377d"])
        #expect(notify.stdout.contains(#""type":"NOTIFY""#) && notify.stdout.contains(#""request_id":null"#)
                && notify.stdout.contains(#""payload":{"level":87}"#))
    }

    @Test func invalidInputIsOneLineAndExitOne() async throws {
        expectOneLineError(try await CLI.run(["caps", "decode", "0000000d04027553ac02026869"]), contains: "unsupported version 4")
        expectOneLineError(try await CLI.run(["caps", "decode", "0000000a050153056869"]), contains: "string of 5 bytes runs past the end")
        expectOneLineError(try await CLI.run(["caps", "decode", "000000"]), contains: "need more data")
        expectOneLineError(try await CLI.run(["caps", "decode", "0000000c05027553ac02026869"]), contains: "trailing byte")
        expectOneLineError(try await CLI.run(["caps", "decode", "0x12g4"]), contains: "invalid hex at character 4")
        expectOneLineError(try await CLI.run(["caps", "encode", "[1,"]), contains: "invalid JSON at byte 3")
        expectOneLineError(try await CLI.run(["caps", "encode", #"[{"type":"u","value":-1}]"#]), contains: "$[0].value")
        expectOneLineError(try await CLI.run(["caps", "encode", #"{"type":"u"}"#]), contains: "expected an array")
        expectOneLineError(try await CLI.run(["caps", "cxr", #"{"command":"set_brightness","value":16}"#]), contains: "'value'")
        expectOneLineError(try await CLI.run(["caps", "cxr", #"{"command":"set_volume","value":"5"}"#]), contains: "'value'")
        expectOneLineError(try await CLI.run(["caps", "cxr", #"{"command":"dance"}"#]), contains: "unknown command 'dance'")
        expectOneLineError(try await CLI.run(["caps", "cxr", #"{"command":"get_glass_info"}"#, "--request-id", "-1"]), contains: "request-id")
        expectOneLineError(try await CLI.run(["caps", "cxr-decode", "0000000805017801"]), contains: "unknown type code")
        expectOneLineError(try await CLI.run(["caps", "cxr-decode", "0000000a050153026869"]), contains: "member 0 (packet type)")
    }

    @Test func hostileInputDoesNotCrash() async throws {
        // A nesting bomb and a huge declared count: errors, not crashes.
        var bomb = ""
        let depth = 5000
        for k in 0..<depth { bomb += String(format: "%08x05014f", 7 * (depth - k) + 6) }
        bomb += "000000060500"
        expectOneLineError(try await CLI.run(["caps", "decode", bomb]), contains: "nested deeper")
        expectOneLineError(try await CLI.run(["caps", "decode", "0000000b05ffffffff0f56"]), contains: "runs past the end")
        let deepJSON = String(repeating: "[", count: 300) + String(repeating: "]", count: 300)
        expectOneLineError(try await CLI.run(["caps", "encode", deepJSON]), contains: "nest")
    }
}

@Suite struct CapsCLIStdinTests {
    @Test func decodeCommandsReadStdin() async throws {
        let r = try await CLI.run(["caps", "decode"], stdin: "000000080501 7507\n")
        #expect(r.status == 0)
        #expect(r.stdout == #"[{"type":"u","value":7}]"# + "\n")
        let p = try await CLI.run(["caps", "cxr-decode", "-"], stdin: CapsCLITests.brightness)
        #expect(p.stdout.contains(#""sub_command":"Dev_GlassBrightness""#))
    }
}
