import GoProCodec
import Testing

@Suite struct TableTests {
    @Test func statusAndSettingTablesAreCompleteAndUnique() {
        #expect(GoProStatus.all.count == 82)
        #expect(Set(GoProStatus.all.map(\.id)).count == GoProStatus.all.count)
        #expect(Set(GoProStatus.all.map(\.name)).count == GoProStatus.all.count)
        #expect(GoProStatus.status(id: 70)?.name == "internal_battery_percentage")
        #expect(GoProStatus.status(named: "encoding")?.id == 10)
        #expect(GoProStatus.status(id: 33)?.optionName(-1) == "Unknown")
        #expect(GoProStatus.status(id: 40) == nil)  // undocumented: kept by decoders, not named
        #expect(GoProSetting.all.count == 55)
        #expect(Set(GoProSetting.all.map(\.id)).count == GoProSetting.all.count)
        #expect(Set(GoProSetting.all.map(\.name)).count == GoProSetting.all.count)
        #expect(GoProSetting.setting(id: 2)?.optionName(1) == "4K")
        #expect(GoProSetting.setting(named: "video_lens")?.optionValue(named: "linear") == 4)
        #expect(GoProSetting.setting(id: 176)?.options.count == 88)
        #expect(GoProCommandID.allCases.count == 26)
        #expect(Set(GoProCommandID.allCases.map(\.name)).count == 26)
    }

    @Test func everyProtobufResponseOfSection7IsProtobufOnItsCharacteristicOnly() throws {
        #expect(GoProProtobufOperation.all.count == 49)
        for op in GoProProtobufOperation.all {
            var actions = [op.responseAction]
            if let n = op.notificationAction { actions.append(n) }
            for action in actions {
                let r = try GoProResponse(decoding: [op.feature, action], on: op.notifyCharacteristic)
                #expect(r.identifier == .protobuf(feature: op.feature, action: action), "\(op.specID)")
                let request = GoProResponseID.protobuf(feature: op.feature, action: op.responseAction)
                #expect(request.isAnswered(by: r.identifier) == (action == op.responseAction), "\(op.specID)")
            }
            // Request action ids are not responses: on GP-0073 they stay TLV unless the feature is F1/F3/F5.
            if op.feature == 0x02 || op.feature == 0x03 {
                let r = try GoProResponse(decoding: [op.feature, op.requestAction], on: .commandResponse)
                #expect(r.identifier == .command(op.feature), "\(op.specID)")
            }
        }
    }
}
