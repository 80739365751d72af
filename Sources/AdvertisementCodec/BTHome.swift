import BinaryCoding

// BTHome v2 (https://bthome.io/format/, https://bthome.io/encryption/): service data of the
// 16-bit UUID 0xFCD2. The bytes BlueZ gives (the UUID is not in them): one device information
// byte (bit 0 encrypted, bit 2 trigger based, bits 5-7 the version, 2), then objects, each an
// id byte and a value whose size the id fixes (text, raw and command objects carry a length).
// Encrypted: the objects are AES-CCM ciphertext, then a 4-byte counter (little endian) and a
// 4-byte MIC; the nonce is the address (6 bytes as written), the UUID little endian (D2 FC),
// the device information byte and the counter.

/// BTHome v2: decoding (``decode(_:key:address:)``) and encoding (``encode(_:packetID:triggerBased:encryption:)``).
public enum BTHome {
    public static let uuid: UInt16 = 0xFCD2
    /// ``uuid`` as BlueZ keys service data (computed once: the lookup is on every advertisement).
    static let serviceDataKey = AdvertisementPacket.uuid(uuid)

    /// A value to encode (the decoder gives the same as JSON: numbers, booleans, strings).
    public enum Value: Sendable, Equatable {
        /// A sensor value in its unit (°C, %…): divided by the object's factor and rounded.
        case number(Double)
        case bool(Bool)
        /// A button event (`press`, `double_press`…, or `none`) or dimmer event (`rotate_left`,
        /// `rotate_right` with `steps`, or `none`).
        case event(String, steps: UInt8 = 0)
        /// Text (0x53), UTF-8.
        case text(String)
        /// Raw bytes (0x54).
        case bytes([UInt8])
    }

    /// The key, counter and sender address of an encrypted advertisement.
    public struct Encryption: Sendable {
        public var key: [UInt8]
        public var counter: UInt32
        public var address: String
        public init(key: [UInt8], counter: UInt32, address: String) {
            self.key = key
            self.counter = counter
            self.address = address
        }
    }

    /// How an object's value is written.
    enum Kind: Sendable {
        /// Little-endian integer of `size` bytes; the value is `raw × multiply / divide`.
        case number(size: Int, signed: Bool, multiply: Int, divide: Double)
        /// One byte, 0 or 1.
        case binary
        case button
        case dimmer
        /// Length byte (low 5 bits: the arguments' length), opcode, arguments.
        case command
        /// Length byte, then UTF-8 text.
        case text
        /// Length byte, then bytes (given as lower-case hex).
        case raw
        case packetID
        /// A firmware version of 4 or 3 bytes, little endian, written `a.b.c.d` / `a.b.c`.
        case firmware(Int)
    }

    struct Object: Sendable {
        let name: String
        let kind: Kind
    }

    private static func n(_ name: String, _ size: Int, signed: Bool = false, times multiply: Int = 1, over divide: Double = 1) -> Object {
        Object(name: name, kind: .number(size: size, signed: signed, multiply: multiply, divide: divide))
    }

    private static func b(_ name: String) -> Object { Object(name: name, kind: .binary) }

