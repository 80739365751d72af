import BinaryCoding
import GattLayout

/// An advertisement format written as data (docs/advertisement-layouts.md): what to match (a
/// service UUID's data or a company's manufacturer data, optionally a name prefix, leading bytes
/// and an exact length) and a layout (docs/layouts.md) that decodes the matched bytes. A format
/// may hold several variants (`variants:`), tried in order: the first whose match holds decodes.
///
/// ```yaml
/// name: my_sensor
/// match: {service_data: "181A", length: 13}
/// packet_id: frame_counter
/// layout: {fields: [...]}
/// ```
public struct LayoutFormat: AdvertisementFormat, Equatable {
    public let name: String
    /// The variants, in the order they are tried (one for a format without `variants:`).
    public let variants: [Variant]
    public var takesKey: Bool { false }

    /// One match and the layout of what it matches.
    public struct Variant: Sendable, Equatable {
        public let match: Match
        /// `packet_id:` the decoded field that identifies a repeat: it becomes
        /// ``Reading/packetID`` and is not one of the values.
        public let packetID: String?
        public let layout: GattLayout
    }

    /// Which advertisements, and which bytes of them, a variant reads.
    public struct Match: Sendable, Equatable {
        public enum Source: Sendable, Equatable {
            /// The service data of this UUID (lowercase 128-bit, as BlueZ gives it).
            case serviceData(uuid: String)
            /// The manufacturer data of this company identifier (the identifier not included).
            case manufacturer(id: UInt16)
        }
        public let source: Source
        /// `name_prefix:` the advertised name must start with it (no name: no match).
        public let namePrefix: String?
        /// `prefix:` the bytes must start with these.
        public let prefix: [UInt8]
        /// `length:` the bytes must be exactly this long.
        public let length: Int?

        /// The bytes this match reads from `packet`, or nil when it does not match.
        public func payload(_ packet: AdvertisementPacket) -> [UInt8]? {
            if let namePrefix, !(packet.name ?? "").hasPrefix(namePrefix) { return nil }
            let bytes: [UInt8]?
            switch source {
            case let .serviceData(uuid): bytes = packet.serviceData[uuid]
            case let .manufacturer(id): bytes = packet.manufacturerData[id]
            }
            guard let bytes, bytes.starts(with: prefix) else { return nil }
            if let length, bytes.count != length { return nil }
            return bytes
        }
    }

    /// Builds a format from its JSON (the YAML converted). `name` is the format's name when the
    /// definition comes from a map keyed by name (`advertisement_formats: {NAME: {...}}`);
    /// otherwise the definition's `name:` is required. Errors are
    /// ``GattLayoutError/invalidLayout(path:reason:)`` naming the key path (`match.service_data`,
    /// `variants[1].layout.fields[2].type`), relative to the definition.
    public init(json: JSONValue, name: String? = nil) throws(GattLayoutError) {
        guard case let .object(top) = json else {
            throw .invalidLayout(path: "", reason: "expected an object, found \(json.typeName)")
        }
        let isVariants = top["variants"] != nil
        let allowed: Set<String> = isVariants
            ? ["name", "description", "variants"] : ["name", "description", "match", "packet_id", "layout"]
        try Self.checkKeys(top, allowed: allowed, path: "")
        var resolved = name
        if let n = top["name"] {
            guard case let .string(s) = n, !s.isEmpty else {
                throw .invalidLayout(path: "name", reason: "expected a non-empty string, found \(n.jsonText)")
            }
            if resolved == nil { resolved = s }
        }
        guard let resolved else { throw .invalidLayout(path: "", reason: "missing key 'name'") }
        if let d = top["description"], d.stringValue == nil {
            throw .invalidLayout(path: "description", reason: "expected a string, found \(d.typeName)")
        }
        var variants: [Variant] = []
        if let v = top["variants"] {
            guard case let .array(list) = v, !list.isEmpty, list.count <= 16 else {
                throw .invalidLayout(path: "variants", reason: "expected a list of 1…16 variants, found \(v.jsonText.prefix(60))")
            }
            for (i, item) in list.enumerated() {
                let path = "variants[\(i)]"
                guard case let .object(o) = item else {
                    throw .invalidLayout(path: path, reason: "expected an object, found \(item.typeName)")
                }
                try Self.checkKeys(o, allowed: ["match", "packet_id", "layout", "description"], path: path)
                variants.append(try Self.variant(o, path: path))
            }
        } else {
            variants.append(try Self.variant(top, path: ""))
        }
        self.name = resolved
        self.variants = variants
    }

    /// Every key a reading's values can have (for Home Assistant's entities): the variants' layout
    /// keys without their packet id, each name once (the first variant's kind and unit), in
    /// order. A key that some variant lacks is conditional.
    public var keys: [GattLayout.Key] {
        var out: [GattLayout.Key] = []
        let perVariant = variants.map { v in v.layout.keys.filter { $0.name != v.packetID } }
        for keys in perVariant {
            for key in keys where !out.contains(where: { $0.name == key.name }) {
                let everywhere = perVariant.allSatisfy { $0.contains { $0.name == key.name } }
                out.append(GattLayout.Key(name: key.name, kind: key.kind, unit: key.unit, isConditional: key.isConditional || !everywhere))
            }
        }
        return out
    }

    /// ``keys``: a layout declares every field it can decode.
    public var declaredFields: [GattLayout.Key] { keys }

    public func matches(_ packet: AdvertisementPacket) -> Bool {
        variants.contains { $0.match.payload(packet) != nil }
    }

