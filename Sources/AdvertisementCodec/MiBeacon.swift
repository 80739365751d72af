import BinaryCoding

// Xiaomi MiBeacon: service data of the 16-bit UUID 0xFE95. The frame: frame control (2 bytes,
// little endian: bit 3 encrypted, bit 4 MAC included, bit 5 capability included, bit 6 object
// included, bit 7 mesh, bits 12-15 the version), product id (2), frame counter (1), the MAC
// (6, reversed) when included, the capability byte (and an I/O capability byte when its bit 5
// is set) when included, then objects: id (2, little endian), length (1), value.
// Encrypted v4/v5: the objects are AES-CCM ciphertext followed by a 3-byte extended counter and
// a 4-byte MIC; nonce = MAC reversed (6) + product id (2) + frame counter (1) + extended
// counter (3), associated data 0x11. Legacy (v2/v3) encryption is not supported.

/// Xiaomi MiBeacon: decoding (``decode(_:key:address:)``) and encoding (``encode(productID:frameCounter:address:includeMAC:objects:encryption:)``).
public enum MiBeacon {
    public static let uuid: UInt16 = 0xFE95
    /// ``uuid`` as BlueZ keys service data (computed once: the lookup is on every advertisement).
    static let serviceDataKey = AdvertisementPacket.uuid(uuid)

    /// One object: its id and value bytes. The static constructors build the common ones.
    public struct Object: Sendable, Equatable {
        public var id: UInt16
        public var bytes: [UInt8]
        public init(id: UInt16, bytes: [UInt8]) {
            self.id = id
            self.bytes = bytes
        }

        private static func le(_ v: Int, _ size: Int) -> [UInt8] { (0..<size).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        private static func tenths(_ x: Double, signed: Bool, _ what: String) throws(AdvertisementError) -> [UInt8] {
            try BTHome.littleEndian(x, times: 10, size: 2, signed: signed, what: "MiBeacon \(what)")
        }

        /// 0x1004, °C in tenths (sint16).
        public static func temperature(_ celsius: Double) throws(AdvertisementError) -> Object {
            Object(id: 0x1004, bytes: try tenths(celsius, signed: true, "temperature"))
        }
        /// 0x1006, % in tenths (uint16).
        public static func humidity(_ percent: Double) throws(AdvertisementError) -> Object {
            Object(id: 0x1006, bytes: try tenths(percent, signed: false, "humidity"))
        }
        /// 0x100D, both in tenths.
        public static func temperatureAndHumidity(_ celsius: Double, _ percent: Double) throws(AdvertisementError) -> Object {
            Object(id: 0x100D, bytes: try tenths(celsius, signed: true, "temperature") + tenths(percent, signed: false, "humidity"))
        }
        /// 0x100A, % (uint8).
        public static func battery(_ percent: UInt8) -> Object { Object(id: 0x100A, bytes: [percent]) }
        /// 0x1007, lx (uint24).
        public static func illuminance(_ lux: UInt32) -> Object { Object(id: 0x1007, bytes: le(Int(lux & 0xFF_FFFF), 3)) }
        /// 0x1008, % (uint8).
        public static func moisture(_ percent: UInt8) -> Object { Object(id: 0x1008, bytes: [percent]) }
        /// 0x1009, µS/cm (uint16).
        public static func conductivity(_ value: UInt16) -> Object { Object(id: 0x1009, bytes: le(Int(value), 2)) }
        /// 0x1010, mg/m³ in hundredths (uint16).
        public static func formaldehyde(_ value: Double) throws(AdvertisementError) -> Object {
            Object(id: 0x1010, bytes: try BTHome.littleEndian(value, times: 100, size: 2, signed: false, what: "MiBeacon formaldehyde"))
        }
    }

    /// The key and extended counter of an encrypted (v5) frame.
    public struct Encryption: Sendable {
        public var key: [UInt8]
        /// The 3-byte extended counter (the frame counter is its low byte's neighbour: the
        /// replay counter is `extendedCounter << 8 | frameCounter`).
        public var extendedCounter: UInt32
        public init(key: [UInt8], extendedCounter: UInt32) {
            self.key = key
            self.extendedCounter = extendedCounter
        }
    }

    // MARK: decoding

