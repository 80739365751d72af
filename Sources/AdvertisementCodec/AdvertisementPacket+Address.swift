extension AdvertisementPacket {
    /// The six bytes of ``address`` in the order written (`A4:C1:38:…` → `[0xA4, 0xC1, 0x38, …]`),
    /// as the encrypted formats put it in their nonces.
    public func addressBytes() throws(AdvertisementError) -> [UInt8] {
        try Self.addressBytes(address)
    }

    /// The six bytes of an `AA:BB:CC:DD:EE:FF` address.
    public static func addressBytes(_ address: String) throws(AdvertisementError) -> [UInt8] {
        let parts = address.split(separator: ":", omittingEmptySubsequences: false)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(6)
        for part in parts {
            guard part.utf8.count == 2, let byte = UInt8(part, radix: 16) else { break }
            bytes.append(byte)
        }
        guard parts.count == 6, bytes.count == 6 else {
            throw .malformed("the address \"\(address.prefix(40))\" is not six hex bytes separated by colons")
        }
        return bytes
    }
}