    /// Every object id of the specification (bthome.io/format, as of 2026-04), by id. Names are
    /// the shared measurement names (docs/advertisements.md): the specification's `dewpoint` is
    /// `dew_point`, `mass (kg)` `mass_kg`, `distance (mm)` `distance_mm`, `volume` (L / mL)
    /// `volume_l` / `volume_ml`, `pm2.5` `pm2_5`, the binary `battery` `battery_low`, `gas`
    /// `gas_detected`, `moisture` `moisture_detected`, `power` `power_on`, `generic boolean`
    /// `generic`.
    static let objects: [Object?] = {
        var t = [Object?](repeating: nil, count: 256)
        t[0x00] = Object(name: "packet_id", kind: .packetID)
        t[0x01] = BTHome.n("battery", 1)
        t[0x02] = BTHome.n("temperature", 2, signed: true, over: 100)
        t[0x03] = BTHome.n("humidity", 2, over: 100)
        t[0x04] = BTHome.n("pressure", 3, over: 100)
        t[0x05] = BTHome.n("illuminance", 3, over: 100)
        t[0x06] = BTHome.n("mass_kg", 2, over: 100)
        t[0x07] = BTHome.n("mass_lb", 2, over: 100)
        t[0x08] = BTHome.n("dew_point", 2, signed: true, over: 100)
        t[0x09] = BTHome.n("count", 1)
        t[0x0A] = BTHome.n("energy", 3, over: 1000)
        t[0x0B] = BTHome.n("power", 3, over: 100)
        t[0x0C] = BTHome.n("voltage", 2, over: 1000)
        t[0x0D] = BTHome.n("pm2_5", 2)
        t[0x0E] = BTHome.n("pm10", 2)
        t[0x0F] = BTHome.b("generic")
        t[0x10] = BTHome.b("power_on")
        t[0x11] = BTHome.b("opening")
        t[0x12] = BTHome.n("co2", 2)
        t[0x13] = BTHome.n("tvoc", 2)
        t[0x14] = BTHome.n("moisture", 2, over: 100)
        let binaries = [
            "battery_low", "battery_charging", "carbon_monoxide", "cold", "connectivity", "door", "garage_door", "gas_detected",
            "heat", "light", "lock", "moisture_detected", "motion", "moving", "occupancy", "plug", "presence", "problem",
            "running", "safety", "smoke", "sound", "tamper", "vibration", "window",
        ]
        for (i, name) in binaries.enumerated() { t[0x15 + i] = BTHome.b(name) }  // 0x15…0x2D
        t[0x2E] = BTHome.n("humidity", 1)
        t[0x2F] = BTHome.n("moisture", 1)
        t[0x3A] = Object(name: "button", kind: .button)
        t[0x3B] = Object(name: "command", kind: .command)
        t[0x3C] = Object(name: "dimmer", kind: .dimmer)
        t[0x3D] = BTHome.n("count", 2)
        t[0x3E] = BTHome.n("count", 4)
        t[0x3F] = BTHome.n("rotation", 2, signed: true, over: 10)
        t[0x40] = BTHome.n("distance_mm", 2)
        t[0x41] = BTHome.n("distance_m", 2, over: 10)
        t[0x42] = BTHome.n("duration", 3, over: 1000)
        t[0x43] = BTHome.n("current", 2, over: 1000)
        t[0x44] = BTHome.n("speed", 2, over: 100)
        t[0x45] = BTHome.n("temperature", 2, signed: true, over: 10)
        t[0x46] = BTHome.n("uv_index", 1, over: 10)
        t[0x47] = BTHome.n("volume_l", 2, over: 10)
        t[0x48] = BTHome.n("volume_ml", 2)
        t[0x49] = BTHome.n("volume_flow_rate", 2, over: 1000)
        t[0x4A] = BTHome.n("voltage", 2, over: 10)
        t[0x4B] = BTHome.n("gas", 3, over: 1000)
        t[0x4C] = BTHome.n("gas", 4, over: 1000)
        t[0x4D] = BTHome.n("energy", 4, over: 1000)
        t[0x4E] = BTHome.n("volume_l", 4, over: 1000)
        t[0x4F] = BTHome.n("water", 4, over: 1000)
        t[0x50] = BTHome.n("timestamp", 4)  // seconds since 1970-01-01 UTC
        t[0x51] = BTHome.n("acceleration", 2, over: 1000)
        t[0x52] = BTHome.n("gyroscope", 2, over: 1000)
        t[0x53] = Object(name: "text", kind: .text)
        t[0x54] = Object(name: "raw", kind: .raw)
        t[0x55] = BTHome.n("volume_storage", 4, over: 1000)  // L
        t[0x56] = BTHome.n("conductivity", 2)
        t[0x57] = BTHome.n("temperature", 1, signed: true)
        t[0x58] = BTHome.n("temperature", 1, signed: true, times: 35, over: 100)  // factor 0.35
        t[0x59] = BTHome.n("count", 1, signed: true)
        t[0x5A] = BTHome.n("count", 2, signed: true)
        t[0x5B] = BTHome.n("count", 4, signed: true)
        t[0x5C] = BTHome.n("power", 4, signed: true, over: 100)
        t[0x5D] = BTHome.n("current", 2, signed: true, over: 1000)
        t[0x5E] = BTHome.n("direction", 2, over: 100)
        t[0x5F] = BTHome.n("precipitation", 2, over: 10)
        t[0x60] = BTHome.n("channel", 1)
        t[0x61] = BTHome.n("rotational_speed", 2)  // rpm
        t[0x62] = BTHome.n("speed", 4, signed: true, over: 1_000_000)
        t[0x63] = BTHome.n("acceleration", 4, signed: true, over: 1_000_000)
        t[0x64] = BTHome.n("light_level", 1)  // 0 dark, 1 twilight, 2 bright
        t[0x65] = BTHome.n("settings_revision", 1)
        t[0xF0] = BTHome.n("device_type_id", 2)
        t[0xF1] = Object(name: "firmware", kind: .firmware(4))
        t[0xF2] = Object(name: "firmware", kind: .firmware(3))
        return t
    }()

