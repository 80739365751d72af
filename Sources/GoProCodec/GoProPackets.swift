/// The start header a packetizer writes (spec gopro.md §3). Extended-16 is deliberately absent:
/// the spec reserves it for camera → client messages.
public enum GoProStartHeader: Sendable, Equatable {
    /// `0b000LLLLL`: messages of 0–31 bytes. Cameras and GoPro's tutorials use it for short messages.
    case general
    /// `0b001LLLLL LLLLLLLL`: messages of 0–8191 bytes. What open-gopro always writes.
    case extended13
}

/// How continuation headers are numbered when packetizing (spec gopro.md §3).
public enum GoProContinuationStyle: Sendable, Equatable {
    /// Every continuation header is `0x80`, as both official SDKs write (field-proven).
    case flat
    /// `0x80, 0x81, …, 0x8F, 0x80, …`, the counter the spec describes.
    case counting
}

/// The packets of one message, stored back to back in one buffer (one allocation): packet `i`
/// is `bytes[i * packetSize ..< min((i + 1) * packetSize, bytes.count)]` (spec gopro.md §3).
public struct GoProPackets: RandomAccessCollection, Sendable, Equatable {
    /// All packets concatenated, headers included.
    public let bytes: [UInt8]
    /// The size of every packet but the last (20, §3).
    public let packetSize: Int

    public var startIndex: Int { 0 }
    public var endIndex: Int { (bytes.count + packetSize - 1) / packetSize }

    public subscript(position: Int) -> ArraySlice<UInt8> {
        let start = position * packetSize
        return bytes[start..<Swift.min(start + packetSize, bytes.count)]
    }

    /// The packets as separate arrays (convenient for tests and the CLI).
    public var arrays: [[UInt8]] { map { Array($0) } }
}

/// Splits messages into GATT packets (spec gopro.md §3): 20-byte packets, header included; one
/// start header, then one-byte continuation headers.
public enum GoProPacketizer {
    /// The packet size both SDKs write regardless of the negotiated MTU (§3).
    public static let packetSize = 20
    /// The longest message the extended-13 header can announce (§3).
    public static let maximumMessageLength = 8191

    /// Packetizes `message` for writing to the camera (§3). Defaults match open-gopro's writes:
    /// an extended-13 start header and flat `0x80` continuations. A `.general` header is only
    /// possible up to 31 bytes; longer messages throw `.messageTooLong`, as do messages over
    /// 8191 bytes (extended-16 is never written towards the camera).
    public static func packetize(
        _ message: [UInt8], startHeader: GoProStartHeader = .extended13, continuation: GoProContinuationStyle = .flat
    ) throws(GoProError) -> GoProPackets {
        try message.withUnsafeBufferPointer { (m: UnsafeBufferPointer<UInt8>) throws(GoProError) -> GoProPackets in
            try packetize(m, startHeader: startHeader, continuation: continuation)
        }
    }

    /// Packetizes bytes given as a slice; see `packetize(_:startHeader:continuation:)`.
    public static func packetize(
        _ message: ArraySlice<UInt8>, startHeader: GoProStartHeader = .extended13,
        continuation: GoProContinuationStyle = .flat
    ) throws(GoProError) -> GoProPackets {
        try message.withUnsafeBufferPointer { (m: UnsafeBufferPointer<UInt8>) throws(GoProError) -> GoProPackets in
            try packetize(m, startHeader: startHeader, continuation: continuation)
        }
    }

    static func packetize(
        _ message: UnsafeBufferPointer<UInt8>, startHeader: GoProStartHeader, continuation: GoProContinuationStyle
    ) throws(GoProError) -> GoProPackets {
        let length = message.count
        let headerLength: Int
        switch startHeader {
        case .general:
            guard length <= 31 else { throw .messageTooLong(length: length, maximum: 31) }
            headerLength = 1
        case .extended13:
            guard length <= maximumMessageLength else {
                throw .messageTooLong(length: length, maximum: maximumMessageLength)
            }
            headerLength = 2
        }
        let firstPayload = min(length, packetSize - headerLength)
        let rest = length - firstPayload
        let continuations = (rest + packetSize - 2) / (packetSize - 1)
        let total = headerLength + length + continuations
        var out = [UInt8]()
        out.reserveCapacity(total)
        switch startHeader {
        case .general: out.append(UInt8(length))
        case .extended13:
            out.append(0x20 | UInt8(length >> 8))
            out.append(UInt8(length & 0xFF))
        }
        out.append(contentsOf: message[0..<firstPayload])
        var offset = firstPayload
        var counter: UInt8 = 0
        while offset < length {
            out.append(continuation == .flat ? 0x80 : 0x80 | counter)
            counter = (counter + 1) & 0x0F
            let end = min(offset + packetSize - 1, length)
            out.append(contentsOf: message[offset..<end])
            offset = end
        }
        return GoProPackets(bytes: out, packetSize: packetSize)
    }
}
