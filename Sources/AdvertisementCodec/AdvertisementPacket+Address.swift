extension AdvertisementPacket {
    /// The six bytes of ``address`` in the order written (`A4:C1:38:…` → `[0xA4, 0xC1, 0x38, …]`),
    /// as the encrypted formats put it in their nonces.
    public func addressBytes() throws(AdvertisementError) -> [UInt8] {
        try Self.addressBytes(address)
    }

    /// The six bytes of an `AA:BB:CC:DD:EE:FF` address.
    public static func addressBytes(_ address: String) throws(AdvertisementError) -> [UInt8] {
        // Read from the UTF-8 bytes in place: this runs for every encrypted advertisement.
        var bytes = [UInt8](repeating: 0, count: 6)
        func parse(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
            guard text.count == 17 else { return false }
            for i in 0..<17 {
                let c = text[i]
                if i % 3 == 2 {
                    if c != UInt8(ascii: ":") { return false }
                    continue
                }
                let digit: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
                default: return false
                }
                bytes[i / 3] = bytes[i / 3] << 4 | digit
            }
            return true
        }
        let ok = address.utf8.withContiguousStorageIfAvailable(parse) ?? Array(address.utf8).withUnsafeBufferPointer(parse)
        guard ok else { throw .malformed("the address \"\(address.prefix(40))\" is not six hex bytes separated by colons") }
        return bytes
    }
}
