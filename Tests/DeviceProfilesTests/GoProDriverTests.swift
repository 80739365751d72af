import BinaryCoding
import BridgeCore
import GoProCodec
import Testing
@testable import DeviceProfiles

@Suite struct GoProDriverTests {
    /// What the camera notifies for `message` on `c`, packetized as a camera does.
    func notify(_ d: inout GoProDriver, _ message: [UInt8], on c: GoProCharacteristic) throws -> [DriverOutput] {
        let packets = try GoProPacketizer.packetize(message, startHeader: .general, continuation: .counting)
        return packets.flatMap { d.receive(GATTNotification(characteristic: CharacteristicID(c.uuid), value: Array($0))) }
    }

    func key(_ r: DeviceRequest) -> String { r.expect ?? "" }

    @Test func shutterOnIsTheSpecMessageAndOkCompletes() throws {
        var d = GoProDriver()
        let r = try d.encode(["command": "set_shutter", "value": true], mtu: 23)
        #expect(r.writes.count == 1)
        #expect(r.writes[0].characteristic == CharacteristicID("b5f90072-aa8d-11e3-9046-0002a5d5c51b"))
        #expect(r.writes[0].value == [0x20, 0x03, 0x01, 0x01, 0x01])  // extended-13 header, as the SDK writes
        #expect(!r.bypassesBusyGate)
        let out = try notify(&d, [0x01, 0x00], on: .commandResponse)
        guard case let .response(k, .success)? = out.first else { Issue.record("\(out)"); return }
        #expect(k == key(r))
    }

    /// The `/set/led` ← `ON` shortcut reaches the driver as `{"led": true}`: LED "On" is option 2
    /// (`5B 01 02`), not 1; a setting with no "On" option refuses it with `invalid_value`.
    @Test func onOffShortcutsUseTheSettingsOwnOptions() throws {
        var d = GoProDriver()
        let on = try d.encode(["led": true], mtu: 23)
        #expect(on.writes.first?.characteristic == CharacteristicID("b5f90074-aa8d-11e3-9046-0002a5d5c51b"))
        #expect(on.writes.first?.value.suffix(3) == [0x5B, 0x01, 0x02])
        let off = try d.encode(["hindsight": false], mtu: 23)
        #expect(off.writes.first?.value.suffix(3) == [0xA7, 0x01, 0x04])
        do {
            _ = try d.encode(["hindsight": true], mtu: 23)
            Issue.record("a boolean for a setting without an On option was accepted")
        } catch {
            #expect((error as? CommandError)?.code == .invalidValue && "\(error)".contains(#"no "On" option"#), "\(error)")
        }
    }

    @Test func failureStatusIsADeviceError() throws {
        var d = GoProDriver()
        let r = try d.encode(["setting": "video_resolution", "value": "4K"], mtu: 23)
        let out = try notify(&d, [0x02, 0x02], on: .settingsResponse)
        guard case let .response(k, .failure(e))? = out.first else { Issue.record("\(out)"); return }
        #expect(k == key(r) && e.code == .deviceError && e.message.contains("invalid_parameter"))
    }

    @Test func statusPushUpdatesStateAndBusyGate() throws {
        var d = GoProDriver()
        // 0x93 push: status 10 (encoding) = 1, status 70 (battery) = 84.
        let out = try notify(&d, [0x93, 0x00, 0x0A, 0x01, 0x01, 0x46, 0x01, 0x54], on: .queryResponse)
        #expect(out == [.state(["encoding": true, "internal_battery_percentage": 84])])
        #expect(d.isBusy)
        #expect(try d.encode(["shutter": false], mtu: 23).bypassesBusyGate)
        #expect(try d.encode(["query": "get_status_values"], mtu: 23).bypassesBusyGate)
        #expect(!(try d.encode(["command": "sleep"], mtu: 23).bypassesBusyGate))
        #expect(try d.encode(["command": "hilight_moment"], mtu: 23).bypassesBusyGate)  // tags the recording
    }

    /// The statuses and settings of the Home Assistant entities, by id: Busy and Encoding first.
    static let registerStatuses: [UInt8] = [0x20, 0x0F, 0x53, 8, 10, 70, 2, 54, 35, 34, 13, 33, 6, 85, 113, 45, 96]
    static let registerSettings: [UInt8] = [0x20, 0x04, 0x52, 2, 3, 121]