    static let buttonEvents: [UInt8: String] = [
        0x00: "none", 0x01: "press", 0x02: "double_press", 0x03: "triple_press", 0x04: "long_press",
        0x05: "long_double_press", 0x06: "long_triple_press", 0x80: "hold_press",
    ]
    static let dimmerEvents: [UInt8: String] = [0x00: "none", 0x01: "rotate_left", 0x02: "rotate_right"]
    static let commands: [UInt8: String] = [0x00: "off", 0x01: "on", 0x02: "toggle", 0x03: "step_up", 0x04: "step_down"]

    // MARK: decoding

    /// Reads BTHome service data (the bytes after the UUID) sent from `address`.
    public static func decode(_ data: [UInt8], key: [UInt8]?, address: String) throws(AdvertisementError) -> Reading {
        guard let info = data.first else { throw .malformed("BTHome service data is empty (no device information byte)") }
        let version = info >> 5
        guard version == 2 else { throw .unsupported("BTHome version \(version) (only version 2)") }
        let triggerBased = info & 0x04 != 0
        guard info & 0x01 != 0 else {
            // A device with a key must authenticate: a plain advertisement from its address could
            // be anyone's.
            if key != nil { throw .authenticationFailed }
            var reading = try readObjects(data[1...])
            reading.triggerBased = triggerBased
            return reading
        }
        guard let key else { throw .keyRequired }
        guard data.count >= 1 + 8 else { throw .malformed("an encrypted BTHome advertisement has at least 9 bytes, this one \(data.count)") }
        let aes = try AES128(key: key)
        let c = data.count - 8
        let counter = UInt32(data[c]) | UInt32(data[c + 1]) << 8 | UInt32(data[c + 2]) << 16 | UInt32(data[c + 3]) << 24
        let nonce = try AdvertisementPacket.addressBytes(address) + [0xD2, 0xFC, info] + data[c..<(c + 4)]
        let plain = try AESCCM.open(Array(data[1..<c]), tag: Array(data[(c + 4)...]), key: aes, nonce: nonce)
        var reading = try readObjects(plain[...])
        reading.counter = counter
        reading.encrypted = true
        reading.triggerBased = triggerBased
        return reading
    }

