import AdvertisementCodec
import Testing

@Suite struct ReplayGuardTests {
    @Test func acceptsOnlyAGrowingCounter() {
        var guardian = ReplayGuard()
        let answers = [5, 5, 4, 6].map { guardian.accept($0) }  // then the same again, an older one, a newer one
        #expect(answers == [true, false, false, true])
        #expect(guardian.last == 6)
        var restored = ReplayGuard(last: 10)  // as kept in the store across a restart
        let after = [10, 11].map { restored.accept($0) }
        #expect(after == [false, true])
    }

    @Test func sixteenBitUUIDsInBlueZsForm() {
        #expect(AdvertisementPacket.uuid(0xFCD2) == "0000fcd2-0000-1000-8000-00805f9b34fb")
        let p = AdvertisementPacket(address: "A4:C1:38:00:00:01", serviceData: ["0000181a-0000-1000-8000-00805f9b34fb": [1, 2]])
        #expect(p.serviceData(0x181A) == [1, 2])
        #expect(p.serviceData(0xFCD2) == nil)
    }
}

@Suite struct AddressBytesTests {
    @Test func sixHexBytesSeparatedByColons() throws {
        #expect(try AdvertisementPacket.addressBytes("A4:c1:38:0F:ff:01") == [0xA4, 0xC1, 0x38, 0x0F, 0xFF, 0x01])
        for bad in ["", "A4:C1:38:0F:FF", "A4:C1:38:0F:FF:01:02", "A4-C1-38-0F-FF-01", "A4:C1:38:0F:FF:0G", "A4:C1:38:0F:FF:1", "A4:C1:38:0F:FF:é1"] {
            #expect(throws: AdvertisementError.malformed("the address \"\(bad)\" is not six hex bytes separated by colons")) {
                try AdvertisementPacket.addressBytes(bad)
            }
        }
    }
}