    @Test func startupRegistersAndKeepAliveIsEvery3s() throws {
        var d = GoProDriver()
        let s = try d.startupRequests()
        // Register by id for the entities' statuses (0x53) and settings (0x52), then Get
        // Hardware Info (0x3C on GP-0072).
        #expect(s.map { $0.writes.first?.value } == [Self.registerStatuses, Self.registerSettings, [0x20, 0x01, 0x3C]])
        #expect(s[0].writes.first?.characteristic == CharacteristicID(GoProCharacteristic.query.uuid) && s[0].bypassesBusyGate)
        #expect(s[2].writes.first?.characteristic == CharacteristicID(GoProCharacteristic.command.uuid) && s[2].bypassesBusyGate)
        // The status answer carries the current values into the state; the setting answer (the
        // last by-id registration) brings the registrations for all (the empty list, §6).
        let statuses = try notify(&d, [0x53, 0x00, 8, 1, 0, 10, 1, 0, 85, 1, 1, 45, 1, 0], on: .queryResponse)
        #expect(statuses.first == .state(["busy": false, "encoding": false, "cold": true, "locate": false]), "\(statuses)")
        #expect(!statuses.contains(where: { if case .request = $0 { true } else { false } }))
        let settings = try notify(&d, [0x52, 0x00, 2, 1, 9], on: .queryResponse)
        #expect(settings.first == .state(["video_resolution": "1080"]), "\(settings)")
        let all: [[UInt8]] = settings.compactMap { if case let .request(r) = $0 { r.writes.first?.value } else { nil } }
        #expect(all == [[0x20, 0x01, 0x53], [0x20, 0x01, 0x52]])
        guard case let .response(answered, .success)? = settings.first(where: { if case .response = $0 { true } else { false } }) else {
            Issue.record("\(settings)"); return
        }
        #expect(answered == key(s[1]))
        let k = try #require(d.keepAlive)
        #expect(k.interval == .seconds(3) && k.request.writes[0].value == [0x20, 0x03, 0x5B, 0x01, 0x42])
    }

    /// A camera that does not answer the by-id registration (or refuses it) still gets the
    /// registrations for all, once.
    @Test func registrationsForAllFollowAFailedByIdRegistration() throws {
        var d = GoProDriver()
        let s = try d.startupRequests()
        let out = d.internalRequestFailed(s[1], CommandError(.timeout, "no answer"))
        let all: [[UInt8]] = out.compactMap { if case let .request(r) = $0 { r.writes.first?.value } else { nil } }
        #expect(all == [[0x20, 0x01, 0x53], [0x20, 0x01, 0x52]])
        #expect(d.internalRequestFailed(s[1], CommandError(.timeout, "no answer")).isEmpty)
        #expect(d.internalRequestFailed(s[0], CommandError(.timeout, "no answer")).isEmpty)
    }

    @Test func firstPairingSendsPairingFinishBeforeTheRegistrations() throws {
        var d = GoProDriver()
        #expect(d.requiresPairing)
        d.didPair()
        let s = try d.startupRequests()
        #expect(s.count == 4)
        // 03 01 RequestPairingFinish{result SUCCESS (0), phoneName "gatt2mqtt"} on GP-0091 (§2, §7),
        // extended-13 header as the SDK writes.
        let finish = try #require(s.first?.writes.first)
        #expect(finish.characteristic == CharacteristicID(GoProCharacteristic.networkManagement.uuid))
        #expect(finish.value == [0x20, 0x0F, 0x03, 0x01, 0x08, 0x00, 0x12, 0x09] + Array("gatt2mqtt".utf8))
        #expect(s[0].bypassesBusyGate)
        // ResponseGeneric SUCCESS on GP-0092 completes it.
        let out = try notify(&d, [0x03, 0x81, 0x08, 0x01], on: .networkManagementResponse)
        guard case let .response(k, .success)? = out.first else { Issue.record("\(out)"); return }
        #expect(k == key(s[0]))
        // Only once: the next connect (already paired) just registers.
        d.linkLost()
        #expect(try d.startupRequests().count == 3)
    }

    @Test func pairingFinishLostWithTheLinkIsSentAgainOnTheNextConnect() throws {
        var d = GoProDriver()
        d.didPair()
        #expect(try d.startupRequests().count == 4)
        d.linkLost()  // dropped before the camera answered
        let s = try d.startupRequests()
        #expect(s.count == 4 && s[0].writes[0].value.prefix(4) == [0x20, 0x0F, 0x03, 0x01])
        _ = try notify(&d, [0x03, 0x81, 0x08, 0x01], on: .networkManagementResponse)
        d.linkLost()
        #expect(try d.startupRequests().count == 3)
    }

