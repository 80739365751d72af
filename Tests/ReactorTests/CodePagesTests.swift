import Foundation
@testable import Reactor
import Testing

// Serialized: mapOnDemand registers every private file mapping of the process at that moment,
// which would include the control mapping of the other test.
@Suite("CodePages: file mappings without fault-around", .serialized)
struct CodePagesTests {
    /// The `Rss` (KiB) and `VmFlags` of this process' mapping that starts at `start`.
    static func smapsEntry(startingAt start: UInt) throws -> (rssKiB: Int, flags: [Substring]) {
        let text = try procFile("/proc/self/smaps")
        let prefix = String(start, radix: 16) + "-"
        var inside = false
        var rss = -1
        for line in text.split(separator: "\n") {
            if let first = line.first, first.isHexDigit, line.contains("-"), line.split(separator: " ").count >= 5 {
                inside = line.hasPrefix(prefix)
            } else if inside, line.hasPrefix("Rss:") {
                rss = Int(line.split(separator: " ")[1]) ?? -1
            } else if inside, line.hasPrefix("VmFlags:") {
                return (rss, line.split(separator: " ").dropFirst().map { $0 })
            }
        }
        throw HarnessFailure("no mapping at 0x\(String(start, radix: 16)) in /proc/self/smaps")
    }

