import CEpoll
import Glibc
import Synchronization

/// The process' code and data mapped page by page as they are touched, not 64 KiB at a time
/// (docs/benchmarks.md, "Memory against the floor (issue 24 §3)").
///
/// On a fault in a file-backed mapping the kernel also maps the pages around it that are in the
/// page cache: 64 KiB of "fault-around" (with large page-cache folios, as on 6.18, more). A binary's resident code is then the number of such windows that hold *any*
/// code that ran, several times the code that ran. The kernel skips fault-around for a mapping
/// registered with userfaultfd for write protection; the registration here is asynchronous (the
/// kernel resolves a write fault itself, nobody reads the descriptor) and nothing is ever
/// write-protected (`UFFDIO_WRITEPROTECT` is never called), so it changes nothing else: a write to
/// a private data page copies it as before. Where userfaultfd cannot do this (a kernel before
/// 6.7, a seccomp filter that refuses the system call, as Docker's default one does) nothing
/// changes and the outcome says why.
public enum CodePages {
    public enum Outcome: Equatable, Sendable {
        /// This many file mappings of this many bytes are mapped on demand.
        case applied(mappings: Int, bytes: Int)
        /// Not available here; the `errno` of the system call that refused.
        case unavailable(errno: Int32)
    }

    /// Registers the private file mappings of the executable and of the shared libraries loaded so
    /// far, and unmaps the read-only pages mapped until then (the first call; later calls return the
    /// first outcome). Call it first thing in `main`.
    @discardableResult
    public static func mapOnDemand() -> Outcome { outcome }

    private static let outcome: Outcome = {
        guard descriptor >= 0 else { return .unavailable(errno: -descriptor) }
        var mappings = 0, bytes = 0
        for mapping in fileMappings() where register(start: mapping.start, length: mapping.length) == 0 {
            mappings += 1
            bytes += mapping.length
            if mapping.droppable { dropPages(start: mapping.start, length: mapping.length) }
        }
        applied.store(true, ordering: .releasing)
        return .applied(mappings: mappings, bytes: bytes)
    }()

    /// Gives back the code and constants mapped so far: the pages of every read-only file mapping
    /// without private copies are unmapped, as ``mapOnDemand()`` does at its start; those that run
    /// again come back one by one. Call it where a phase of start-up ends (the configuration read,
    /// Bluetooth found, the store opened, the broker connected): what only that phase ran — the
    /// YAML parser, the migrations, the self-check — then no longer adds to what the next phase
    /// maps, and the process' peak is the largest phase plus what stays, not their sum
    /// (docs/benchmarks.md, "Start-up's pages given back"). The pages stay in the page cache (a
    /// fault brings one back without reading the disk). Does nothing unless ``mapOnDemand()``
    /// applied (debug builds, older kernels: their pages would come back 64 KiB at a time).
    /// Returns the bytes of the mappings whose pages were dropped.
    @discardableResult
    public static func releaseMappedPages() -> Int {
        guard applied.load(ordering: .acquiring) else { return 0 }
        return dropPages(of: fileMappings())
    }

    /// Drops the pages of the `droppable` ones of `mappings`; the bytes of those mappings.
    static func dropPages(of mappings: [Mapping]) -> Int {
        var bytes = 0
        for mapping in mappings where mapping.droppable {
            dropPages(start: mapping.start, length: mapping.length)
            bytes += mapping.length
        }
        return bytes
    }

    /// Whether ``mapOnDemand()`` registered the process' mappings.
    private static let applied = Atomic<Bool>(false)

    /// Unmaps the pages of a read-only mapping (code, constants) that were mapped before the
    /// registration (the dynamic loader's, the libraries' and the runtime's start-up, with
    /// fault-around); the ones that are touched again come back one by one. Only for mappings
    /// without private copies: a writable mapping may hold written pages, and so may a read-only
    /// one (RELRO data after relocation, text relocations, a debugger's breakpoints), which this
    /// would throw away; those are left alone.
    static func dropPages(start: UInt, length: Int) {
        _ = madvise(UnsafeMutableRawPointer(bitPattern: start), length, MADV_DONTNEED)
    }

    /// The userfaultfd, kept open for the life of the process (closing it ends every
    /// registration), or -errno.
    private static let descriptor: Int32 = reactor_uffd_open_wp_async()

    /// Registers one whole mapping: 0 or the errno.
    static func register(start: UInt, length: Int) -> Int32 {
        guard descriptor >= 0 else { return -descriptor }
        return -reactor_uffd_register_wp(descriptor, UInt64(start), UInt64(length))
    }

    struct Mapping: Equatable {
        var start: UInt
        var length: Int
        var path: String
        /// `r-xp` or `r--p`: code or constants, not writable.
        var readOnly = false
        /// Its pages that are private copies (smaps' `Anonymous:`), -1 when not given.
        var anonymousKiB = -1

        /// Read-only and known to hold no private copy: its pages can be unmapped and read again
        /// from the file (``dropPages(start:length:)``).
        var droppable: Bool { readOnly && anonymousKiB == 0 }
    }

    /// The readable private mappings of files (the executable's code, read-only data and data;
    /// the shared libraries'), from /proc/self/smaps (at most 8 MiB of it is read).
    static func fileMappings() -> [Mapping] {
        parseMaps(readProcFile("/proc/self/smaps", limit: 8 << 20))
    }

    /// /proc/self/maps or smaps: `start-end perms offset dev inode path` lines → the readable
    /// private mappings of files, with smaps' `Anonymous: N kB` line of each; a line that does not
    /// parse is skipped.
    static func parseMaps(_ text: String) -> [Mapping] {
        var result: [Mapping] = []
        var lastKept = false
        for line in text.split(separator: "\n") {
            if line.hasPrefix("Anonymous:") {
                let value = line.split(separator: " ", omittingEmptySubsequences: true)
                if lastKept, value.count == 3, let kib = Int(value[1]), kib >= 0 { result[result.count - 1].anonymousKiB = kib }
                continue
            }
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[0].contains("-") else { continue }
            lastKept = false
            guard fields.count == 6 else { continue }
            let range = fields[0].split(separator: "-")
            let perms = fields[1]
            let path = fields[5].drop { $0 == " " }
            guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16),
                  end > start, end - start <= UInt(Int.max), perms.count == 4, perms.hasPrefix("r"),
                  perms.hasSuffix("p"), path.hasPrefix("/") else { continue }
            result.append(Mapping(start: start, length: Int(end - start), path: String(path), readOnly: !perms.contains("w")))
            lastKept = true
        }
        return result
    }

    private static func readProcFile(_ path: String, limit: Int) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while bytes.count < limit {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
