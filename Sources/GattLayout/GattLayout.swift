import BinaryCoding

/// A declarative description of one GATT characteristic value: an ordered list of fields that
/// decodes bytes to a JSON object and encodes a JSON object back to bytes (docs/layouts.md).
///
/// A layout is data: build it from a `JSONValue` (which the CLI and the bridge's config loader
/// produce from YAML or JSON) with ``init(json:)``, or take a built-in with ``builtin(named:)``.
/// The field types follow the Bluetooth Core Specification "Characteristic Presentation Format"
/// types and the GATT Specification Supplement (GSS) data types: uint8…uint64 / sint8…sint64,
/// float32/float64, medfloat16 (IEEE-11073 SFLOAT), medfloat32 (IEEE-11073 FLOAT), utf8s, struct,
/// and boolean8… flag fields whose bits make later fields present or absent.
public struct GattLayout: Sendable, Equatable {
    /// The layout's name (`name:`), if given.
    public let name: String?
    /// The characteristic's UUID (`uuid:`) in lowercase 128-bit form, if given.
    public let uuid: String?
    /// The top-level fields in wire order.
    public let fields: [Field]
    /// Number of flag bits that control presence (their values are computed on encode).
    let presenceBitCount: Int
    /// For each top-level field: the index of its alternative (the other field of the same name),
    /// and whether it is the first of the pair. Precomputed for the encoder.
    let alternatives: [(other: Int, isFirst: Bool)?]

    init(name: String?, uuid: String?, fields: [Field], presenceBitCount: Int) {
        self.name = name
        self.uuid = uuid
        self.fields = fields
        self.presenceBitCount = presenceBitCount
        alternatives = fields.indices.map { i in
            guard fields[i].condition != nil,
                let j = fields.indices.first(where: { $0 != i && fields[$0].name == fields[i].name && fields[$0].condition != nil })
            else { return nil }
            return (j, i < j)
        }
    }

    public static func == (a: GattLayout, b: GattLayout) -> Bool {
        a.name == b.name && a.uuid == b.uuid && a.fields == b.fields && a.presenceBitCount == b.presenceBitCount
    }

    /// The 16-bit form of ``uuid`` when it lies on the Bluetooth Base UUID
    /// (`0000xxxx-0000-1000-8000-00805f9b34fb`, Core Specification Vol 3, Part B, §2.5.1).
    public var shortUUID: UInt16? { uuid.flatMap(GattLayout.shortUUID(of:)) }
}

extension GattLayout {
    /// One field of a layout (docs/layouts.md, "Fields").
    public struct Field: Sendable, Equatable {
        /// The JSON key of the field's value (flag and pad fields produce no key of their own).
        public let name: String
        /// What the bytes are.
        public let type: FieldType
        /// How many times the value repeats (a JSON array unless ``Repetition/once``).
        public let repetition: Repetition
        /// The flag bit that makes the field present or absent (`present_if` / `present_unless`).
        public let condition: Condition?
        /// The unit the decoded value is expressed in (the bridge gives it to Home Assistant).
        public let unit: String?
        /// `parts:` of an integer field: the measurements packed into its digits (the field's own
        /// name is then no key; each part is).
        public var parts: [Part] = []
        /// `value:` of a `pad` field: the constant bytes it must hold (checked on decode, written
        /// on encode); nil for zeros that are not checked.
        public var constant: [UInt8]? = nil
    }

    /// One measurement packed into an integer field's digits (`parts:`): raw = (|value| / divide)
    /// mod modulo, negated when `signed` and the value is negative, then through scale/offset.
    public struct Part: Sendable, Equatable {
        public let name: String
        /// `divide:` (≥ 1, default 1).
        public let divide: UInt64
        /// `modulo:` (≥ 2), or nil for every digit above `divide`.
        public let modulo: UInt64?
        /// `signed:` the part carries the value's sign (default false: the magnitude's digits).
        public let signed: Bool
        /// Scale, offset, min and max of the part (no enum).
        public let numeric: Numeric
        public let unit: String?
    }

    /// A field's wire type.
    public enum FieldType: Sendable, Equatable {
        /// `u8`…`u64` / `i8`…`i64` (any whole number of bytes from 1 to 8).
        case integer(IntegerFormat, Numeric)
        /// IEEE-754 binary32 (`float32`) or binary64 (`float64`).
        case ieee754(byteCount: Int, endianness: Endianness, Numeric)
        /// IEEE-11073 SFLOAT (`sfloat`, GSS `medfloat16`) or FLOAT (`medfloat32`).
        case medfloat(IEEE11073Float.Format, endianness: Endianness, Numeric)
        /// UTF-8 text of a fixed byte length (NUL-padded), or the rest of the value when `nil`.
        case utf8(length: Int?)
        /// Opaque bytes (lowercase hex in JSON) of a fixed length, or the rest of the value.
        case bytes(length: Int?)
        /// Bytes that are skipped on decode and written as zeros on encode.
        case pad(length: Int)
        /// A flags field whose bits are named booleans, small integers or presence bits.
        case flags(Flags)
        /// A nested group of fields (a JSON object), e.g. the GSS Date Time.
        case structure([Field])
    }

