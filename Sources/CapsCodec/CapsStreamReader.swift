/// Pulls complete Caps objects out of a byte stream cut at arbitrary points (spec
/// rokid-caps.md §4.3, §4.5): append chunks as they arrive (one byte or many objects at a
/// time), then call ``next()`` until it returns nil.
///
/// Bounded: an object whose declared size is 5 or less or above ``sizeLimit`` (default
/// 4 MiB, §3.4) is a protocol error, detected from its first 4 bytes. Errors are sticky: once
/// ``next()`` has thrown a malformed error the stream cannot be resynchronised (the format has
/// no framing), so it throws the same error until ``reset()`` (the link should be reset too).
/// Error offsets count bytes from the start of the stream. One reader belongs to one link.
public struct CapsStreamReader: Sendable {
    /// Largest accepted object, in bytes (6...UInt32.max).
    public let sizeLimit: Int
    private var buffer: [UInt8] = []
    private var head = 0
    /// Stream offset of `buffer[0]`.
    private var dropped = 0
    private var storedFailure: CapsError?

    /// - Parameter sizeLimit: largest accepted object; clamped to 6...UInt32.max.
    public init(sizeLimit: Int = Caps.defaultSizeLimit) {
        self.sizeLimit = min(max(sizeLimit, 6), Int(UInt32.max))
    }

    /// Bytes received but not yet returned as objects.
    public var bufferedByteCount: Int { buffer.count - head }

    /// Stream offset of the next object (bytes consumed so far).
    public var offset: Int { dropped + head }

    /// Appends received bytes. Call ``next()`` afterwards.
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if head > 0 && head == buffer.count {
            dropped += head
            head = 0
            buffer.removeAll(keepingCapacity: true)
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete object, or nil until more bytes arrive. Throws
    /// ``CapsError/malformed(_:offset:)`` on a protocol error (and keeps throwing it).
    public mutating func next() throws(CapsError) -> Caps? {
        if let storedFailure { throw storedFailure }
        guard buffer.count - head >= 4 else { return nil }
        let base = dropped + head
        let limit = sizeLimit
        let result: (caps: Caps, consumed: Int)
        do {
            result = try buffer.withUnsafeBufferPointer { (all) throws(CapsError) -> (caps: Caps, consumed: Int) in
                try CapsParser.decodePrefix(UnsafeBufferPointer(rebasing: all[head...]), sizeLimit: limit, base: base)
            }
        } catch {
            if error.isNeedMoreData { return nil }
            storedFailure = error
            throw error
        }
        head += result.consumed
        compact()
        return result.caps
    }

    /// Appends `bytes` and returns every object they complete, in order. When a malformed
    /// object follows complete ones in the same chunk, the complete ones are returned and the
    /// error is thrown by the next call (errors are sticky), so no object is lost.
    public mutating func feed<C: Collection>(_ bytes: C) throws(CapsError) -> [Caps] where C.Element == UInt8 {
        append(bytes)
        var out = [Caps]()
        do {
            while let caps = try next() { out.append(caps) }
        } catch {
            if out.isEmpty { throw error }
        }
        return out
    }

    /// The protocol error that stopped the stream, if any (cleared by ``reset()``).
    public var failure: CapsError? { storedFailure }

    /// Drops everything buffered and any error; the next byte starts a new stream at offset 0.
    public mutating func reset() {
        buffer.removeAll(keepingCapacity: false)
        head = 0
        dropped = 0
        storedFailure = nil
    }

    private mutating func compact() {
        if head == buffer.count {
            dropped += head
            head = 0
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 16)
        } else if head >= 4096 && head * 2 >= buffer.count {
            dropped += head
            buffer.removeFirst(head)
            head = 0
        }
    }
}
