import BlueZSimulator
import GoProCodec
import SwiftProtobuf
import Synchronization
import Testing
@testable import DeviceSimulators

/// A client-side view of a simulated camera without a bus: writes go straight to `handleWrite`,
/// notifications come back through the `SimulatedLink` and are reassembled per characteristic.
final class GoProHarness: Sendable {
    let camera: SimulatedGoPro
    let notified = Mutex<[(uuid: String, value: [UInt8])]>([])

    init(_ camera: SimulatedGoPro = SimulatedGoPro()) {
        self.camera = camera
        camera.linkChanged(SimulatedLink { [weak self] uuid, value in
            self?.notified.withLock { $0.append((uuid, value)) }
            return true
        })
    }

    /// Writes a message (packetized as the SDK does) to a request characteristic.
    func write(_ message: [UInt8], to c: GoProCharacteristic) throws {
        for p in try GoProPacketizer.packetize(message, startHeader: .general, continuation: .counting) {
            try camera.handleWrite(Array(p), to: c.uuid, withResponse: true)
        }
    }

    /// Every complete message notified on `c` so far (and forgets them).
    func take(on c: GoProCharacteristic) throws -> [[UInt8]] {
        let values = notified.withLock { n -> [[UInt8]] in
            let mine = n.filter { $0.uuid.lowercased() == c.uuid.lowercased() }.map(\.value)
            n.removeAll { $0.uuid.lowercased() == c.uuid.lowercased() }
            return mine
        }
        var a = GoProAssembler()
        return try values.compactMap { try a.append($0) }
    }
}

@Suite struct SimulatedGoProTests {
    static func generic(_ message: [UInt8]) throws -> OpenGopro_EnumResultGeneric {
        try OpenGopro_ResponseGeneric(serializedBytes: Array(message.dropFirst(2))).result
    }

    @Test func setCameraControlAnswersSuccessAndPushesStatus114() throws {
        let h = GoProHarness()
        try h.write([0x53, 114], to: .query)  // register for camera control status
        #expect(try h.take(on: .queryResponse) == [[0x53, 0x00, 114, 0x01, 0x00]])
        try h.write([0xF1, 0x69, 0x08, 0x02], to: .command)  // CAMERA_EXTERNAL_CONTROL (§2 step 6)
        let answers = try h.take(on: .commandResponse)
        try #require(answers.count == 1)
        #expect(Array(answers[0].prefix(2)) == [0xF1, 0xE9])
        #expect(try Self.generic(answers[0]) == .resultSuccess)
        #expect(try h.take(on: .queryResponse) == [[0x93, 0x00, 114, 0x01, 0x02]])
        // The codec reads the answer as a ResponseGeneric SUCCESS on GP-0073.
        let decoded = try GoProResponse(decoding: answers[0], on: .commandResponse)
        #expect(decoded.identifier == .protobuf(feature: 0xF1, action: 0xE9))
    }

    @Test func turboAnswersSuccessAndSetsStatus113() throws {
        let h = GoProHarness()
        try h.write([0xF1, 0x6B, 0x08, 0x01], to: .command)
        let answers = try h.take(on: .commandResponse)
        #expect(answers == [[0xF1, 0xEB, 0x08, 0x01]])  // what a real camera replied (§7)
        try h.write([0x13, 113], to: .query)
        #expect(try h.take(on: .queryResponse) == [[0x13, 0x00, 113, 0x01, 0x01]])
    }

    @Test func presetStatusIsAGroupListAndRegisteredChangesPushF5F3() throws {
        let h = GoProHarness()
        try h.write([0xF5, 0x72, 0x08, 0x01, 0x18, 0x01, 0x20, 0x01], to: .query)  // register presets
        let answers = try h.take(on: .queryResponse)
        try #require(answers.count == 1)
        #expect(Array(answers[0].prefix(2)) == [0xF5, 0xF2])
        let status = try OpenGopro_NotifyPresetStatus(serializedBytes: Array(answers[0].dropFirst(2)))
        #expect(status.presetGroupArray.map(\.id) == [1000, 1001, 1002])
        #expect(status.presetGroupArray[0].presetArray.first?.settingArray.first { $0.id == 2 }?.value == 1)
        // Changing the resolution of the active preset is a preset change: F5 F3 with the new value.
        try h.write([0x02, 0x01, 0x09], to: .settings)
        #expect(try h.take(on: .settingsResponse) == [[0x02, 0x00]])
        let pushes = try h.take(on: .queryResponse)
        try #require(pushes.count == 1)
        #expect(Array(pushes[0].prefix(2)) == [0xF5, 0xF3])
        let pushed = try OpenGopro_NotifyPresetStatus(serializedBytes: Array(pushes[0].dropFirst(2)))
        #expect(pushed.presetGroupArray[0].presetArray[0].settingArray.first { $0.id == 2 }?.value == 9)
        // The codec identifies both as NotifyPresetStatus.
        let decoded = try GoProResponse(decoding: pushes[0], on: .queryResponse)
        #expect(decoded.isAsynchronous)
    }

