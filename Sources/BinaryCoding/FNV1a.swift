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

    /// Bytes in memory, the common case: a loop over the buffer (the generic `Sequence` version
    /// below, called from another module unspecialised, allocated for every byte through its
    /// iterator: a command's payload digest was a quarter of the bridge's mallocs per command).
    public mutating func add(_ bytes: UnsafeRawBufferPointer) {
        var v = value
        for b in bytes {
            v ^= UInt64(b)
            v = v &* 0x0000_0100_0000_01b3
        }
        value = v
    }

    public mutating func add(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { add($0) }
    }

    public mutating func add(_ text: String.UTF8View) {
        if text.withContiguousStorageIfAvailable({ add(UnsafeRawBufferPointer($0)) }) != nil { return }
        for b in text { add(b) }
    }

    public mutating func add<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        for b in bytes { add(b) }
    }
}
