import CDBus
import TestSupport
import Testing
@testable import DBus

/// Randomised marshalling checks without a daemon: random typed values go through libdbus'
/// wire format (`dbus_message_marshal` / `dbus_message_demarshal`) and must come back equal;
/// corrupted wire bytes must be rejected or decoded, never crash.
@Suite struct MarshalPropertyTests {
    static func randomType(_ r: inout SeededRandom, depth: Int) -> DBusType {
        let basics: [DBusType] = [.byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double,
                                  .string, .objectPath, .signature]
        if depth > 3 { return basics[r.below(basics.count)] }
        switch r.below(16) {
        case 12: return .array(randomType(&r, depth: depth + 1))
        case 13: return .dictionary(key: basics[r.below(basics.count)], value: randomType(&r, depth: depth + 1))
        case 14: return .struct((0..<(1 + r.below(3))).map { _ in randomType(&r, depth: depth + 1) })
        case 15: return .variant
        default: return basics[r.below(basics.count)]
        }
    }

    static func randomValue(_ t: DBusType, _ r: inout SeededRandom, depth: Int) -> DBusValue {
        switch t {
        case .byte: return .byte(UInt8(truncatingIfNeeded: r.next()))
        case .boolean: return .boolean(r.below(2) == 1)
        case .int16: return .int16(Int16(truncatingIfNeeded: r.next()))
        case .uint16: return .uint16(UInt16(truncatingIfNeeded: r.next()))
        case .int32: return .int32(Int32(truncatingIfNeeded: r.next()))
        case .uint32: return .uint32(UInt32(truncatingIfNeeded: r.next()))
        case .int64: return .int64(Int64(bitPattern: r.next()))
        case .uint64: return .uint64(r.next())
        case .double: return .double(Double(Int64(bitPattern: r.next())) / 1024)
        case .string:
            let pool = ["", "a", "héllo", "✓ ok", "org.bluez", "0000180f-0000-1000-8000-00805f9b34fb"]
            return .string(pool[r.below(pool.count)])
        case .objectPath:
            let pool: [DBusObjectPath] = ["/", "/org", "/org/bluez/hci0", "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service0010"]
            return .objectPath(pool[r.below(pool.count)])
        case .signature:
            let pool = ["", "s", "a{sv}", "a{oa{sa{sv}}}", "(iay)"]
            return .signature(pool[r.below(pool.count)])
        case .unixFD: return .int32(0)  // not generated
        case .variant:
            return .variant(randomValue(randomType(&r, depth: depth + 1), &r, depth: depth + 1))
        case let .array(e):
            return .array(element: e, (0..<r.below(4)).map { _ in randomValue(e, &r, depth: depth + 1) })
        case let .dictionary(k, v):
            return .dictionary(key: k, value: v, (0..<r.below(4)).map { _ in
                DBusDictEntry(randomValue(k, &r, depth: depth + 1), randomValue(v, &r, depth: depth + 1))
            })
        case let .struct(fields):
            return .struct(fields.map { randomValue($0, &r, depth: depth + 1) })
        }
    }

    /// Marshals `values` into a signal, serialises it to wire bytes and parses them back.
    static func wireRoundTrip(_ values: [DBusValue]) throws -> (bytes: [UInt8], back: [DBusValue]) {
        let msg = try MessageBuilder.signal(path: "/t", interface: "org.example.T", member: "M", arguments: values)
        defer { dbus_message_unref(msg) }
        dbus_message_set_serial(msg, 1)
        var raw: UnsafeMutablePointer<CChar>?
        var len: Int32 = 0
        guard dbus_message_marshal(msg, &raw, &len) != 0, let raw else { throw DBusError.outOfMemory }
        defer { dbus_free(raw) }
        let bytes = raw.withMemoryRebound(to: UInt8.self, capacity: Int(len)) { Array(UnsafeBufferPointer(start: $0, count: Int(len))) }
        return (bytes, try decode(bytes) ?? [])
    }

    /// Parses wire bytes (libdbus validates them); `nil` if libdbus rejects them.
    static func decode(_ bytes: [UInt8]) throws -> [DBusValue]? {
        let msg = bytes.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { dbus_message_demarshal($0.baseAddress, Int32(buf.count), nil) }
        }
        guard let msg else { return nil }
        defer { dbus_message_unref(msg) }
        return try DBusMessage(copying: msg).body
    }

    @Test func randomValuesSurviveTheWireFormat() throws {
        var r = SeededRandom(seed: 0x6761_7474_326D_7174)
        for i in 0..<400 {
            let values = (0..<(1 + r.below(3))).map { _ in Self.randomValue(Self.randomType(&r, depth: 0), &r, depth: 0) }
            let (_, back) = try Self.wireRoundTrip(values)
            #expect(back == values, "case \(i): \(values.map(\.signature))")
        }
    }

    @Test func corruptedWireBytesNeverCrash() throws {
        var r = SeededRandom(seed: 42)
        var rejected = 0, accepted = 0
        for _ in 0..<300 {
            let values = [Self.randomValue(Self.randomType(&r, depth: 0), &r, depth: 0), .properties(["k": .bytes([1, 2])])]
            var (bytes, _) = try Self.wireRoundTrip(values)
            for _ in 0..<(1 + r.below(4)) {
                bytes[16 + r.below(bytes.count - 16)] = UInt8(truncatingIfNeeded: r.next())
            }
            if let decoded = try? Self.decode(bytes) {
                accepted += 1
                for v in decoded { try v.validate() }  // what libdbus accepts is a valid value for us
            } else {
                rejected += 1
            }
        }
        #expect(rejected + accepted == 300)
        #expect(rejected > 0)
    }
}

extension SeededRandom {
    /// A number in `0..<n` (by remainder: the sequences of the seeds in these tests stay as they were).
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