    /// Reads MiBeacon service data (the bytes after the UUID) sent from `address`. The frame
    /// counter is the ``Reading/packetID``; for an encrypted frame, `extended counter << 8 |
    /// frame counter` is the ``Reading/counter``.
    public static func decode(_ data: [UInt8], key: [UInt8]?, address: String) throws(AdvertisementError) -> Reading {
        guard data.count >= 5 else { throw .malformed("a MiBeacon frame has at least 5 bytes, this one \(data.count)") }
        let control = UInt16(data[0]) | UInt16(data[1]) << 8
        let version = control >> 12
        guard control & 0x0080 == 0 else { throw .unsupported("MiBeacon mesh frames") }
        guard version >= 2 else { throw .unsupported("MiBeacon version \(version) (2 and later only)") }
        let frameCounter = data[4]
        var i = 5
        // The sender's address, reversed as the frame carries it (the nonce's first 6 bytes).
        let macReversed: [UInt8] = try AdvertisementPacket.addressBytes(address).reversed()
        if control & 0x0010 != 0 {
            guard data.count >= i + 6 else { throw .malformed("the MiBeacon frame says it carries the MAC and ends before it") }
            guard data[i..<(i + 6)].elementsEqual(macReversed) else {
                throw .malformed("the MAC in the MiBeacon frame is not the sender's address \(address)")
            }
            i += 6
        }
        if control & 0x0020 != 0 {
            guard data.count > i else { throw .malformed("the MiBeacon frame says it carries a capability byte and ends before it") }
            let capability = data[i]
            i += 1
            if capability & 0x20 != 0 {
                guard data.count > i else { throw .malformed("the MiBeacon frame ends before its I/O capability byte") }
                i += 1
            }
        }
        let packetID = UInt32(frameCounter)
        guard control & 0x0040 != 0 else {
            // No object: a frame that only announces the device. Nothing to authenticate or
            // publish, and its frame counter is not a reading's.
            return Reading(values: [:])
        }
        guard control & 0x0008 != 0 else {
            // A device with a bindkey must authenticate: a plain frame from its address could be anyone's.
            if key != nil { throw .authenticationFailed }
            return Reading(values: try objects(data[i...]), packetID: packetID)
        }
        guard version >= 4 else { throw .unsupported("MiBeacon v\(version) (legacy) encryption; v4 and v5 only") }
        guard let key else { throw .keyRequired }
        guard data.count >= i + 7 else { throw .malformed("the encrypted MiBeacon frame ends before its counter and MIC") }
        let aes = try AES128(key: key)
        let c = data.count - 7
        let nonce = macReversed + data[2..<5] + data[c..<(c + 3)]
        let plain = try AESCCM.open(Array(data[i..<c]), tag: Array(data[(c + 3)...]), key: aes, nonce: nonce, associatedData: [0x11])
        let extended = UInt32(data[c]) | UInt32(data[c + 1]) << 8 | UInt32(data[c + 2]) << 16
        return Reading(values: try objects(plain[...]), packetID: packetID, counter: extended << 8 | UInt32(frameCounter), encrypted: true)
    }

    /// Reads objects. Each carries its length, so an unknown id is skipped; a known id with a
    /// length other than its value's throws. One or two bytes after the last object (too few for
    /// an object's header) are ignored, as Home Assistant's parser does.
    static func objects(_ bytes: ArraySlice<UInt8>) throws(AdvertisementError) -> JSONObject {
        var values = JSONObject()
        values.reserveCapacity(bytes.count / 4 + 1)  // objects are 4 bytes and more (0x100D: two values)
        var i = bytes.startIndex
        while bytes.endIndex - i >= 3 {
            let id = UInt16(bytes[i]) | UInt16(bytes[i + 1]) << 8
            let length = Int(bytes[i + 2])
            i += 3
            guard bytes.endIndex - i >= length else {
                throw .malformed("MiBeacon object 0x\(hex4(id)) says \(length) bytes, \(bytes.endIndex - i) left")
            }
            let value = bytes[i..<(i + length)]
            i += length
            try read(id, value, into: &values)
        }
        return values
    }

    private static func hex4(_ id: UInt16) -> String {
        let h = String(id, radix: 16, uppercase: true)
        return String(repeating: "0", count: 4 - h.count) + h
    }

    private static func set(_ name: String, _ value: JSONValue, in values: inout JSONObject) {
        values[BTHome.free(name, in: values)] = value
    }

