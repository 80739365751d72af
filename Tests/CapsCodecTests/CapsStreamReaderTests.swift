import BinaryCoding
import TestSupport
import Testing

@testable import CapsCodec

@Suite struct CapsStreamReaderTests {
    func randomStream(seed: UInt64, objects: Int) throws -> (caps: [Caps], bytes: [UInt8]) {
        var g = SeededRandom(seed: seed)
        var caps = [Caps]()
        var bytes = [UInt8]()
        for _ in 0..<objects {
            let c = Generate.caps(&g)
            caps.append(c)
            bytes += try c.encoded()
        }
        return (caps, bytes)
    }

    @Test func dripFeedingOneByteAtATime() throws {
        let (caps, bytes) = try randomStream(seed: 7, objects: 40)
        var r = CapsStreamReader()
        var got = [Caps]()
        for b in bytes {
            r.append(CollectionOfOne(b))
            while let c = try r.next() { got.append(c) }
        }
        #expect(got == caps)
        #expect(r.bufferedByteCount == 0)
        #expect(r.offset == bytes.count)
    }

    @Test(arguments: [1 as UInt64, 2, 3])
    func randomChunkSizes(seed: UInt64) throws {
        let (caps, bytes) = try randomStream(seed: seed * 101, objects: 60)
        var g = SeededRandom(seed: seed)
        var r = CapsStreamReader()
        var got = [Caps]()
        var i = 0
        while i < bytes.count {
            let n = min(bytes.count - i, [1, 2, 3, 20, 500, 4096].randomElement(using: &g)!)
            got += try r.feed(bytes[i..<(i + n)])
            i += n
        }
        #expect(got == caps)
    }

    @Test func allObjectsAtOnce() throws {
        let (caps, bytes) = try randomStream(seed: 9, objects: 100)
        var r = CapsStreamReader()
        #expect(try r.feed(bytes) == caps)
    }

    @Test func badSizeIsReportedFromTheHeaderAlone() throws {
        var r = CapsStreamReader(sizeLimit: 1000)
        #expect(try r.feed([0, 0, 3]).isEmpty)
        #expect(throws: CapsError.malformed(.sizeAboveLimit(1001, limit: 1000), offset: 0)) { try r.feed([0xE9]) }
        var small = CapsStreamReader()
        #expect(throws: CapsError.malformed(.sizeTooSmall(5), offset: 0)) { try small.feed([0, 0, 0, 5]) }
        var version = CapsStreamReader()
        #expect(throws: CapsError.malformed(.unsupportedVersion(4), offset: 4)) { try version.feed([0, 0, 0, 9, 4]) }
    }

    @Test func defaultLimitIsFourMiB() throws {
        var r = CapsStreamReader()
        #expect(r.sizeLimit == 4 * 1024 * 1024)
        #expect(try r.feed([0x00, 0x40, 0x00, 0x00, 5]).isEmpty)  // exactly 4 MiB: accepted, incomplete
        var over = CapsStreamReader()
        #expect(throws: CapsError.self) { try over.feed([0x00, 0x40, 0x00, 0x01]) }
    }

    @Test func errorsAreStickyUntilResetAndCarryStreamOffsets() throws {
        let good = try Caps([.string("ok")]).encoded()
        var bad = good
        bad[4] = 7
        var r = CapsStreamReader()
        #expect(try r.feed(good + good + bad).count == 2, "complete objects come first")
        #expect(throws: CapsError.malformed(.unsupportedVersion(7), offset: good.count * 2 + 4)) { try r.feed([]) }
        #expect(throws: CapsError.self) { try r.feed(good) }
        r.reset()
        #expect(try r.feed(good) == [[.string("ok")]])
    }

    @Test func objectsBeforeAnErrorInTheSameChunkAreNotLost() throws {
        // Found by fuzzing (Fuzz/CapsStream): a good object followed, in one chunk, by a header
        // with an oversized length.
        let good = try Caps([.string("ok")]).encoded()
        var r = CapsStreamReader(sizeLimit: 1000)
        #expect(try r.feed(good + [0x65, 0x6E, 0x74, 0x53]) == [[.string("ok")]])
        #expect(r.failure == .malformed(.sizeAboveLimit(0x656E_7453, limit: 1000), offset: good.count))
        #expect(throws: CapsError.malformed(.sizeAboveLimit(0x656E_7453, limit: 1000), offset: good.count)) { try r.feed([]) }
    }

    @Test func malformedContentInsideACompleteObjectIsAnError() throws {
        var r = CapsStreamReader()
        #expect(throws: CapsError.malformed(.unknownTypeCode(0x78), offset: 6)) { try r.feed(Hex.decode("0000000805017801")) }
    }

    @Test func clampsTheLimit() {
        #expect(CapsStreamReader(sizeLimit: 0).sizeLimit == 6)
        #expect(CapsStreamReader(sizeLimit: .max).sizeLimit == Int(UInt32.max))
    }
}

@Suite struct CapsDecodePrefixTests {
    @Test func returnsTheObjectAndBytesUsedOrNilWhileIncomplete() throws {
        let a = try Caps([.uint32(1)]).encoded()
        let b = try Caps([.string("two")]).encoded()
        let both = a + b
        let first = try #require(try Caps.decodePrefix(of: both[...]))
        #expect(first.caps == [.uint32(1)] && first.consumed == a.count)
        let second = try #require(try Caps.decodePrefix(of: both[a.count...], baseOffset: a.count))
        #expect(second.caps == [.string("two")] && second.consumed == b.count)
        for n in 0..<a.count { #expect(try Caps.decodePrefix(of: a[..<n]) == nil) }
        #expect(throws: CapsError.malformed(.sizeTooSmall(2), offset: 10)) { try Caps.decodePrefix(of: [0, 0, 0, 2][...], baseOffset: 10) }
    }
}