    /// Reads objects in order. An unknown object id ends the reading (its size is unknown, so
    /// nothing after it can be read): the values before it are kept, as the specification asks
    /// of a receiver older than the sensor; with none before it, it throws `unsupported`.
    static func readObjects(_ bytes: ArraySlice<UInt8>) throws(AdvertisementError) -> Reading {
        var values = JSONObject()
        values.reserveCapacity(bytes.count / 2)  // objects are 2 bytes and more: no regrowth
        var packetID: UInt32?
        var i = bytes.startIndex
        let end = bytes.endIndex
        while i < end {
            let id = bytes[i]
            guard let object = Self.objects[Int(id)] else {
                if values.isEmpty { throw .unsupported(String(format2: "BTHome object id 0x%02X", id)) }
                break
            }
            i += 1
            let left = end - i
            func need(_ count: Int) throws(AdvertisementError) {
                guard left >= count else {
                    throw .malformed(String(format2: "BTHome object 0x%02X (\(object.name))", id) + " needs \(count) bytes, \(left) left")
                }
            }
            switch object.kind {
            case .number(let size, let signed, let multiply, let divide):
                try need(size)
                let raw = integer(bytes, at: i, size: size, signed: signed)
                i += size
                let value: JSONValue = divide == 1 && multiply == 1 ? .int(raw) : .double(Double(raw * Int64(multiply)) / divide)
                values[free(object.name, in: values)] = value
            case .binary:
                try need(1)
                values[free(object.name, in: values)] = .bool(bytes[i] != 0)
                i += 1
            case .packetID:
                try need(1)
                packetID = UInt32(bytes[i])
                i += 1
            case .button:
                try need(1)
                let name = free(object.name, in: values)
                let event = bytes[i]
                i += 1
                guard let text = buttonEvents[event] else { throw .unsupported(String(format2: "BTHome button event 0x%02X", event)) }
                values[name] = .string(text)
            case .dimmer:
                try need(2)
                let name = free(object.name, in: values)
                let event = bytes[i], steps = bytes[i + 1]
                i += 2
                guard let text = dimmerEvents[event] else { throw .unsupported(String(format2: "BTHome dimmer event 0x%02X", event)) }
                values[name] = .string(text)
                values["dimmer_steps" + name.dropFirst("dimmer".count)] = .int(Int64(steps))
            case .command:
                try need(2)
                let count = Int(bytes[i] & 0x1F)
                try need(2 + count)
                let opcode = bytes[i + 1]
                let name = free(object.name, in: values)
                values[name] = .string(commands[opcode] ?? String(format2: "opcode_0x%02X", opcode))
                if count > 0 {
                    values["command_arguments" + name.dropFirst("command".count)] = .string(Hex.encode(bytes[(i + 2)..<(i + 2 + count)]))
                }
                i += 2 + count
            case .text, .raw:
                try need(1)
                let count = Int(bytes[i])
                try need(1 + count)
                let content = bytes[(i + 1)..<(i + 1 + count)]
                if case .text = object.kind {
                    values[free(object.name, in: values)] = .string(String(decoding: content, as: UTF8.self))
                } else {
                    values[free(object.name, in: values)] = .string(Hex.encode(content))
                }
                i += 1 + count
            case .firmware(let size):
                try need(size)
                var parts: [String] = []
                for k in (0..<size).reversed() { parts.append(String(bytes[i + k])) }
                values[free(object.name, in: values)] = .string(parts.joined(separator: "."))
                i += size
            }
        }
        return Reading(values: values, packetID: packetID)
    }

    /// `name`, or `name_2`, `name_3`… when taken (several objects of one id or name).
    static func free(_ name: String, in values: JSONObject) -> String {
        if values[name] == nil { return name }
        var k = 2
        while values["\(name)_\(k)"] != nil { k += 1 }
        return "\(name)_\(k)"
    }

    /// `x × scale`, rounded, as a `size`-byte little-endian integer; out of its range (or not a
    /// number) throws, naming `what`.
    static func littleEndian(_ x: Double, times scale: Double, size: Int, signed: Bool, what: String) throws(AdvertisementError) -> [UInt8] {
        let scaled = (x * scale).rounded()
        let bits = 8 * size
        let low: Double = signed ? -Double(sign: .plus, exponent: bits - 1, significand: 1) : 0
        let high: Double = (signed ? Double(sign: .plus, exponent: bits - 1, significand: 1) : Double(sign: .plus, exponent: bits, significand: 1)) - 1
        guard scaled.isFinite, scaled >= low, scaled <= high else { throw .malformed("\(what): \(x) is out of its range") }
        let raw = UInt64(bitPattern: Int64(scaled))  // checked: scaled is finite and within ±2^32 (guard above)
        return (0..<size).map { UInt8(truncatingIfNeeded: raw >> (8 * UInt64($0))) }
    }

    @inline(__always) static func integer(_ bytes: ArraySlice<UInt8>, at i: Int, size: Int, signed: Bool) -> Int64 {
        var raw: UInt64 = 0
        for k in 0..<size { raw |= UInt64(bytes[i + k]) << (8 * UInt64(k)) }
        if signed && size < 8 && raw & (1 << (8 * UInt64(size) - 1)) != 0 {
            raw |= ~0 << (8 * UInt64(size))
        }
        return Int64(bitPattern: raw)
    }

    // MARK: encoding

