/// Errors raised while reading bytes.
public enum ByteReaderError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Fewer bytes remain than a read needs. `offset` is where the read started
    /// (relative to the reader's start), `needed` how many bytes it wanted.
    case insufficientData(offset: Int, needed: Int, available: Int)

    public var description: String {
        switch self {
        case let .insufficientData(offset, needed, available):
            return "need \(needed) byte(s) at offset \(offset), only \(available) left"
        }
    }
}

/// Byte order of a multi-byte integer on the wire.
public enum Endianness: Sendable, Equatable {
    case big
    case little
}

/// A cursor over bytes. Every multi-byte read names its endianness; a read that
/// cannot be satisfied throws and leaves the reader where it was.
public struct ByteReader: Sendable {
    @usableFromInline let storage: ArraySlice<UInt8>
    @usableFromInline let start: Int
    @usableFromInline let end: Int
    /// Absolute index into `storage` of the next byte.
    @usableFromInline var index: Int

    @inlinable
    public init(_ bytes: [UInt8]) {
        storage = bytes[...]
        start = 0
        end = bytes.count
        index = 0
    }

    @inlinable
    public init(_ bytes: ArraySlice<UInt8>) {
        storage = bytes
        start = bytes.startIndex
        end = bytes.endIndex
        index = bytes.startIndex
    }

    /// Offset of the next byte, relative to the start of the input.
    @inlinable public var offset: Int { index - start }
    /// Bytes not yet read.
    @inlinable public var remaining: Int { end - index }
    @inlinable public var isAtEnd: Bool { index >= end }

    @inlinable
    func ensure(_ count: Int) throws(ByteReaderError) {
        if count > end - index || count < 0 {
            throw .insufficientData(offset: index - start, needed: count, available: end - index)
        }
    }

    @inlinable
    public func peekUInt8() -> UInt8? {
        index < end ? storage[index] : nil
    }

    @inlinable
    public mutating func readUInt8() throws(ByteReaderError) -> UInt8 {
        try ensure(1)
        defer { index += 1 }
        return storage[index]
    }

    @inlinable
    public mutating func readInteger<T: FixedWidthInteger>(
        endianness: Endianness, as: T.Type = T.self
    ) throws(ByteReaderError) -> T {
        let size = MemoryLayout<T>.size
        try ensure(size)
        var value: T = 0
        if endianness == .big {
            for i in 0..<size { value = (value << 8) | T(truncatingIfNeeded: storage[index + i]) }
        } else {
            var i = size - 1
            while i >= 0 { value = (value << 8) | T(truncatingIfNeeded: storage[index + i]); i -= 1 }
        }
        index += size
        return value
    }

    /// Reads `count` bytes as a slice of the underlying storage (no copy).
    @inlinable
    public mutating func readBytes(count: Int) throws(ByteReaderError) -> ArraySlice<UInt8> {
        try ensure(count)
        defer { index += count }
        return storage[index..<(index + count)]
    }

    /// Reads everything that is left.
    @inlinable
    public mutating func readRemaining() -> ArraySlice<UInt8> {
        defer { index = end }
        return storage[index..<end]
    }

    @inlinable
    public mutating func skip(_ count: Int) throws(ByteReaderError) {
        try ensure(count)
        index += count
    }
}
