import GoProCodec
import TestSupport
import Testing

@Suite struct AssemblerTests {
    /// A 60-byte message as the SDK writes it: extended-13 start + 3 continuations.
    let message = (0..<60).map { UInt8($0) }

    @Test func dripFedPacketsCompleteOnlyAtTheLast() throws {
        let packets = try GoProPacketizer.packetize(message).arrays
        #expect(packets.count == 4)
        var a = GoProAssembler()
        for p in packets.dropLast() {
            #expect(try a.append(p) == nil)
            #expect(!a.isIdle)
        }
        #expect(a.missingBytes == packets.last!.count - 1)
        #expect(try a.append(packets.last!) == message)
        #expect(a.isIdle)
    }

    @Test func generalHeaderSinglePacket() throws {
        var a = GoProAssembler()
        #expect(try a.append([0x02, 0x01, 0x00]) == [0x01, 0x00])
        #expect(try a.append([0x00]) == [])
    }

    @Test func extended16StartIsAcceptedOnReceive() throws {
        var a = GoProAssembler()
        #expect(try a.append([0x40, 0x00, 0x03, 0xAA]) == nil)
        #expect(try a.append([0x80, 0xBB, 0xCC]) == [0xAA, 0xBB, 0xCC])
    }

    @Test func countingSenderWrapsAfter16Continuations() throws {
        let long = (0..<400).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let packets = try GoProPacketizer.packetize(long, continuation: .counting).arrays
        #expect(packets.count > 17)
        #expect(packets[17][0] == 0x80)  // the 17th continuation wraps to 0
        #expect(try Fixtures.reassemble(packets) == [long])
    }

    @Test func counterGapDropsTheMessage() throws {
        let packets = try GoProPacketizer.packetize(message, continuation: .counting).arrays
        var a = GoProAssembler()
        _ = try a.append(packets[0])
        _ = try a.append(packets[1])  // 0x80
        #expect(throws: GoProError.continuationGap(expected: 1, received: 2)) { try a.append(packets[3]) }  // 0x82
        #expect(a.isIdle)
        // What is left of the dropped message is stray.
        #expect(throws: GoProError.strayContinuation(header: 0x81)) { try a.append(packets[2]) }
    }

    @Test func counterDuplicateDropsTheMessage() throws {
        let packets = try GoProPacketizer.packetize(message, continuation: .counting).arrays
        var a = GoProAssembler()
        _ = try a.append(packets[0])
        _ = try a.append(packets[1])
        _ = try a.append(packets[2])  // 0x81: the sender counts
        #expect(throws: GoProError.continuationDuplicate(counter: 1)) { try a.append(packets[2]) }
        #expect(a.isIdle)
    }

    @Test func duplicateOfTheFirstContinuationIsCaughtOnceTheSenderCounts() throws {
        // 0x80, 0x80 looks like a flat sender; the following 0x81 proves it counts.
        let packets = try GoProPacketizer.packetize(message, continuation: .counting).arrays
        var a = GoProAssembler()
        _ = try a.append(packets[0])
        _ = try a.append(packets[1])
        #expect(try a.append([0x80] + packets[1].dropFirst()) == nil)  // repeated 0x80: flat so far
        // 0x81 at the third continuation fits neither style: one packet was repeated.
        #expect(throws: GoProError.continuationDuplicate(counter: 1)) { try a.append(packets[2]) }
        #expect(a.isIdle)
    }