    /// The service data (the bytes after the UUID) of a BTHome v2 advertisement carrying
    /// `objects` in the order given (the specification asks devices for increasing ids), the
    /// packet id first when given. Encrypted with `encryption` when given.
    public static func encode(
        _ objects: [(id: UInt8, value: Value)], packetID: UInt8? = nil, triggerBased: Bool = false, encryption: Encryption? = nil
    ) throws(AdvertisementError) -> [UInt8] {
        var body: [UInt8] = []
        if let packetID { body += [0x00, packetID] }
        for (id, value) in objects {
            guard let object = Self.objects[Int(id)] else { throw .unsupported(String(format2: "BTHome object id 0x%02X", id)) }
            body.append(id)
            try append(value, as: object, id: id, to: &body)
        }
        let info: UInt8 = 0x40 | (triggerBased ? 0x04 : 0) | (encryption == nil ? 0 : 0x01)
        guard let encryption else { return [info] + body }
        let aes = try AES128(key: encryption.key)
        let c = encryption.counter
        let counter: [UInt8] = [UInt8(c & 0xFF), UInt8((c >> 8) & 0xFF), UInt8((c >> 16) & 0xFF), UInt8(c >> 24)]
        let nonce = try AdvertisementPacket.addressBytes(encryption.address) + [0xD2, 0xFC, info] + counter
        let sealed = try AESCCM.seal(body, key: aes, nonce: nonce)
        return [info] + sealed.ciphertext + counter + sealed.tag
    }

    private static func append(_ value: Value, as object: Object, id: UInt8, to body: inout [UInt8]) throws(AdvertisementError) {
        let what = String(format2: "BTHome object 0x%02X (\(object.name))", id)
        switch (object.kind, value) {
        case (.number(let size, let signed, let multiply, let divide), .number(let x)):
            body += try littleEndian(x, times: divide / Double(multiply), size: size, signed: signed, what: what)
        case (.binary, .bool(let on)):
            body.append(on ? 1 : 0)
        case (.packetID, .number(let x)):
            guard let byte = UInt8(exactly: x) else { throw .malformed("\(what): \(x) is not 0…255") }
            body.append(byte)
        case (.button, .event(let name, _)):
            guard let code = buttonEvents.first(where: { $0.value == name })?.key else { throw .malformed("\(what): no button event \(name)") }
            body.append(code)
        case (.dimmer, .event(let name, let steps)):
            guard let code = dimmerEvents.first(where: { $0.value == name })?.key else { throw .malformed("\(what): no dimmer event \(name)") }
            body += [code, steps]
        case (.command, .event(let name, _)):
            guard let code = commands.first(where: { $0.value == name })?.key else { throw .malformed("\(what): no command \(name)") }
            body += [0, code]
        case (.text, .text(let text)):
            let utf8 = Array(text.utf8)
            guard utf8.count <= 255 else { throw .malformed("\(what): \(utf8.count) bytes of text, at most 255") }
            body += [UInt8(utf8.count)] + utf8
        case (.raw, .bytes(let bytes)):
            guard bytes.count <= 255 else { throw .malformed("\(what): \(bytes.count) bytes, at most 255") }
            body += [UInt8(bytes.count)] + bytes
        case (.firmware(let size), .text(let version)):
            let parts = version.split(separator: ".").compactMap { UInt8($0) }
            guard parts.count == size else { throw .malformed("\(what): \"\(version)\" is not \(size) numbers 0…255 joined by dots") }
            body += parts.reversed()
        default:
            throw .malformed("\(what) does not take \(value)")
        }
    }
}

extension String {
    /// `format` with one `%02X` replaced by `byte` (no Foundation in the pure codecs).
    init(format2 format: String, _ byte: UInt8) {
        let hex = String(byte, radix: 16, uppercase: true)
        self = format.replacing("%02X", with: hex.count == 1 ? "0" + hex : hex)
    }
}

/// The ``AdvertisementFormat`` of BTHome v2 (`format: bthome`).
public struct BTHomeFormat: AdvertisementFormat {
    public init() {}
    public var name: String { "bthome" }
    public var takesKey: Bool { true }
    public func matches(_ packet: AdvertisementPacket) -> Bool { packet.serviceData[BTHome.serviceDataKey] != nil }
    public func decode(_ packet: AdvertisementPacket, key: [UInt8]?) throws(AdvertisementError) -> Reading? {
        guard let data = packet.serviceData[BTHome.serviceDataKey] else { return nil }
        return try BTHome.decode(data, key: key, address: packet.address)
    }
}
