/// Reassembles the packets of one notify characteristic into messages (spec gopro.md §3).
///
/// A value type: keep one per connection and characteristic (messages on different
/// characteristics may interleave). Feed every notification value in arrival order to
/// `append(_:)`; it returns the message when its last packet arrives, `nil` while more are needed,
/// and throws when a packet is rejected:
/// - a continuation with no message in progress (`.strayContinuation`) is ignored;
/// - a continuation counter that skips or repeats a value drops the message
///   (`.continuationGap`, `.continuationDuplicate`). Counters are checked only once a message's
///   continuation headers actually count (`0x80, 0x81, …`); a sender whose continuations are all
///   `0x80` (both SDKs) is accepted. Once the sender has been seen counting (a message whose
///   continuations went past `0x80`, e.g. a camera), every later message is held to counting, so
///   a repeated first continuation (`80 80`) is a `.continuationDuplicate` even when it would
///   fill the message exactly;
/// - more bytes than the header announced drop the message (`.overrun`);
/// - a reserved (`0b011xxxxx`) or cut-short start header is rejected (`.reservedHeader`,
///   `.truncatedHeader`), an empty value too (`.emptyPacket`).
/// A start packet that arrives while a message is in progress abandons that message, as both SDKs
/// do; `abandonedMessages` counts them.
public struct GoProAssembler: Sendable {
    private var buffer: [UInt8] = []
    private var expectedLength = 0
    private var inProgress = false
    private var continuationCount = 0
    private var flatSoFar = true
    private var countingSoFar = true
    private var senderCounts = false
    /// How many partial messages were abandoned because a new start packet arrived.
    public private(set) var abandonedMessages = 0

    public init() {}

    /// True when no message is in progress.
    public var isIdle: Bool { !inProgress }
    /// Payload bytes still missing from the message in progress (0 when idle).
    public var missingBytes: Int { inProgress ? expectedLength - buffer.count : 0 }

    /// Whether this sender has been seen counting its continuations (`0x80, 0x81, …`); kept
    /// across ``reset()`` (same device).
    public var senderIsCounting: Bool { senderCounts }

    /// Forgets any message in progress (e.g. after a reconnect).
    public mutating func reset() {
        inProgress = false
        buffer.removeAll(keepingCapacity: true)
    }

    /// Feeds one packet (§3); returns the complete message or `nil` if more packets are needed.
    public mutating func append(_ packet: [UInt8]) throws(GoProError) -> [UInt8]? {
        try packet.withUnsafeBufferPointer { (p: UnsafeBufferPointer<UInt8>) throws(GoProError) -> [UInt8]? in
            try append(unsafe: p)
        }
    }

    /// Feeds one packet given as a slice; see `append(_:)`.
    public mutating func append(_ packet: ArraySlice<UInt8>) throws(GoProError) -> [UInt8]? {
        try packet.withUnsafeBufferPointer { (p: UnsafeBufferPointer<UInt8>) throws(GoProError) -> [UInt8]? in
            try append(unsafe: p)
        }
    }

    private mutating func append(unsafe packet: UnsafeBufferPointer<UInt8>) throws(GoProError) -> [UInt8]? {
        guard let header = packet.first else { throw .emptyPacket }
        if header & 0x80 != 0 {
            return try appendContinuation(header: header, payload: UnsafeBufferPointer(rebasing: packet[1...]))
        }
        if inProgress {
            abandonedMessages &+= 1
            inProgress = false
        }
        let length: Int
        let headerLength: Int
        switch header >> 5 {
        case 0:
            length = Int(header & 0x1F)
            headerLength = 1
        case 1:
            guard packet.count >= 2 else { throw .truncatedHeader(needed: 2, available: packet.count) }
            length = Int(header & 0x1F) << 8 | Int(packet[1])
            headerLength = 2
        case 2:
            guard packet.count >= 3 else { throw .truncatedHeader(needed: 3, available: packet.count) }
            length = Int(packet[1]) << 8 | Int(packet[2])
            headerLength = 3
        default:
            throw .reservedHeader(byte: header)
        }
        let payloadCount = packet.count - headerLength
        guard payloadCount <= length else { throw .overrun(declared: length, received: payloadCount) }
        if payloadCount == length {
            return Array(packet[headerLength...])
        }
        buffer.removeAll(keepingCapacity: true)
        buffer.reserveCapacity(length)
        buffer.append(contentsOf: packet[headerLength...])
        expectedLength = length
        inProgress = true
        continuationCount = 0
        flatSoFar = true
        countingSoFar = true
        return nil
    }

    private mutating func appendContinuation(
        header: UInt8, payload: UnsafeBufferPointer<UInt8>
    ) throws(GoProError) -> [UInt8]? {
        guard inProgress else { throw .strayContinuation(header: header) }
        let counter = header & 0x0F
        let countingExpected = UInt8(continuationCount & 0x0F)
        // A sender known to count may not repeat 0x80 (that is a duplicate, not a flat sender).
        let flat = flatSoFar && counter == 0 && !(senderCounts && continuationCount > 0)
        let counting = countingSoFar && counter == countingExpected
        if !flat && !counting {
            inProgress = false
            if continuationCount > 0 && counter == UInt8((continuationCount - 1) & 0x0F) {
                throw .continuationDuplicate(counter: counter)
            }
            throw .continuationGap(expected: countingExpected, received: counter)
        }
        flatSoFar = flat
        countingSoFar = counting
        if counting, counter != 0 { senderCounts = true }
        continuationCount += 1
        let received = buffer.count + payload.count
        guard received <= expectedLength else {
            inProgress = false
            throw .overrun(declared: expectedLength, received: received)
        }
        buffer.append(contentsOf: payload)
        guard received == expectedLength else { return nil }
        inProgress = false
        let message = buffer
        buffer = []
        return message
    }
}