    @Test func lastCapturedMediaIsUnavailableBeforeARecordingAndAFileAfter() throws {
        let h = GoProHarness()
        try h.write([0xF5, 0x6D], to: .query)
        var answers = try h.take(on: .queryResponse)
        try #require(answers.count == 1)
        var r = try OpenGopro_ResponseLastCapturedMedia(serializedBytes: Array(answers[0].dropFirst(2)))
        #expect(Array(answers[0].prefix(2)) == [0xF5, 0xED])
        #expect(r.result == .resultResourceNotAvailable && !r.hasMedia)
        try h.write([0x01, 0x01, 0x01], to: .command)  // shutter on
        try h.write([0x01, 0x01, 0x00], to: .command)  // shutter off: one file
        _ = try h.take(on: .commandResponse)
        try h.write([0xF5, 0x6D], to: .query)
        answers = try h.take(on: .queryResponse)
        try #require(answers.count == 1)
        r = try OpenGopro_ResponseLastCapturedMedia(serializedBytes: Array(answers[0].dropFirst(2)))
        #expect(r.result == .resultSuccess && r.media.folder == "100GOPRO" && r.media.file == "GX010001.MP4")
    }

    @Test func pairingFinishOnGP0091IsAnsweredOnGP0092AndRecorded() throws {
        let h = GoProHarness()
        #expect(h.camera.pairingFinishedBy == nil)
        var req = OpenGopro_RequestPairingFinish()
        req.result = .success
        req.phoneName = "gatt2mqtt"
        try h.write([0x03, 0x01] + req.serializedBytes(), to: .networkManagement)
        let answers = try h.take(on: .networkManagementResponse)
        try #require(answers.count == 1)
        #expect(Array(answers[0].prefix(2)) == [0x03, 0x81])
        #expect(try Self.generic(answers[0]) == .resultSuccess)
        #expect(h.camera.pairingFinishedBy == "gatt2mqtt")
    }

    /// Get Hardware Info (§5, 0x3C): `3C 00`, then the length-prefixed model number (4 bytes),
    /// model name, the deprecated field, firmware, serial number, AP SSID and AP MAC, then 11
    /// reserved bytes — which the codec decodes field by field.
    @Test func hardwareInfoAnswersTheSpecLayout() throws {
        let h = GoProHarness(SimulatedGoPro(hardware: .init(modelNumber: 65, modelName: "HERO13 Black", firmware: "H24.01.02.02.00",
                                                            serialNumber: "C3531350001234", apSSID: "GP50001234", apMAC: "0657abcdef01")))
        try h.write([0x3C], to: .command)
        let answers = try h.take(on: .commandResponse)
        try #require(answers.count == 1)
        #expect(Array(answers[0].prefix(8)) == [0x3C, 0x00, 0x04, 0x00, 0x00, 0x00, 0x41, 0x0C])
        #expect(Array(answers[0].dropLast(11).suffix(13)) == [0x0C] + Array("0657abcdef01".utf8))
        #expect(Array(answers[0].suffix(11)) == [UInt8](repeating: 0, count: 11))
        let json = try GoProResponse(decoding: answers[0], on: .commandResponse).json
        #expect(json["name"] == "get_hardware_info" && json["status"] == 0)
        #expect(json["model_number"] == 65 && json["model_name"] == "HERO13 Black" && json["firmware_version"] == "H24.01.02.02.00")
        #expect(json["serial_number"] == "C3531350001234" && json["ap_ssid"] == "GP50001234" && json["ap_mac_addr"] == "0657abcdef01")
    }