    /// Byte size, signedness and byte order of an integer field.
    public struct IntegerFormat: Sendable, Equatable {
        /// 1…8 bytes (`u8` … `u64`).
        public let byteCount: Int
        /// Two's complement (`i…`) or unsigned (`u…`).
        public let isSigned: Bool
        /// `endian:` (little by default, as GATT values are).
        public let endianness: Endianness
        /// `sign: magnitude` (signed types only): the top bit is the sign and the other bits the
        /// magnitude, instead of two's complement.
        public var signMagnitude: Bool = false
    }

    /// Scale, offset, limits and enum names of a numeric field.
    /// Decoded value = raw × scale + offset; on encode raw = round((value − offset) / scale).
    public struct Numeric: Sendable, Equatable {
        /// `scale:` (a number or a fraction such as "1/1024").
        public var scale: Double?
        /// `offset:` added after scaling.
        public var offset: Double?
        /// `min:` on the decoded (scaled) value.
        public var minimum: Double?
        /// `max:` on the decoded (scaled) value.
        public var maximum: Double?
        /// Raw value → name (integer fields only), in layout order.
        public var enumeration: [(value: Int64, name: String)]
        /// `invalid:` raw wire values (as unsigned bits) that mean "not available": the key is
        /// left out on decode, and a missing key is written as the first of them on encode.
        public var invalid: [UInt64] = []

        /// No scale, offset, limits or names.
        public static let plain = Numeric(scale: nil, offset: nil, minimum: nil, maximum: nil, enumeration: [])
        var isScaled: Bool { scale != nil || offset != nil }

        public static func == (a: Numeric, b: Numeric) -> Bool {
            a.scale == b.scale && a.offset == b.offset && a.minimum == b.minimum && a.maximum == b.maximum
                && a.enumeration.map(\.value) == b.enumeration.map(\.value)
                && a.enumeration.map(\.name) == b.enumeration.map(\.name) && a.invalid == b.invalid
        }
    }

    /// A flags field: an unsigned little- or big-endian integer whose bits are described by ``bits``.
    public struct Flags: Sendable, Equatable {
        /// `size:` 1…8 bytes.
        public let byteCount: Int
        /// `endian:` of the flags integer.
        public let endianness: Endianness
        /// The named bits, in layout order.
        public let bits: [FlagBit]
    }

    /// One named bit (or group of bits) of a flags field.
    public struct FlagBit: Sendable, Equatable {
        /// The JSON key (value bits) or the name conditions refer to (presence bits).
        public let name: String
        /// Index of the least significant bit (0 = least significant bit of the field).
        public let bit: Int
        /// Number of bits (1 for a boolean).
        public let width: Int
        /// Value → name for multi-bit groups (optional).
        public let enumeration: [(value: Int64, name: String)]
        /// Index into the presence table when some field's condition refers to this bit;
        /// such a bit is not a JSON key: it is read on decode and computed on encode.
        public let presenceIndex: Int?
        /// `scale`, `offset`, `min`, `max` and `invalid` of a multi-bit value group.
        public var numeric: Numeric = .plain
        /// `unit:` of a value group.
        public var unit: String? = nil

        public static func == (a: FlagBit, b: FlagBit) -> Bool {
            a.name == b.name && a.bit == b.bit && a.width == b.width && a.presenceIndex == b.presenceIndex
                && a.numeric == b.numeric && a.unit == b.unit
                && a.enumeration.map(\.value) == b.enumeration.map(\.value)
                && a.enumeration.map(\.name) == b.enumeration.map(\.name)
        }
    }

    /// The presence condition of a field.
    public struct Condition: Sendable, Equatable {
        /// The name of the flag bit.
        public let bitName: String
        /// Index into the presence table.
        public let presenceIndex: Int
        /// `true` for `present_if` (present when the bit is 1), `false` for `present_unless`.
        public let whenSet: Bool
    }

    /// How often a field's value occurs.
    public enum Repetition: Sendable, Equatable {
        case once
        /// Exactly `n` values (`repeat: n`).
        case count(Int)
        /// Values until the end of the data (`repeat: rest`), zero or more.
        case rest
    }
}

extension GattLayout {
    static func shortUUID(of uuid: String) -> UInt16? {
        let suffix = "-0000-1000-8000-00805f9b34fb"
        guard uuid.count == 36, uuid.hasPrefix("0000"), uuid.hasSuffix(suffix) else { return nil }
        return UInt16(uuid.dropFirst(4).prefix(4), radix: 16)
    }
}
