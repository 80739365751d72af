/// 64-bit FNV-1a, fed byte by byte: tells one byte string from another cheaply (not a
/// cryptographic digest). The bridge's redelivery cache and its crash markers key on it.
public struct FNV1a: Sendable {
    public private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    public init() {}

    public mutating func add(_ byte: UInt8) {
        value ^= UInt64(byte)
        value = value &* 0x0000_0100_0000_01b3
    }

    /// Mixes in a whole 64-bit word in one step (a length, say), the way a byte is.
    public mutating func add(word: UInt64) {
        value ^= word
        value = value &* 0x0000_0100_0000_01b3
    }

    public mutating func add<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        for b in bytes { add(b) }
    }
}