    /// A /proc file read to its end (it has no size to read up to).
    static func procFile(_ path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw HarnessFailure("cannot open \(path)") }
        defer { try? handle.close() }
        return String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
    }

    struct HarnessFailure: Error { let message: String; init(_ m: String) { message = m } }

    /// A file of `size` bytes of 0x5A written now (so all of it is in the page cache), mapped
    /// read-only and private like a binary's code, for `body` (its start address and the mapping).
    static func withFileMapping<T>(size: Int, _ body: (UInt, UnsafeMutableRawPointer) throws -> T) throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("codepages-\(UUID().uuidString)").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x5A, count: size)))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw HarnessFailure("open \(path): \(errno)") }
        defer { close(fd) }
        // Written back before it is mapped: fault-around skips a page-cache folio it cannot lock,
        // and writeback locks them (a busy machine's flusher could take the control's pages).
        fsync(fd)
        guard let base = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
            throw HarnessFailure("mmap: \(errno)")
        }
        defer { munmap(base, size) }
        return try body(UInt(bitPattern: base), base)
    }

    /// A 1 MiB file mapping, one byte in its middle read.
    static func mapFileAndTouchOneByte(register: Bool) throws -> (rssKiB: Int, flags: [Substring]) {
        let size = 1 << 20
        return try withFileMapping(size: size) { (start: UInt, base: UnsafeMutableRawPointer) throws in
            if register { #expect(CodePages.register(start: start, length: size) == 0) }
            #expect(base.load(fromByteOffset: size / 2, as: UInt8.self) == 0x5A)
            return try smapsEntry(startingAt: start)
        }
    }

    @Test("a registered mapping gets the page that was read, an unregistered one the pages around it too")
    func onePagePerFault() throws {
        // (No control on the unregistered mapping: whether the kernel faults around depends on
        // the page cache's state — writeback, folio locks — and it missed on a loaded CI run.)
        let registered = try Self.mapFileAndTouchOneByte(register: true)
        #expect(registered.flags.contains("uw"), "VmFlags: \(registered.flags)")
        #expect(registered.rssKiB == 4, "one byte read mapped \(registered.rssKiB) KiB")
    }

    @Test("a registered read-only mapping's pages mapped before are dropped; read again, one page comes back")
    func dropsPagesMappedBefore() throws {
        let size = 256 << 10
        try Self.withFileMapping(size: size) { (start: UInt, base: UnsafeMutableRawPointer) throws in
            for offset in stride(from: 0, to: size, by: 4096) { #expect(base.load(fromByteOffset: offset, as: UInt8.self) == 0x5A) }
            #expect(try Self.smapsEntry(startingAt: start).rssKiB == size / 1024)
            #expect(CodePages.register(start: start, length: size) == 0)
            CodePages.dropPages(start: start, length: size)
            #expect(try Self.smapsEntry(startingAt: start).rssKiB == 0)
            #expect(base.load(fromByteOffset: size / 2, as: UInt8.self) == 0x5A)
            #expect(try Self.smapsEntry(startingAt: start).rssKiB == 4)
        }
    }

    @Test("releasing pages: a read-only mapping without private copies loses its pages, one with copies or a writable one keeps them")
    func releasesOnlyDroppableMappings() throws {
        let size = 64 << 10
        try Self.withFileMapping(size: size) { (start: UInt, base: UnsafeMutableRawPointer) throws in
            #expect(CodePages.register(start: start, length: size) == 0)
            func touchAll() { for offset in stride(from: 0, to: size, by: 4096) { #expect(base.load(fromByteOffset: offset, as: UInt8.self) == 0x5A) } }
            touchAll()
            #expect(try Self.smapsEntry(startingAt: start).rssKiB == size / 1024)
            // Not droppable: private copies (or unknown), writable.
            let kept: [CodePages.Mapping] = [
                .init(start: start, length: size, path: "/x", readOnly: true, anonymousKiB: 4),
                .init(start: start, length: size, path: "/x", readOnly: true, anonymousKiB: -1),
                .init(start: start, length: size, path: "/x", readOnly: false, anonymousKiB: 0),
            ]
            #expect(CodePages.dropPages(of: kept) == 0)
            #expect(try Self.smapsEntry(startingAt: start).rssKiB == size / 1024)
            // This process never called mapOnDemand: releasing does nothing.
            #expect(CodePages.releaseMappedPages() == 0)
            #expect(try Self.smapsEntry(startingAt: start).rssKiB == size / 1024)
            let droppable = CodePages.Mapping(start: start, length: size, path: "/x", readOnly: true, anonymousKiB: 0)
            #expect(CodePages.dropPages(of: kept + [droppable]) == size)
            #expect(try Self.smapsEntry(startingAt: start).rssKiB == 0)
            // What is read again comes back page by page, with the file's content.
            touchAll()
            #expect(try Self.smapsEntry(startingAt: start).rssKiB == size / 1024)
        }
    }

    // mapOnDemand itself is not called in this process: it registers every file mapping of the
    // process and drops their pages under the other tests running in parallel (two fresh-clone
    // runs stalled for seconds). CodePagesCLITests checks it in a `gatt2mqtt` process.
    @Test("/proc/self/smaps: each kept mapping with its Anonymous line, none for a skipped one")
    func parsesSmaps() {
        let smaps = """
        55d0c0002000-55d0c0010000 r-xp 00002000 fe:00 12 /usr/bin/gatt2mqtt
        Size:                 56 kB
        Anonymous:             0 kB
        VmFlags: rd ex mr mw me
        55d0c0010000-55d0c0011000 rw-p 00010000 fe:00 12 /usr/bin/gatt2mqtt
        Anonymous:             4 kB
        7f0000000000-7f0000021000 rw-p 00000000 00:00 0
        Anonymous:           132 kB
        7f0000100000-7f0000200000 r-xp 00000000 fe:00 13 /lib/textrel.so
        Anonymous:            12 kB
        """
        #expect(CodePages.parseMaps(smaps) == [
            .init(start: 0x55d0c0002000, length: 0xe000, path: "/usr/bin/gatt2mqtt", readOnly: true, anonymousKiB: 0),
            .init(start: 0x55d0c0010000, length: 0x1000, path: "/usr/bin/gatt2mqtt", anonymousKiB: 4),
            .init(start: 0x7f0000100000, length: 0x100000, path: "/lib/textrel.so", readOnly: true, anonymousKiB: 12),
        ])
    }

    @Test("/proc/self/maps lines: only readable private mappings of files")
    func parsesMaps() {
        let maps = """
        55d0c0000000-55d0c0002000 r--p 00000000 fe:00 12 /usr/bin/gatt2mqtt
        55d0c0002000-55d0c0010000 r-xp 00002000 fe:00 12 /usr/bin/gatt2mqtt
        55d0c0010000-55d0c0011000 rw-p 00010000 fe:00 12 /usr/bin/gatt2mqtt
        7f0000000000-7f0000021000 rw-p 00000000 00:00 0
        7f0000100000-7f0000200000 r-xp 00000000 fe:00 13                     /opt/my lib/libx.so (deleted)
        7f0000200000-7f0000210000 ---p 00000000 fe:00 13                     /opt/my lib/libx.so (deleted)
        7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                      [vdso]
        7ffd00010000-7ffd00008000 r-xp 00000000 fe:00 14 /reversed
        zz-7ffd00020000 r-xp 00000000 fe:00 14 /bad
        7f0000300000-7f0000301000 r--s 00000000 fe:00 15 /dev/shm/shared
        not a line
        """
        #expect(CodePages.parseMaps(maps) == [
            .init(start: 0x55d0c0000000, length: 0x2000, path: "/usr/bin/gatt2mqtt", readOnly: true),
            .init(start: 0x55d0c0002000, length: 0xe000, path: "/usr/bin/gatt2mqtt", readOnly: true),
            .init(start: 0x55d0c0010000, length: 0x1000, path: "/usr/bin/gatt2mqtt"),
            .init(start: 0x7f0000100000, length: 0x100000, path: "/opt/my lib/libx.so (deleted)", readOnly: true),
        ])
    }
}
