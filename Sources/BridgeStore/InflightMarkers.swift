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

    /// The mapping; read and written only under `state`'s lock.
    private let base: UnsafeMutableRawPointer
    /// Which slot holds which marker, and which slots are free (bit i set: slot i is taken).
    private struct State {
        var slots: [Key: Int] = [:]
        var taken: UInt64 = 0
    }
    private let state = Mutex(State())

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
    /// slot or every slot is taken. Written straight into the slot: no allocation but the key's.
    func mark(_ m: InflightMessage) -> Bool {
        let length = m.topic.utf8.count + (m.responseTopic?.utf8.count ?? 0) + (m.correlationData?.count ?? 0) + m.payload.count
        guard Self.fixedBody + length <= Self.slotSize - Self.slotHeader else { return false }
        let key = Key(topic: m.topic, digest: m.digest)
        return state.withLock { state in
            let i: Int
            if let kept = state.slots[key] {
                i = kept
            } else {
                guard state.taken != UInt64.max >> (64 - Self.slotCount) else { return false }
                i = (~state.taken).trailingZeroBitCount
            }
            let s = slot(i)
            s.storeBytes(of: 0, as: UInt32.self)
            let count = Self.write(m, to: s + Self.slotHeader)
            s.storeBytes(of: UInt32(count).littleEndian, toByteOffset: 4, as: UInt32.self)
            s.storeBytes(of: Self.checksum(UnsafeRawBufferPointer(start: s + Self.slotHeader, count: count)).littleEndian,
                         toByteOffset: 8, as: UInt64.self)
            s.storeBytes(of: UInt32(1).littleEndian, as: UInt32.self)  // in use, last
            state.slots[key] = i
            state.taken |= 1 << UInt64(i)
            return true
        }
    }

    /// Removes the marker of `topic` and `digest`; false when none is kept here.
    func clear(topic: String, digest: Int64) -> Bool {
        state.withLock { state in
            guard let i = state.slots.removeValue(forKey: Key(topic: topic, digest: digest)) else { return false }
            slot(i).storeBytes(of: 0, as: UInt32.self)
            state.taken &= ~(1 << UInt64(i))
            return true
        }
    }

    /// Removes and returns the markers left in the file (by a process that died while handling
    /// them); the slots whose body does not check out are dropped.
    func take() -> [InflightMessage] {
        state.withLock { state in
            var left: [InflightMessage] = []
            for i in 0..<Self.slotCount {
                let s = slot(i)
                guard UInt32(littleEndian: s.loadUnaligned(as: UInt32.self)) == 1 else { continue }
                s.storeBytes(of: 0, as: UInt32.self)
                let count = Int(UInt32(littleEndian: s.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
                guard count <= Self.slotSize - Self.slotHeader else { continue }
                let body = UnsafeRawBufferPointer(start: s + Self.slotHeader, count: count)
                guard Self.checksum(body) == UInt64(littleEndian: s.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
                      let m = Self.decode(Array(body)) else { continue }
                left.append(m)
            }
            state = State()
            return left
        }
    }

    /// Removes every marker (a clean stop).
    func clearAll() {
        state.withLock { state in
            for i in 0..<Self.slotCount { slot(i).storeBytes(of: 0, as: UInt32.self) }
            state = State()
        }
    }

    // MARK: The body: digest, date, packet id, then topic, response topic, correlation data and
    // payload, each a length (UInt32, `UInt32.max`: none) and its bytes; little-endian.

    /// The digest, date and packet id before the four length-prefixed fields.
    static let fixedBody = 24 + 4 * 4

    /// Writes `m`'s body at `to` (room checked by the caller); returns its length.
    static func write(_ m: InflightMessage, to: UnsafeMutableRawPointer) -> Int {
        var at = 0
        func put<T: FixedWidthInteger>(_ v: T) {
            to.storeBytes(of: v.littleEndian, toByteOffset: at, as: T.self)
            at += MemoryLayout<T>.size
        }
        func put(_ bytes: UnsafeRawBufferPointer?) {
            guard let bytes else { return put(UInt32.max) }
            put(UInt32(bytes.count))
            if let b = bytes.baseAddress { (to + at).copyMemory(from: b, byteCount: bytes.count) }
            at += bytes.count
        }
        put(UInt64(bitPattern: m.digest))
        put(m.at.timeIntervalSince1970.bitPattern)
        put(UInt64(bitPattern: Int64(m.packetID ?? -1)))
        var topic = m.topic
        topic.withUTF8 { put(UnsafeRawBufferPointer($0)) }
        if var r = m.responseTopic { r.withUTF8 { put(UnsafeRawBufferPointer($0)) } } else { put(nil) }
        if let c = m.correlationData { c.withUnsafeBytes { put($0) } } else { put(nil) }
        m.payload.withUnsafeBytes { put($0) }
        return at
    }

    /// FNV-1a of the body's bytes.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h = FNV1a()
        h.add(bytes)
        return h.value
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
