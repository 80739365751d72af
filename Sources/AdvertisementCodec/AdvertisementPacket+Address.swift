extension AdvertisementPacket {
    /// The six bytes of ``address`` in the order written (`A4:C1:38:…` → `[0xA4, 0xC1, 0x38, …]`),
    /// as the encrypted formats put it in their nonces.
    public func addressBytes() throws(AdvertisementError) -> [UInt8] {
        try Self.addressBytes(address)
    }

    /// The six bytes of an `AA:BB:CC:DD:EE:FF` address.
    public static func addressBytes(_ address: String) throws(AdvertisementError) -> [UInt8] {
        // Read from the UTF-8 view directly: this runs for every encrypted advertisement.
        var bytes = [UInt8](repeating: 0, count: 6)
        var ok = address.utf8.count == 17
        if ok {
            var k = 0
            for (i, c) in address.utf8.enumerated() {
                if i % 3 == 2 {
                    if c != UInt8(ascii: ":") { ok = false; break }
                    continue
                }
                let digit: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
                default: ok = false; digit = 0
                }
                if !ok { break }
                bytes[k / 2] = bytes[k / 2] << 4 | digit
                k += 1
            }
        }
        guard ok else { throw .malformed("the address \"\(address.prefix(40))\" is not six hex bytes separated by colons") }
        return bytes
    }
}