    public func decode(_ packet: AdvertisementPacket, key: [UInt8]?) throws(AdvertisementError) -> Reading? {
        for variant in variants {
            guard let bytes = variant.match.payload(packet) else { continue }
            let decoded: JSONValue
            do throws(GattLayoutError) { decoded = try variant.layout.decode(bytes) } catch {
                throw .malformed("\(name): \(error.description)")
            }
            guard case var .object(values) = decoded else { throw .malformed("\(name): the layout gave no object") }
            var packetID: UInt32? = nil
            if let id = variant.packetID, let value = values[id] {
                values[id] = nil
                guard let n = value.uint64Value, let n32 = UInt32(exactly: n) else {
                    throw .malformed("\(name): packet id '\(id)' is \(value.jsonText), not a whole number 0…4294967295")
                }
                packetID = n32
            }
            return Reading(values: values, packetID: packetID)
        }
        return nil
    }

    /// The bytes of variant `variant` for `reading` (its values and packet id), through the
    /// layout's encoder: for tests, the emulator and `gatt2mqtt layout`.
    public func encode(_ reading: Reading, variant: Int = 0) throws(GattLayoutError) -> [UInt8] {
        guard variants.indices.contains(variant) else {
            throw .invalidValue(path: "", reason: "format '\(name)' has no variant \(variant)")
        }
        let v = variants[variant]
        var values = reading.values
        if let id = v.packetID, let packetID = reading.packetID { values[id] = .int(Int64(packetID)) }
        return try v.layout.encode(.object(values))
    }

    public static func == (a: LayoutFormat, b: LayoutFormat) -> Bool { a.name == b.name && a.variants == b.variants }

    // MARK: Parsing

    static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    static func checkKeys(_ o: JSONObject, allowed: Set<String>, path: String) throws(GattLayoutError) {
        for key in o.keys where !allowed.contains(key) {
            throw .invalidLayout(
                path: join(path, key), reason: "unknown key '\(key)' (allowed: \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    static func variant(_ o: JSONObject, path: String) throws(GattLayoutError) -> Variant {
        guard let m = o["match"] else { throw .invalidLayout(path: path, reason: "missing key 'match'") }
        let match = try self.match(m, path: join(path, "match"))
        guard let l = o["layout"] else { throw .invalidLayout(path: path, reason: "missing key 'layout'") }
        let layoutPath = join(path, "layout")
        let layout: GattLayout
        do throws(GattLayoutError) { layout = try GattLayout(json: l) } catch {
            if case let .invalidLayout(inner, reason) = error {
                throw .invalidLayout(path: join(layoutPath, inner), reason: reason)
            }
            throw error
        }
        var packetID: String? = nil
        if let p = o["packet_id"] {
            let keys = layout.keys
            guard case let .string(s) = p, keys.contains(where: { $0.name == s && $0.kind == .number }) else {
                throw .invalidLayout(
                    path: join(path, "packet_id"),
                    reason: "expected the name of a numeric field of the layout (\(keys.filter { $0.kind == .number }.map(\.name).joined(separator: ", "))), found \(p.jsonText)")
            }
            packetID = s
        }
        return Variant(match: match, packetID: packetID, layout: layout)
    }

    static func match(_ v: JSONValue, path: String) throws(GattLayoutError) -> Match {
        guard case let .object(o) = v else { throw .invalidLayout(path: path, reason: "expected an object, found \(v.typeName)") }
        try checkKeys(o, allowed: ["service_data", "manufacturer_id", "name_prefix", "prefix", "length"], path: path)
        let source: Match.Source
        switch (o["service_data"], o["manufacturer_id"]) {
        case let (s?, nil):
            source = .serviceData(uuid: try GattLayout.uuid(s, path: join(path, "service_data")))
        case let (nil, m?):
            let p = join(path, "manufacturer_id")
            var id: UInt64? = m.uint64Value
            if case let .string(text) = m {
                let lower = text.lowercased()
                id = lower.hasPrefix("0x") ? UInt64(lower.dropFirst(2), radix: 16) : UInt64(lower)
            }
            guard let id, let id16 = UInt16(exactly: id) else {
                throw .invalidLayout(path: p, reason: "expected a company identifier 0…0xFFFF, found \(m.jsonText)")
            }
            source = .manufacturer(id: id16)
        case (nil, nil):
            throw .invalidLayout(path: path, reason: "give 'service_data' (a UUID) or 'manufacturer_id' (a company identifier)")
        case (_?, _?):
            throw .invalidLayout(path: join(path, "manufacturer_id"), reason: "give either 'service_data' or 'manufacturer_id', not both")
        }
        var namePrefix: String? = nil
        if let n = o["name_prefix"] {
            guard case let .string(s) = n, !s.isEmpty else {
                throw .invalidLayout(path: join(path, "name_prefix"), reason: "expected a non-empty string, found \(n.jsonText)")
            }
            namePrefix = s
        }
        var prefix: [UInt8] = []
        if let p = o["prefix"] {
            guard case let .string(s) = p, let bytes = try? Hex.decode(s), !bytes.isEmpty, bytes.count <= 31 else {
                throw .invalidLayout(path: join(path, "prefix"), reason: "expected 1…31 bytes as hex text (\"05\"), found \(p.jsonText)")
            }
            prefix = bytes
        }
        var length: Int? = nil
        if let l = o["length"] {
            // An advertisement's data is at most 31 bytes (extended advertising: 255).
            guard let n = l.intValue, (1...255).contains(n) else {
                throw .invalidLayout(path: join(path, "length"), reason: "expected a byte count 1…255, found \(l.jsonText)")
            }
            length = n
        }
        return Match(source: source, namePrefix: namePrefix, prefix: prefix, length: length)
    }
}
