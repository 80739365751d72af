/// A ZIP archive of stored (uncompressed) entries, as `unzip`, Python's `zipfile` and
/// zigbee2mqtt's backup readers take: local headers, the data, the central directory, the end
/// record (PKWARE APPNOTE 6.3.10 §4.3; version 1.0, no data descriptor, no ZIP64). Pure: the
/// bytes in, the archive out. The bridge's `backup` request makes one (docs/bridge-api.md).
public enum StoredZip {
    /// The most an archive may hold without ZIP64: each entry and the whole under 4 GiB, fewer
    /// than 65 535 entries.
    public static let maxBytes = Int(UInt32.max) - 1

    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The archive would be larger than ZIP without ZIP64 allows, or have too many entries.
        case tooLarge
        /// A name that is empty, longer than 65 535 bytes, absolute or with a `..` part.
        case badName(String)

        public var description: String {
            switch self {
            case .tooLarge: return "the archive would be larger than 4 GiB or hold 65535 entries or more"
            case let .badName(n): return "'\(n)' is not a relative file name inside the archive"
            }
        }
    }

    /// The archive of `entries` in order, every entry dated `date` (MS-DOS date and time: local
    /// fields as given, 1980…2107).
    public static func archive(_ entries: [(name: String, data: [UInt8])], date: DOSDate = DOSDate()) throws(Failure) -> [UInt8] {
        guard entries.count < 0xFFFF else { throw .tooLarge }
        var total = 22
        for e in entries { total += 30 + 46 + 2 * e.name.utf8.count + e.data.count }
        guard total <= maxBytes else { throw .tooLarge }
        var out = ByteWriter(capacity: total)
        var central = ByteWriter()
        for e in entries {
            let name = Array(e.name.utf8)
            guard !name.isEmpty, name.count <= 0xFFFF, !e.name.hasPrefix("/"), !e.name.split(separator: "/").contains("..") else {
                throw .badName(e.name)
            }
            let crc = crc32(e.data)
            let size = UInt32(e.data.count)  // below maxBytes (checked above)
            let offset = UInt32(out.count)
            // Local file header.
            out.writeInteger(UInt32(0x0403_4B50), endianness: .little)
            header(&out, crc: crc, size: size, nameLength: name.count, date: date)
            out.writeInteger(UInt16(0), endianness: .little)  // extra field length
            out.writeBytes(name)
            out.writeBytes(e.data)
            // Its central directory record.
            central.writeInteger(UInt32(0x0201_4B50), endianness: .little)
            central.writeInteger(UInt16(0x0314), endianness: .little)  // made by: Unix, 2.0
            header(&central, crc: crc, size: size, nameLength: name.count, date: date)
            central.writeInteger(UInt16(0), endianness: .little)  // extra field length
            central.writeInteger(UInt16(0), endianness: .little)  // comment length
            central.writeInteger(UInt16(0), endianness: .little)  // disk number
            central.writeInteger(UInt16(0), endianness: .little)  // internal attributes
            central.writeInteger(UInt32(0o100600) << 16, endianness: .little)  // external: a regular file, 0600
            central.writeInteger(offset, endianness: .little)
            central.writeBytes(name)
        }
        let directoryOffset = UInt32(out.count)
        out.writeBytes(central.bytes)
        out.writeInteger(UInt32(0x0605_4B50), endianness: .little)
        out.writeInteger(UInt16(0), endianness: .little)  // this disk
        out.writeInteger(UInt16(0), endianness: .little)  // the directory's disk
        out.writeInteger(UInt16(entries.count), endianness: .little)
        out.writeInteger(UInt16(entries.count), endianness: .little)
        out.writeInteger(UInt32(central.count), endianness: .little)
        out.writeInteger(directoryOffset, endianness: .little)
        out.writeInteger(UInt16(0), endianness: .little)  // comment length
        return out.take()
    }

    /// The fields a local header and a central record share, from "version needed" to the name's length.
    static func header(_ w: inout ByteWriter, crc: UInt32, size: UInt32, nameLength: Int, date: DOSDate) {
        w.writeInteger(UInt16(10), endianness: .little)  // version needed: 1.0 (stored)
        w.writeInteger(UInt16(0x0800), endianness: .little)  // flags: names are UTF-8
        w.writeInteger(UInt16(0), endianness: .little)  // method: stored
        w.writeInteger(date.time, endianness: .little)
        w.writeInteger(date.date, endianness: .little)
        w.writeInteger(crc, endianness: .little)
        w.writeInteger(size, endianness: .little)  // compressed size
        w.writeInteger(size, endianness: .little)  // uncompressed size
        w.writeInteger(UInt16(nameLength), endianness: .little)
    }

    /// An MS-DOS date and time (2-second resolution), as ZIP stores them.
    public struct DOSDate: Sendable, Equatable {
        public var date: UInt16
        public var time: UInt16
        /// 1980-01-01 00:00 unless given; fields out of range are clamped.
        public init(year: Int = 1980, month: Int = 1, day: Int = 1, hour: Int = 0, minute: Int = 0, second: Int = 0) {
            let y = UInt16(min(max(year, 1980), 2107) - 1980), mo = UInt16(min(max(month, 1), 12)), d = UInt16(min(max(day, 1), 31))
            date = y << 9 | mo << 5 | d
            time = UInt16(min(max(hour, 0), 23)) << 11 | UInt16(min(max(minute, 0), 59)) << 5 | UInt16(min(max(second, 0), 59) / 2)
        }
    }

    /// CRC-32 (ISO-HDLC: polynomial 0xEDB88320 reflected, initial and final XOR 0xFFFFFFFF), as ZIP uses.
    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = crcTable[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

    static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }
}