    private static func read(_ id: UInt16, _ v: ArraySlice<UInt8>, into values: inout JSONObject) throws(AdvertisementError) {
        func want(_ count: Int) throws(AdvertisementError) {
            guard v.count == count else { throw .malformed("MiBeacon object 0x\(hex4(id)) has \(v.count) bytes, not \(count)") }
        }
        func int(_ at: Int, _ size: Int, signed: Bool = false) -> Int64 { BTHome.integer(v, at: v.startIndex + at, size: size, signed: signed) }
        func float(_ rounding: Double) throws(AdvertisementError) -> JSONValue {
            let x = Double(Float(bitPattern: UInt32(truncatingIfNeeded: int(0, 4))))
            guard x.isFinite else { throw .malformed("MiBeacon object 0x\(hex4(id)) is not a finite number") }
            return .double((x * rounding).rounded() / rounding)
        }
        switch id {
        case 0x1004: try want(2); set("temperature", .double(Double(int(0, 2, signed: true)) / 10), in: &values)
        case 0x1006: try want(2); set("humidity", .double(Double(int(0, 2)) / 10), in: &values)
        case 0x1007: try want(3); set("illuminance", .int(int(0, 3)), in: &values)
        case 0x1008: try want(1); set("moisture", .int(int(0, 1)), in: &values)
        case 0x1009: try want(2); set("conductivity", .int(int(0, 2)), in: &values)
        case 0x100A: try want(1); set("battery", .int(int(0, 1)), in: &values)
        case 0x100D:
            try want(4)
            set("temperature", .double(Double(int(0, 2, signed: true)) / 10), in: &values)
            set("humidity", .double(Double(int(2, 2)) / 10), in: &values)
        case 0x1010: try want(2); set("formaldehyde", .double(Double(int(0, 2)) / 100), in: &values)
        case 0x1012: try want(1); set("power_on", .bool(v.first! != 0), in: &values)
        case 0x1013: try want(1); set("consumable", .int(int(0, 1)), in: &values)
        case 0x1014: try want(1); set("moisture_detected", .bool(v.first! != 0), in: &values)
        case 0x1015: try want(1); set("smoke", .bool(v.first! != 0), in: &values)
        case 0x1017: try want(4); set("no_motion_time", .int(int(0, 4)), in: &values)
        case 0x1018: try want(1); set("light", .bool(v.first! != 0), in: &values)
        case 0x1019:
            // 0 open, 1 closed, 2 left open (a timeout), 3 a reset (no state).
            try want(1)
            switch v.first! {
            case 0, 2: set("opening", .bool(true), in: &values)
            case 1: set("opening", .bool(false), in: &values)
            default: break
            }
        case 0x4801: try want(4); set("temperature", try float(10), in: &values)
        case 0x4C01: try want(4); set("temperature", try float(100), in: &values)
        case 0x4802, 0x4C02: try want(1); set("humidity", .int(int(0, 1)), in: &values)
        case 0x4C08: try want(4); set("humidity", try float(100), in: &values)
        case 0x4803, 0x4C03: try want(1); set("battery", .int(int(0, 1)), in: &values)
        default: break  // an object this decoder does not read: its length is known, skip it
        }
    }

    // MARK: encoding

    /// The service data (the bytes after the UUID) of a MiBeacon v5 frame carrying `objects`
    /// from `address`, encrypted with `encryption` when given.
    public static func encode(
        productID: UInt16 = 0x055B, frameCounter: UInt8, address: String, includeMAC: Bool = true, objects: [Object],
        encryption: Encryption? = nil
    ) throws(AdvertisementError) -> [UInt8] {
        var control: UInt16 = 0x5000 | (objects.isEmpty ? 0 : 0x0040)
        if includeMAC { control |= 0x0010 }
        if encryption != nil { control |= 0x0808 }  // encrypted, auth mode 2 ("standard certification")
        let macReversed = Array(try AdvertisementPacket.addressBytes(address).reversed())
        var frame: [UInt8] = [UInt8(control & 0xFF), UInt8(control >> 8), UInt8(productID & 0xFF), UInt8(productID >> 8), frameCounter]
        if includeMAC { frame += macReversed }
        var body: [UInt8] = []
        for object in objects {
            guard object.bytes.count <= 255 else { throw .malformed("MiBeacon object 0x\(hex4(object.id)) has \(object.bytes.count) bytes, at most 255") }
            body += [UInt8(object.id & 0xFF), UInt8(object.id >> 8), UInt8(object.bytes.count)] + object.bytes
        }
        guard let encryption else { return frame + body }
        guard encryption.extendedCounter < 1 << 24 else { throw .malformed("the extended counter has 3 bytes; \(encryption.extendedCounter) does not fit") }
        let e = encryption.extendedCounter
        let extended: [UInt8] = [UInt8(e & 0xFF), UInt8((e >> 8) & 0xFF), UInt8(e >> 16)]
        let nonce = macReversed + frame[2..<5] + extended
        let sealed = try AESCCM.seal(body, key: try AES128(key: encryption.key), nonce: nonce, associatedData: [0x11])
        return frame + sealed.ciphertext + extended + sealed.tag
    }
}

/// The ``AdvertisementFormat`` of Xiaomi MiBeacon (`format: xiaomi`).
public struct MiBeaconFormat: AdvertisementFormat {
    public init() {}
    public var name: String { "xiaomi" }
    public var takesKey: Bool { true }
    public func matches(_ packet: AdvertisementPacket) -> Bool { packet.serviceData[MiBeacon.serviceDataKey] != nil }
    public func decode(_ packet: AdvertisementPacket, key: [UInt8]?) throws(AdvertisementError) -> Reading? {
        guard let data = packet.serviceData[MiBeacon.serviceDataKey] else { return nil }
        return try MiBeacon.decode(data, key: key, address: packet.address)
    }
}
