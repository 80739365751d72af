import BinaryCoding
import BridgeCore
import CapsCodec
import Synchronization
import Testing
@testable import DeviceProfiles

@Suite struct RokidDriverTests {
    func driver() -> RokidDriver { RokidDriver(now: { 1_700_000_000_000_000_000 }) }

    /// The 0x9301 value real glasses publish (§4.1 `SSSuu`).
    func connectionInfo(_ record: String) throws -> [UInt8] {
        try CXRConnectionInfo(serviceRecord: record, mac: "AA:BB:CC:DD:EE:FF", account: "", glassesType: 1, extra: 1).encoded()
    }

    /// Connects `d` as the session does: the start-up read of 0x9301, then AUTH_REQ from its value.
    func authRequest(_ d: inout RokidDriver, record: String = "4f0e3c1a-9d2b-4c55-8a70-2f6b1d9e0c33") throws -> DeviceRequest {
        let startup = try d.startupRequests()
        #expect(startup == [DeviceRequest(writes: [], read: RokidDriver.connectionInfoCharacteristic)])
        let out = d.decodeRead(RokidDriver.connectionInfoCharacteristic, try connectionInfo(record))
        guard out.count == 1, case let .request(auth) = out[0] else { throw Failure("expected one AUTH_REQ request, got \(out)") }
        return auth
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    func authResponse(_ retCode: Int32) throws -> [UInt8] {
        try CXRPacket.authResponse(CXRAuthResponse(major: 1, minor: 12, retCode: retCode, clientMac: "AA")).encoded()
    }

    func authFailure(_ body: () throws -> Void) -> CommandError? {
        do { try body() } catch let e as CommandError { return e } catch { return nil }
        return nil
    }

    /// Notifies `bytes` in 20-byte pieces, as a small-MTU link would.
    func feed(_ d: inout RokidDriver, _ bytes: [UInt8]) -> [DriverOutput] {
        stride(from: 0, to: bytes.count, by: 20).flatMap { i in
            d.receive(GATTNotification(characteristic: RokidDriver.notifyCharacteristic, value: Array(bytes[i..<min(i + 20, bytes.count)])))
        }
    }

    /// §5.2 steps 1 and 3: the start-up reads 0x9301, and AUTH_REQ carries its member 0.
    @Test func authRequestCarriesTheRecordReadFrom9301() throws {
        var d = driver()
        let r = try authRequest(&d, record: "4f0e3c1a-9d2b-4c55-8a70-2f6b1d9e0c33")
        #expect(r.expect == "auth" && r.timeout == RokidDriver.authTimeout && RokidDriver.authTimeout == .seconds(5))
        #expect(r.writes.allSatisfy { $0.characteristic == RokidDriver.writeCharacteristic && $0.value.count <= 20 })
        let packet = try CXRPacket(caps: Caps(decoding: r.writes.flatMap(\.value)))
        #expect(packet == .authRequest(CXRAuthRequest(serviceRecord: "4f0e3c1a-9d2b-4c55-8a70-2f6b1d9e0c33",
                                                      clientTime: 1_700_000_000_000_000_000)))
        // The spec's vector too (`gatt_9301_connection_info_shape`, record 12345678-…).
        let vector = try Hex.decode("00000051050553535375752431323334353637382d313233342d353637382d396162632d6465663031323334353637381141413a42423a43433a44443a45453a46460c64656d6f2d6163636f756e740101")
        guard case let .request(auth)? = d.decodeRead(RokidDriver.connectionInfoCharacteristic, vector).first else {
            Issue.record("no AUTH_REQ from the vector"); return
        }
        guard case let .authRequest(a) = try CXRPacket(decoding: auth.writes.flatMap(\.value)) else { Issue.record("not AUTH_REQ"); return }
        #expect(a.serviceRecord == "12345678-1234-5678-9abc-def012345678")
    }

    /// The record may be per session (§4.1): every connect reads 0x9301 again and uses the new one.
    @Test func everyConnectReadsTheRecordAgain() throws {
        var d = driver()
        _ = try authRequest(&d, record: "first")
        d.linkLost()
        let second = try authRequest(&d, record: "second")
        guard case let .authRequest(a) = try CXRPacket(decoding: second.writes.flatMap(\.value)) else { Issue.record("not AUTH_REQ"); return }
        #expect(a.serviceRecord == "second")
    }

    /// A 0x9301 that is unreadable, absent or without a record: a device error naming it, and
    /// commands end `auth_failed` at once rather than timing out.
    @Test func unusable9301FailsCommandsWithAuthFailed() throws {
        for (value, reason) in [([UInt8]([0x00, 0x00, 0x00, 0x07, 0x05, 0x01]), "0x9301 holds no usable service record"),
                                (try Caps([.uint32(1)]).encoded(), "0x9301 member 0 (service record): expected S, found u")] {
            var d = driver()
            _ = try d.startupRequests()
            let out = d.decodeRead(RokidDriver.connectionInfoCharacteristic, value)
            guard case let .deviceError(e)? = out.first, out.count == 1 else { Issue.record("\(out)"); continue }
            #expect(e.code == .authFailed && e.message.contains(reason), "\(e)")
            #expect(authFailure { _ = try d.encode(["brightness": 3], mtu: 23) } == e)
        }
        var d = driver()
        let read = try #require(try d.startupRequests().first)
        let out = d.internalRequestFailed(read, CommandError(.bluetoothError, "not_found: no characteristic 9301"))
        guard case let .deviceError(e)? = out.first else { Issue.record("\(out)"); return }
        #expect(e.code == .authFailed && e.message.contains("0x9301 (service record) could not be read: not_found"), "\(e)")
        #expect(authFailure { _ = try d.encode(["command": "get_glass_info"], mtu: 23) }?.code == .authFailed)
        // The next connect starts over.
        d.linkLost()
        #expect(authFailure { _ = try d.encode(["command": "get_glass_info"], mtu: 23) } == nil)
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

    /// Once authenticated, the glasses are asked for their info (`Dev_GetGlassInfo`, the one
    /// `Dev` request that reads, §6) before any command, bounded like AUTH_REQ; its answer's
    /// battery, brightness and volume go into the state. Again after the next connect.
    @Test func authenticatedGlassesAreAskedForTheirInfo() throws {
        var d = driver()
        for connect in 1...2 {
            _ = try authRequest(&d)
            let out = feed(&d, try authResponse(0))
            guard out.count == 2, out[0] == .response(key: "auth", result: .success(nil)), case let .request(info) = out[1] else {
                Issue.record("\(out)"); return
            }
            #expect(info.timeout == RokidDriver.authTimeout && info.expect != nil)
            guard case let .request(id, _, args) = try CXRPacket(decoding: info.writes.flatMap(\.value)) else { Issue.record("not a REQUEST"); return }
            #expect(args.members.first == .string("Dev_GetGlassInfo"))
            let answer = try CXRPacket.response(requestID: id, args: CXRPacket.args("Dev_GetGlassInfo",
                .string(#"{"battery":80,"brightness":\#(connect),"volume":7}"#))).encoded()
            let state = feed(&d, answer)
            #expect(state.contains(.state(["battery": 80, "brightness": .int(Int64(connect)), "volume": 7])), "\(state)")
            #expect(state.contains { if case .response(info.expect!, .success) = $0 { true } else { false } })
            d.linkLost()
        }
    }

    /// AUTH_RESP retCode < 0 (§5.2 step 4): the auth request fails, a device error names the
    /// code and its meaning, and every command on this link ends `auth_failed`.
    @Test func refusedAuthFailsCommandsUntilTheNextConnect() throws {
        for (code, meaning) in [(Int32(-1), "major version mismatch"), (-3, "no service record"), (-4, "service record mismatch"),
                                (-6, "already connected or rejected"), (-9, "unknown refusal")] {
            var d = driver()
            _ = try authRequest(&d)
            let out = feed(&d, try authResponse(code))
            guard out.count == 2, case let .deviceError(e) = out[0], case .response("auth", .failure(e)) = out[1] else {
                Issue.record("\(code): \(out)"); continue
            }
            #expect(e.code == .authFailed && e.message.contains("AUTH_RESP retCode \(code) (\(meaning))"), "\(e)")
            #expect(authFailure { _ = try d.encode(["command": "set_brightness", "value": 8], mtu: 23) } == e)
            d.linkLost()
            _ = try authRequest(&d)
            #expect(feed(&d, try authResponse(0)).first == .response(key: "auth", result: .success(nil)))
            #expect(authFailure { _ = try d.encode(["command": "set_brightness", "value": 8], mtu: 23) } == nil)
        }
    }

    /// No AUTH_RESP within the bound (glasses that refuse may stay silent, §4.2): the session
    /// times the AUTH_REQ out after its `timeout` and tells the driver, which fails commands.
    @Test func silenceAfterAuthRequestFailsCommands() throws {
        var d = RokidDriver(now: { 0 }, authTimeout: .milliseconds(300))
        let auth = try authRequest(&d)
        #expect(auth.timeout == .milliseconds(300))
        let out = d.internalRequestFailed(auth, CommandError(.timeout, "no answer from glasses within 0.3 seconds"))
        guard case let .deviceError(e)? = out.first else { Issue.record("\(out)"); return }
        #expect(e.code == .authFailed && e.message.contains("no AUTH_RESP within 300 ms"), "\(e)")
        #expect(authFailure { _ = try d.encode(["volume": 3], mtu: 23) } == e)
        // Another internal request's failure is not the driver's business.
        var other = driver()
        #expect(other.internalRequestFailed(DeviceRequest(writes: [], expect: "req:1"), CommandError(.timeout, "x")).isEmpty)
        #expect(RokidDriver.text(.seconds(5)) == "5 s")
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
        var d = RokidDriver(now: { clock.withLock { $0 } })
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
