/// Appends bytes; every multi-byte write names its endianness.
public struct ByteWriter: Sendable {
    public var bytes: [UInt8]

    @inlinable
    public init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inlinable public var count: Int { bytes.count }

    @inlinable
    public mutating func reserveCapacity(_ n: Int) { bytes.reserveCapacity(n) }

    @inlinable
    public mutating func writeUInt8(_ value: UInt8) { bytes.append(value) }

    @inlinable
    public mutating func writeInteger<T: FixedWidthInteger>(_ value: T, endianness: Endianness) {
        let size = MemoryLayout<T>.size
        switch endianness {
        case .big:
            var shift = (size - 1) * 8
            while shift >= 0 { bytes.append(UInt8(truncatingIfNeeded: value >> shift)); shift -= 8 }
        case .little:
            var shift = 0
            while shift < size * 8 { bytes.append(UInt8(truncatingIfNeeded: value >> shift)); shift += 8 }
        }
    }

    @inlinable
    public mutating func writeBytes<C: Collection>(_ data: C) where C.Element == UInt8 {
        bytes.append(contentsOf: data)
    }

    /// Overwrites one byte already written (for back-patched headers).
    @inlinable
    public mutating func setByte(_ value: UInt8, at index: Int) { bytes[index] = value }

    /// Hands the bytes over, leaving the writer empty.
    @inlinable
    public mutating func take() -> [UInt8] {
        defer { bytes = [] }
        return bytes
    }
}
