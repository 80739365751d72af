/// A GATT UUID in BlueZ's form: 128-bit, lowercase (spec/bluez.md "find characteristics by UUID";
/// Core Specification Vol 3 Part B §2.5.1 for the Bluetooth Base UUID).
public struct BluetoothUUID: Sendable, Hashable, CustomStringConvertible {
    /// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lowercase.
    public let uuidString: String

    /// Parses `2A37` (16-bit), `0000FEA6` (32-bit), a 128-bit UUID with or without dashes, or
    /// GoPro's `GP-XXXX` (= `b5f9xxxx-aa8d-11e3-9046-0002a5d5c51b`, spec/gopro.md). Returns nil
    /// for anything else.
    public init?(_ text: String) {
        let t = String(String(text.drop(while: \.isWhitespace).reversed()).drop(while: \.isWhitespace).reversed()).lowercased()
        func isHex(_ s: Substring) -> Bool { !s.isEmpty && s.allSatisfy(\.isHexDigit) }
        if t.hasPrefix("gp-") {
            let h = t.dropFirst(3)
            guard h.count == 4, isHex(h) else { return nil }
            uuidString = "b5f9\(h)-aa8d-11e3-9046-0002a5d5c51b"
            return
        }
        let bare = t.hasPrefix("0x") ? t.dropFirst(2) : Substring(t)
        if bare.count == 4, isHex(bare) {
            uuidString = "0000\(bare)-0000-1000-8000-00805f9b34fb"
            return
        }
        if bare.count == 8, isHex(bare) {
            uuidString = "\(bare)-0000-1000-8000-00805f9b34fb"
            return
        }
        let hex = bare.filter { $0 != "-" }
        guard hex.count == 32, isHex(Substring(hex)) else { return nil }
        if bare.contains("-") {
            let parts = bare.split(separator: "-", omittingEmptySubsequences: false).map(\.count)
            guard parts == [8, 4, 4, 4, 12] else { return nil }
        }
        let a = Array(hex)
        uuidString = String(a[0..<8]) + "-" + String(a[8..<12]) + "-" + String(a[12..<16]) + "-"
            + String(a[16..<20]) + "-" + String(a[20..<32])
    }

    public var description: String { uuidString }
}