    @Test func pairingFinishFailureIsReported() throws {
        var d = GoProDriver(phoneName: "bridge")
        d.didPair()
        let s = try d.startupRequests()
        #expect(s[0].writes[0].value.suffix(6) == Array("bridge".utf8))
        let out = try notify(&d, [0x03, 0x81, 0x08, 0x03], on: .networkManagementResponse)  // NOT_SUPPORTED
        guard case let .response(k, .failure(e))? = out.first else { Issue.record("\(out)"); return }
        #expect(k == key(s[0]) && e.code == .deviceError)
    }

    /// Get Hardware Info's answer (a HERO12 Black's, captured: shared/vectors/gopro
    /// `get_hardware_info_camera_capture_a`) becomes the state's `hardware`, without the Wi-Fi
    /// access point's name and MAC; an error answer leaves the state alone.
    @Test func hardwareInfoAnswerFillsTheStatesHardware() throws {
        var d = GoProDriver()
        let s = try d.startupRequests()
        let message = try Hex.decode("3c00040000003e0c4845524f313220426c61636b04307830350f4832332e30312e30312e39392e35360e"
            + "4333353031333234353030373032114845524f313220426c61636b64656275670c323637346637663636313034010001010100025b5d0101")
        let packets = try GoProPacketizer.packetize(message, startHeader: .extended13, continuation: .counting)
        let out = packets.flatMap { d.receive(GATTNotification(characteristic: CharacteristicID(GoProCharacteristic.commandResponse.uuid), value: Array($0))) }
        #expect(out.first == .state(["hardware": ["model_number": 62, "model_name": "HERO12 Black", "firmware_version": "H23.01.01.99.56",
                                                  "serial_number": "C3501324500702"]]), "\(out)")
        guard case let .response(k, .success)? = out.last else { Issue.record("\(out)"); return }
        #expect(k == key(s[2]))
        var e = GoProDriver()
        _ = try e.encode(["command": "get_hardware_info"], mtu: 23)
        let refused = try notify(&e, [0x3C, 0x01], on: .commandResponse)
        #expect(refused.count == 1, "only the error answer, no state: \(refused)")
    }

    @Test func keepAliveIntervalIsConfigurable() throws {
        let d = GoProDriver(keepAliveInterval: .milliseconds(200))
        #expect(d.keepAlive?.interval == .milliseconds(200))
    }

    /// A message cut short by a new start packet is reported, and the new message still counts.
    @Test func messageCutShortIsReportedAndTheNextOneDecodes() throws {
        var d = GoProDriver()
        let query = CharacteristicID("b5f90077-aa8d-11e3-9046-0002a5d5c51b")
        // Extended-13 start of a 40-byte message, then (its continuations lost) a whole push.
        let cut = d.receive(GATTNotification(characteristic: query, value: [0x20, 40] + Array(repeating: 0, count: 18)))
        #expect(cut.isEmpty)
        let out = d.receive(GATTNotification(characteristic: query, value: [0x05, 0x93, 0x00, 70, 0x01, 55]))
        let messages = out.compactMap { if case let .malformed(m) = $0 { m } else { nil } }
        #expect(messages.count == 1 && messages[0].contains("cut short"), "\(out)")
        let states = out.compactMap { if case let .state(s) = $0 { s } else { nil } }
        #expect(states.first?["internal_battery_percentage"] == .int(55), "\(out)")
    }

    @Test func garbageAndBadCommands() throws {
        var d = GoProDriver()
        let out = d.receive(GATTNotification(characteristic: CharacteristicID("b5f90073-aa8d-11e3-9046-0002a5d5c51b"), value: [0x85]))
        if case .malformed? = out.first {} else { Issue.record("expected malformed: \(out)") }
        #expect { _ = try d.encode(["command": "self_destruct"], mtu: 23) } throws: { ($0 as? CommandError)?.code == .unknownCommand }
        #expect { _ = try d.encode(["command": "load_preset_group", "group": "cinema"], mtu: 23) } throws: {
            ($0 as? CommandError)?.code == .invalidValue
        }
    }
}
