import BinaryCoding
import BridgeCore
import CapsCodec
import Synchronization
import Testing
@testable import DeviceProfiles

@Suite struct RokidDriverTests {
    func driver() -> RokidDriver { RokidDriver(serviceRecord: "record-1", now: { 1_700_000_000_000_000_000 }) }

    /// Notifies `bytes` in 20-byte pieces, as a small-MTU link would.
    func feed(_ d: inout RokidDriver, _ bytes: [UInt8]) -> [DriverOutput] {
        stride(from: 0, to: bytes.count, by: 20).flatMap { i in
            d.receive(GATTNotification(characteristic: RokidDriver.notifyCharacteristic, value: Array(bytes[i..<min(i + 20, bytes.count)])))
        }
    }

    @Test func startupIsAnAuthRequest() throws {
        var d = driver()
        let r = try d.startupRequests()
        #expect(r.count == 1 && r[0].expect == "auth")
        let bytes = r[0].writes.flatMap(\.value)
        #expect(r[0].writes.allSatisfy { $0.characteristic == RokidDriver.writeCharacteristic && $0.value.count <= 20 })
        let packet = try CXRPacket(caps: Caps(decoding: bytes))
        #expect(packet == .authRequest(CXRAuthRequest(serviceRecord: "record-1", clientTime: 1_700_000_000_000_000_000)))
    }

    @Test func brightnessRequestIsTheSpecBytesSlicedToMTU() throws {
        var d = driver()
        let r = try d.encode(["command": "set_brightness", "value": 8], mtu: 23)
        #expect(r.expect == "req:1" && r.attribute == "brightness")
        #expect(r.writes.flatMap(\.value) == (try CXRCommand.setBrightness(8).encoded(requestID: 1)))
        #expect(r.writes.allSatisfy { $0.value.count <= 20 })
        let r2 = try d.encode(["brightness": 3], mtu: 185)
        #expect(r2.expect == "req:2" && r2.writes.count == 1)
    }

    @Test func responseCompletesAndUpdatesState() throws {
        var d = driver()
        _ = try d.encode(["command": "set_volume", "value": 5], mtu: 23)
        let resp = try CXRPacket.response(requestID: 1, args: CXRPacket.args("Dev_GlassSound", .uint32(5))).encoded()
        let out = feed(&d, resp)
        #expect(out.contains(.state(["volume": 5])))
        #expect(out.contains { if case let .response("req:1", .success(v?)) = $0 { return v["type"] == "RESPONSE" && v["payload"] == 5 }; return false })
    }

    @Test func authRefusedIsADeviceError() throws {
        var d = driver()
        let bytes = try CXRPacket.authResponse(CXRAuthResponse(major: 1, minor: 12, retCode: -6, clientMac: "AA")).encoded()
        let out = feed(&d, bytes)
        guard case let .response("auth", .failure(e))? = out.first else { Issue.record("no auth failure: \(out)"); return }
        #expect(e.code == .deviceError && e.message.contains("-6"))
    }

    @Test func batteryNotifyBecomesEventAndState() throws {
        var d = driver()
        let bytes = try CXRPacket.notify(channel: "Dev", args: CXRPacket.args("Dev_BatteryChanged", .uint32(77))).encoded()
        let out = feed(&d, bytes)
        #expect(out.contains(.state(["battery": 77])))
        #expect(out.contains { if case let .event(e) = $0 { return e["sub_command"] == "Dev_BatteryChanged" }; return false })
    }

    @Test func garbageIsReportedAndTheStreamRecovers() throws {
        var d = driver()
        let bad = feed(&d, [0x00, 0x00, 0x00, 0x02, 0x05])
        #expect(bad.count == 1)
        if case .malformed = bad.first {} else { Issue.record("expected malformed, got \(bad)") }
        let ok = feed(&d, try CXRPacket.notify(channel: "Dev", args: CXRPacket.args("Dev_GlassBrightness", .uint32(9))).encoded())
        #expect(ok.contains(.state(["brightness": 9])))
    }

    /// A bogus size prefix (4096 bytes, then nothing) must not swallow the next answers: after
    /// `staleGap` without more bytes the partial object is dropped and reported, and the RESPONSE
    /// that follows completes its request.
    @Test func stalePartialObjectIsDroppedBeforeTheNextAnswer() throws {
        let clock = Mutex<UInt64>(1_000)
        var d = RokidDriver(serviceRecord: "r", now: { clock.withLock { $0 } })
        #expect(feed(&d, [0x00, 0x00, 0x10, 0x00, 0x05, 0x01]).isEmpty)
        _ = try d.encode(["command": "set_volume", "value": 5], mtu: 23)
        let resp = try CXRPacket.response(requestID: 1, args: CXRPacket.args("Dev_GlassSound", .uint32(5))).encoded()
        // Slices of one packet arriving close together are kept together.
        clock.withLock { $0 += 200_000_000 }
        let early = feed(&d, Array(resp.prefix(10)))
        #expect(early.isEmpty, "0.2 s is not stale: \(early)")
        var d2 = d
        // Now 1.5 s of silence, then the answer: the 16 stale bytes go, the answer parses.
        clock.withLock { $0 += 1_500_000_000 }
        let out = feed(&d2, resp)
        guard case let .malformed(reason)? = out.first else { Issue.record("expected malformed first, got \(out)"); return }
        #expect(reason.contains("16 bytes of an incomplete Caps object") && reason.contains("1500 ms"), "\(reason)")
        #expect(out.contains { if case .response(key: "req:1", result: .success) = $0 { return true }; return false }, "\(out)")
        #expect(out.contains(.state(["volume": 5])))
    }

    @Test func badCommandsGetStableCodes() {
        var d = driver()
        #expect { _ = try d.encode(["command": "set_brightness", "value": 99], mtu: 23) } throws: {
            ($0 as? CommandError)?.code == .invalidValue && "\($0)".contains("value")
        }
        #expect { _ = try d.encode(["command": "fly"], mtu: 23) } throws: { ($0 as? CommandError)?.code == .unknownCommand }
        #expect { _ = try d.encode(["colour": "red"], mtu: 23) } throws: { ($0 as? CommandError)?.code == .unknownCommand }
    }
}