    @Test func repeatedFirstContinuationThatFillsTheMessageIsCaughtOnceTheSenderCounted() throws {
        // 56 bytes: extended-13 start (18) + 0x80 (19) + 0x81 (19). Repeating 0x80 in place of 0x81
        // fills the message exactly: accepted as flat from an unknown sender, a duplicate from one
        // already seen counting.
        let m = (0..<56).map { UInt8($0) }
        let packets = try GoProPacketizer.packetize(m, continuation: .counting).arrays
        #expect(packets.count == 3)
        let repeated = [packets[0], packets[1], packets[1]]
        var fresh = GoProAssembler()
        #expect(!fresh.senderIsCounting)
        #expect(try fresh.append(repeated[0]) == nil)
        #expect(try fresh.append(repeated[1]) == nil)
        #expect(try fresh.append(repeated[2])?.count == 56)  // indistinguishable from a flat sender
        var a = GoProAssembler()
        for p in packets.dropLast() { #expect(try a.append(p) == nil) }
        #expect(try a.append(packets[2]) == m)
        #expect(a.senderIsCounting)
        a.reset()
        #expect(a.senderIsCounting)  // kept: same device
        #expect(try a.append(repeated[0]) == nil)
        #expect(try a.append(repeated[1]) == nil)
        #expect(throws: GoProError.continuationDuplicate(counter: 0)) { try a.append(repeated[2]) }
        #expect(a.isIdle)
        // The next message still decodes.
        for p in packets.dropLast() { #expect(try a.append(p) == nil) }
        #expect(try a.append(packets[2]) == m)
    }

    @Test func flatSenderStaysAcceptedAcrossMessages() throws {
        let packets = try GoProPacketizer.packetize((0..<60).map { UInt8($0) }).arrays
        var a = GoProAssembler()
        for _ in 0..<3 {
            for p in packets.dropLast() { #expect(try a.append(p) == nil) }
            #expect(try a.append(packets.last!)?.count == 60)
        }
        #expect(!a.senderIsCounting)
    }

    @Test func flatSenderIsAccepted() throws {
        let packets = try GoProPacketizer.packetize((0..<300).map { UInt8($0 & 0xFF) }).arrays
        #expect(packets.dropFirst().allSatisfy { $0[0] == 0x80 })
        #expect(try Fixtures.reassemble(packets).first?.count == 300)
    }

    @Test func firstContinuationMustBeZeroForACountingSender() throws {
        var a = GoProAssembler()
        _ = try a.append([0x20, 0x05, 1, 2])
        #expect(throws: GoProError.continuationGap(expected: 0, received: 3)) { try a.append([0x83, 3, 4, 5]) }
    }

    @Test func strayContinuationIsIgnoredWithAnError() throws {
        var a = GoProAssembler()
        #expect(throws: GoProError.strayContinuation(header: 0x80)) { try a.append([0x80, 0x30, 0x30]) }
        #expect(a.isIdle)
        #expect(try a.append([0x02, 0x01, 0x00]) == [0x01, 0x00])
    }

    @Test func overrunIsRejected() throws {
        var a = GoProAssembler()
        #expect(throws: GoProError.overrun(declared: 1, received: 2)) { try a.append([0x01, 0xAA, 0xBB]) }
        _ = try a.append([0x20, 0x03, 0x01])
        #expect(throws: GoProError.overrun(declared: 3, received: 4)) { try a.append([0x80, 0x02, 0x03, 0x04]) }
        #expect(a.isIdle)
    }

    @Test func reservedAndTruncatedHeadersAreRejected() throws {
        var a = GoProAssembler()
        #expect(throws: GoProError.reservedHeader(byte: 0x60)) { try a.append([0x60, 0x01]) }
        #expect(throws: GoProError.reservedHeader(byte: 0x7F)) { try a.append([0x7F]) }
        #expect(throws: GoProError.truncatedHeader(needed: 2, available: 1)) { try a.append([0x20]) }
        #expect(throws: GoProError.truncatedHeader(needed: 3, available: 2)) { try a.append([0x40, 0x00]) }
        #expect(throws: GoProError.emptyPacket) { try a.append([]) }
        #expect(a.isIdle)
    }

    @Test func newStartAbandonsTheMessageInProgress() throws {
        var a = GoProAssembler()
        _ = try a.append([0x20, 0x10, 1, 2, 3])
        #expect(try a.append([0x02, 0x01, 0x00]) == [0x01, 0x00])
        #expect(a.abandonedMessages == 1)
        #expect(a.isIdle)
    }

    @Test func interleavedCharacteristicsUseSeparateAssemblers() throws {
        let m1 = (0..<50).map { UInt8($0) }, m2 = (100..<140).map { UInt8($0) }
        let p1 = try GoProPacketizer.packetize(m1).arrays, p2 = try GoProPacketizer.packetize(m2).arrays
        var a1 = GoProAssembler(), a2 = GoProAssembler()
        var got1: [UInt8]?, got2: [UInt8]?
        for i in 0..<max(p1.count, p2.count) {
            if i < p1.count, let m = try a1.append(p1[i]) { got1 = m }
            if i < p2.count, let m = try a2.append(p2[i]) { got2 = m }
        }
        #expect(got1 == m1)
        #expect(got2 == m2)
    }

    @Test func slicesAreAcceptedAsPackets() throws {
        let packets = try GoProPacketizer.packetize(message)
        var a = GoProAssembler()
        var out: [UInt8]?
        for p in packets { out = try a.append(p) ?? out }
        #expect(out == message)
    }
}

@Suite struct PacketizerPropertyTests {
    @Test func randomMessagesRoundTripInEveryStyle() throws {
        var rng = SeededRandom(seed: 0x60_90)
        for _ in 0..<300 {
            let length = Int.random(in: 0...1200, using: &rng)
            let m = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            for style in [GoProContinuationStyle.flat, .counting] {
                let packets = try GoProPacketizer.packetize(m, continuation: style)
                #expect(packets.allSatisfy { $0.count <= 20 && !$0.isEmpty })
                #expect(packets.dropFirst().allSatisfy { $0.first! & 0x80 != 0 })
                #expect(try Fixtures.reassemble(packets.arrays) == [m])
                // The packets carry the message plus exactly one header byte per packet (+1 for extended-13).
                #expect(packets.bytes.count == m.count + packets.count + 1)
            }
            if length <= 31 {
                #expect(try Fixtures.reassemble(GoProPacketizer.packetize(m, startHeader: .general).arrays) == [m])
            } else {
                #expect(throws: GoProError.messageTooLong(length: length, maximum: 31)) {
                    try GoProPacketizer.packetize(m, startHeader: .general)
                }
            }
        }
    }

    @Test func maximumLengthAndBeyond() throws {
        let m = [UInt8](repeating: 0x5A, count: 8191)
        let packets = try GoProPacketizer.packetize(m)
        #expect(packets.count == 1 + (8191 - 18 + 18) / 19)
        #expect(try Fixtures.reassemble(packets.arrays) == [m])
        #expect(throws: GoProError.messageTooLong(length: 8192, maximum: 8191)) {
            try GoProPacketizer.packetize(m + [0])
        }
    }

    @Test func randomGarbageNeverCrashesTheAssembler() throws {
        var rng = SeededRandom(seed: 42)
        var a = GoProAssembler()
        var completed = 0
        for _ in 0..<20_000 {
            let n = Int.random(in: 0...24, using: &rng)
            let p = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if let m = try? a.append(p) { completed += 1; #expect(m.count <= 65535) }
        }
        #expect(completed > 0)
    }
}
