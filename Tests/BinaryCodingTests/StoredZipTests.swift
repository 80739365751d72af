import Testing
@testable import BinaryCoding

/// The stored-zip writer the bridge's `backup` uses (a reader's view is in the end-to-end test:
/// Python's `zipfile` opens it and the SQLite copy inside).
@Suite struct StoredZipTests {
    @Test func crc32IsZipsCheckValue() {
        #expect(StoredZip.crc32(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(StoredZip.crc32([]) == 0)
    }

    @Test func anArchiveHasItsHeadersDataAndEndRecord() throws {
        let zip = try StoredZip.archive([("a.txt", Array("hello".utf8)), ("b/c.json", Array("{}".utf8))],
                                        date: .init(year: 2026, month: 11, day: 27, hour: 18, minute: 30, second: 10))
        var r = ByteReader(zip)
        #expect(try r.readInteger(endianness: .little, as: UInt32.self) == 0x0403_4B50)
        // The end record: two entries, the directory right after the data.
        let end = Array(zip.suffix(22))
        #expect(end.prefix(4) == [0x50, 0x4B, 0x05, 0x06] && end[8] == 2 && end[10] == 2)
        let local = 2 * 30 + "a.txt".utf8.count + 5 + "b/c.json".utf8.count + 2
        let directoryOffset = Int(end[16]) | Int(end[17]) << 8 | Int(end[18]) << 16 | Int(end[19]) << 24
        #expect(directoryOffset == local)
        #expect(zip.count == local + 2 * 46 + "a.txt".utf8.count + "b/c.json".utf8.count + 22)
        let hello = Array("hello".utf8)
        #expect(zip[(30 + 5)..<(30 + 10)].elementsEqual(hello))
    }

    @Test func namesOutsideTheArchiveAreRefused() {
        #expect(throws: StoredZip.Failure.badName("../x")) { try StoredZip.archive([("../x", [1])]) }
        #expect(throws: StoredZip.Failure.badName("/etc/x")) { try StoredZip.archive([("/etc/x", [1])]) }
        #expect(throws: StoredZip.Failure.badName("")) { try StoredZip.archive([("", [1])]) }
    }
}