    /// The statuses Home Assistant shows, registered for by id as the bridge does at connect:
    /// the answer gives each in the order asked, at the length a camera sends it (§4.2, §11:
    /// booleans and enums 1 byte, counts u32 BE, SD card remaining u64 BE — the capture's
    /// 26 575 456 kB).
    @Test func registeringTheEntitiesStatusesAnswersTheirValuesAsACameraDoes() throws {
        let h = GoProHarness()
        try h.write([0x53, 8, 10, 70, 2, 54, 35, 34, 13, 33, 6, 85, 113, 45, 96], to: .query)
        #expect(try h.take(on: .queryResponse) == [[0x53, 0x00,
            8, 1, 0, 10, 1, 0, 70, 1, 84, 2, 1, 3, 54, 8, 0, 0, 0, 0, 0x01, 0x95, 0x82, 0x60, 35, 4, 0, 0, 0x15, 0x18,
            34, 4, 0, 0, 0x09, 0x60, 13, 4, 0, 0, 0, 0, 33, 1, 0, 6, 1, 0, 85, 1, 0, 113, 1, 0, 45, 1, 0, 96, 4, 0, 0, 0x03, 0xE8]])
        // The codec decodes every entry of it by name, with the spec's enum names.
        try h.write([0x13, 2, 33, 54], to: .query)
        let answer = try #require(try h.take(on: .queryResponse).first)
        guard case let .query(q) = try GoProResponse(decoding: answer, on: .queryResponse) else { Issue.record("not a query answer"); return }
        #expect(q.namedValues == ["internal_battery_bars": "Three", "primary_storage": "OK", "sd_card_remaining": 26_575_456])
    }

    /// Locate (§5, 0x16 `01 0/1`) answers `16 00` and sets status 45 (Locate), pushed when registered.
    @Test func locateSetsStatus45() throws {
        let h = GoProHarness()
        try h.write([0x53, 45], to: .query)
        #expect(try h.take(on: .queryResponse) == [[0x53, 0x00, 45, 0x01, 0x00]])
        try h.write([0x16, 0x01, 0x01], to: .command)
        #expect(try h.take(on: .commandResponse) == [[0x16, 0x00]])
        #expect(try h.take(on: .queryResponse) == [[0x93, 0x00, 45, 0x01, 0x01]])
        try h.write([0x16, 0x01, 0x00], to: .command)
        #expect(try h.take(on: .commandResponse) == [[0x16, 0x00]])
        #expect(try h.take(on: .queryResponse) == [[0x93, 0x00, 45, 0x01, 0x00]])
    }

    /// A camera made with `pushes: false` (`simulate --no-gopro-pushes`, the floor comparison of
    /// the bridge benchmark) answers registrations and commands alike and pushes nothing: not the
    /// shutter's statuses, not a registered setting.
    @Test func aCameraWithoutPushesOnlyAnswers() throws {
        let h = GoProHarness(SimulatedGoPro(pushes: false))
        try h.write([0x53, 8, 10], to: .query)
        #expect(try h.take(on: .queryResponse) == [[0x53, 0x00, 8, 0x01, 0x00, 10, 0x01, 0x00]])
        try h.write([0x52, 2], to: .query)
        #expect(try h.take(on: .queryResponse).count == 1)
        try h.write([0x01, 0x01, 0x01], to: .command)  // shutter on: statuses 8, 10, 13 change
        #expect(try h.take(on: .commandResponse) == [[0x01, 0x00]])
        try h.write([0x02, 0x01, 0x04], to: .settings)  // resolution 4
        #expect(try h.take(on: .settingsResponse) == [[0x02, 0x00]])
        #expect(try h.take(on: .queryResponse).isEmpty)
        // …while the same steps on a default camera push them.
        let pushing = GoProHarness()
        try pushing.write([0x53, 10], to: .query)
        _ = try pushing.take(on: .queryResponse)
        try pushing.write([0x01, 0x01, 0x01], to: .command)
        #expect(try pushing.take(on: .queryResponse) == [[0x93, 0x00, 10, 0x01, 0x01]])
    }

    /// Load Preset Group (§5, 0x3E, u16 group) answers `3E 00` and sets status 96 (pushed when
    /// registered); a group that is not 1000–1002 is an invalid parameter.
    @Test func loadPresetGroupSetsStatus96() throws {
        let h = GoProHarness()
        try h.write([0x53, 96], to: .query)
        #expect(try h.take(on: .queryResponse) == [[0x53, 0x00, 96, 0x04, 0x00, 0x00, 0x03, 0xE8]])  // video
        try h.write([0x3E, 0x02, 0x03, 0xE9], to: .command)  // photo
        #expect(try h.take(on: .commandResponse) == [[0x3E, 0x00]])
        #expect(try h.take(on: .queryResponse) == [[0x93, 0x00, 96, 0x04, 0x00, 0x00, 0x03, 0xE9]])
        try h.write([0x3E, 0x02, 0x07, 0xD0], to: .command)  // 2000: not a group to load
        #expect(try h.take(on: .commandResponse) == [[0x3E, 0x02]])
        #expect(try h.take(on: .queryResponse).isEmpty)
    }

    @Test func unparseableAndUnknownProtobufRequests() throws {
        let h = GoProHarness()
        try h.write([0x03, 0x01, 0x08, 0x00], to: .networkManagement)  // phone name (required) missing
        let answers = try h.take(on: .networkManagementResponse)
        try #require(answers.count == 1)
        #expect(try Self.generic(answers[0]) == .resultIllFormed)
        #expect(h.camera.pairingFinishedBy == nil)
        try h.write([0xF1, 0x62, 0x0A, 0x01, 0x41], to: .command)  // Set Camera Name: not simulated
        #expect(try h.take(on: .commandResponse) == [[0xF1, 0x02]])
        try h.write([0x02, 0x02], to: .networkManagement)  // AP scan: not simulated
        #expect(try h.take(on: .networkManagementResponse) == [[0x02, 0x02]])
    }
}
