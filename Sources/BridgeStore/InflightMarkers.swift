import BinaryCoding
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The crash markers of the messages being handled (``BridgeStore/markInflight(_:)``), in a small
/// file mapped into memory beside the database (`<database>-inflight`, mode 0600) instead of in
/// SQLite: a marker must outlive a crash of the bridge's process, not a power loss, and a store
/// into a shared file mapping is in the kernel's page cache the moment it is made — no system
/// call, no commit. Two SQLite statements per message (a marker written and removed, each a WAL
/// commit) were about a fifth of a command's CPU in the bridge benchmark (docs/benchmarks.md,
/// "Against the floor").
///
/// The file is ``slotCount`` slots of ``slotSize`` bytes after a header. A slot holds one
/// marker: its state word (1: in use), the body's length and FNV-1a checksum, then the body. A
/// marker that does not fit a slot (a very long topic, response topic or correlation data), or
/// finds every slot taken, is not kept here: the store writes it to its `inflight` table, as
/// before. At start, a slot in use with a body that does not check out (a crash in the middle of
/// writing it, a damaged file) is dropped; a file of another layout is cleared.
final class InflightMarkers: @unchecked Sendable {
    static let slotCount = 32
    static let slotSize = 4096
    static let headerSize = 64
    static let magic = Array("gatt2mqtt inflight v1\n".utf8)
    static var fileSize: Int { headerSize + slotCount * slotSize }
    /// A slot's state word, body length and checksum before the body.
    static let slotHeader = 16

    struct Key: Hashable {
        let topic: String
        let digest: Int64
    }

    /// The mapping; read and written only under `used`'s lock.
    private let base: UnsafeMutableRawPointer
    /// Which slot holds which marker.
    private let used = Mutex<[Key: Int]>([:])

    /// Maps (creating or resizing it) the file at `path`; nil when it cannot be opened or mapped
    /// (the store then keeps every marker in SQLite).
    init?(path: String) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        let fresh = Int(info.st_size) != Self.fileSize
        if fresh, ftruncate(fd, off_t(Self.fileSize)) != 0 { return nil }
        fchmod(fd, 0o600)
        guard let p = mmap(nil, Self.fileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), p != MAP_FAILED else { return nil }
        base = p
        let header = UnsafeRawBufferPointer(start: p, count: Self.magic.count)
        if fresh || !header.elementsEqual(Self.magic) {
            memset(p, 0, Self.fileSize)
            Self.magic.withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
    }

    deinit { munmap(base, Self.fileSize) }

    private func slot(_ i: Int) -> UnsafeMutableRawPointer { base + Self.headerSize + i * Self.slotSize }

    /// Keeps `m` (replacing a marker of the same topic and digest); false when it does not fit a
    /// slot or every slot is taken.
    func mark(_ m: InflightMessage) -> Bool {
        guard let body = Self.encode(m), body.count <= Self.slotSize - Self.slotHeader else { return false }
        let key = Key(topic: m.topic, digest: m.digest)
        return used.withLock { used in
            let taken = Set(used.values)
            guard let i = used[key] ?? (0..<Self.slotCount).first(where: { !taken.contains($0) }) else { return false }
            let s = slot(i)
            s.storeBytes(of: 0, as: UInt32.self)
            body.withUnsafeBytes { (s + Self.slotHeader).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            var sum = FNV1a()
            sum.add(body)
            s.storeBytes(of: UInt32(body.count).littleEndian, toByteOffset: 4, as: UInt32.self)
            s.storeBytes(of: sum.value.littleEndian, toByteOffset: 8, as: UInt64.self)
            s.storeBytes(of: UInt32(1).littleEndian, as: UInt32.self)  // in use, last
            used[key] = i
            return true
        }
    }

    /// Removes the marker of `topic` and `digest`; false when none is kept here.
    func clear(topic: String, digest: Int64) -> Bool {
        used.withLock { used in
            guard let i = used.removeValue(forKey: Key(topic: topic, digest: digest)) else { return false }
            slot(i).storeBytes(of: 0, as: UInt32.self)
            return true
        }
    }

    /// Removes and returns the markers left in the file (by a process that died while handling
    /// them); the slots whose body does not check out are dropped.
    func take() -> [InflightMessage] {
        used.withLock { used in
            var left: [InflightMessage] = []
            for i in 0..<Self.slotCount {
                let s = slot(i)
                guard UInt32(littleEndian: s.loadUnaligned(as: UInt32.self)) == 1 else { continue }
                s.storeBytes(of: 0, as: UInt32.self)
                let count = Int(UInt32(littleEndian: s.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
                guard count <= Self.slotSize - Self.slotHeader else { continue }
                let body = Array(UnsafeRawBufferPointer(start: s + Self.slotHeader, count: count))
                var sum = FNV1a()
                sum.add(body)
                guard sum.value == UInt64(littleEndian: s.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
                      let m = Self.decode(body) else { continue }
                left.append(m)
            }
            used = [:]
            return left
        }
    }

    /// Removes every marker (a clean stop).
    func clearAll() {
        used.withLock { used in
            for i in 0..<Self.slotCount { slot(i).storeBytes(of: 0, as: UInt32.self) }
            used = [:]
        }
    }

    // MARK: The body: digest, date, packet id, then topic, response topic, correlation data and
    // payload, each a length (UInt32, `UInt32.max`: none) and its bytes; little-endian.

    static func encode(_ m: InflightMessage) -> [UInt8]? {
        var w = ByteWriter()
        w.writeInteger(UInt64(bitPattern: m.digest), endianness: .little)
        w.writeInteger(m.at.timeIntervalSince1970.bitPattern, endianness: .little)
        w.writeInteger(UInt64(bitPattern: Int64(m.packetID ?? -1)), endianness: .little)
        for field in [Array(m.topic.utf8), m.responseTopic.map { Array($0.utf8) }, m.correlationData, m.payload] {
            guard let field else {
                w.writeInteger(UInt32.max, endianness: .little)
                continue
            }
            guard field.count <= slotSize else { return nil }
            w.writeInteger(UInt32(field.count), endianness: .little)
            w.writeBytes(field)
        }
        return w.bytes
    }

    static func decode(_ body: [UInt8]) -> InflightMessage? {
        var r = ByteReader(body)
        guard let digest = try? r.readInteger(endianness: .little, as: UInt64.self), let at = try? r.readInteger(endianness: .little, as: UInt64.self),
              let packetID = try? r.readInteger(endianness: .little, as: UInt64.self) else { return nil }
        var fields: [[UInt8]?] = []
        for _ in 0..<4 {
            guard let count = try? r.readInteger(endianness: .little, as: UInt32.self) else { return nil }
            if count == UInt32.max {
                fields.append(nil)
                continue
            }
            guard let bytes = try? r.readBytes(count: Int(count)) else { return nil }
            fields.append(Array(bytes))
        }
        guard let topicBytes = fields[0], let topic = String(validating: topicBytes, as: UTF8.self) else { return nil }
        let id = Int64(bitPattern: packetID)
        var m = InflightMessage(topic: topic, payload: [], packetID: id < 0 ? nil : Int(id),
                                responseTopic: fields[1].flatMap { String(validating: $0, as: UTF8.self) },
                                correlationData: fields[2], at: Date(timeIntervalSince1970: Double(bitPattern: at)))
        m.digest = Int64(bitPattern: digest)
        m.payload = fields[3] ?? []
        return m
    }
}
