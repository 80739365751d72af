/// The shape of a decoded value, without bytes (docs/layouts.md, "Decoding"): which top-level keys
/// the JSON object can have, what each holds, and its `unit`. The bridge describes a layout
/// device's state to Home Assistant from it (docs/homeassistant.md).
extension GattLayout {
    /// One top-level key of the decoded object.
    public struct Key: Sendable, Equatable {
        /// What the key's value is.
        public enum Kind: Sendable, Equatable {
            /// A number: an integer, float or IEEE-11073 field. Floats and IEEE-11073 fields may
            /// also hold the special-value texts (`"NaN"`, `"NRes"`, `"+INFINITY"`, …).
            case number
            /// A one-bit value flag (`true`/`false`).
            case boolean
            /// An integer with `enum` names (a flags group or an integer field): one of `names`,
            /// or the number when the raw value has no name.
            case choice(names: [String])
            /// Text: a `utf8` field, or a `bytes` field as lowercase hex.
            case text
            /// A JSON array (`repeat`).
            case list
            /// A JSON object (`struct`, `date_time`).
            case object
        }

        /// The JSON key.
        public let name: String
        public let kind: Kind
        /// The field's `unit`, if the layout gives one.
        public let unit: String?
        /// Whether the key can be absent: the field has a presence condition (`present_if`,
        /// `present_unless`; a pair of alternatives counts as always present) or an `invalid`
        /// sentinel.
        public let isConditional: Bool

        public init(name: String, kind: Kind, unit: String?, isConditional: Bool) {
            self.name = name
            self.kind = kind
            self.unit = unit
            self.isConditional = isConditional
        }
    }

    /// Every key a decoded value can have, in the order the decoder writes them; alternatives
    /// (two fields of one name, e.g. the heart rate as u8 or u16) are one key, with the unit of
    /// the first. Presence bits and `pad` fields are no keys; a field with `parts` gives one key
    /// per part.
    public var keys: [Key] {
        var out: [Key] = []
        for (i, field) in fields.enumerated() {
            switch field.type {
            case let .flags(flags):
                for bit in flags.bits where bit.presenceIndex == nil {
                    let kind: Key.Kind = !bit.enumeration.isEmpty ? .choice(names: bit.enumeration.map(\.name))
                        : bit.width == 1 && !bit.numeric.isScaled ? .boolean : .number
                    out.append(Key(name: bit.name, kind: kind, unit: bit.unit, isConditional: !bit.numeric.invalid.isEmpty))
                }
            case .pad:
                continue
            case let .integer(_, numeric) where !field.parts.isEmpty:
                for part in field.parts {
                    out.append(Key(name: part.name, kind: .number, unit: part.unit,
                                   isConditional: field.condition != nil || !numeric.invalid.isEmpty))
                }
            default:
                if let alternative = alternatives[i], !alternative.isFirst { continue }
                let kind: Key.Kind = field.repetition == .once ? Self.kind(of: field.type) : .list
                var sentinel = false
                if case let .integer(_, numeric) = field.type, field.repetition == .once { sentinel = !numeric.invalid.isEmpty }
                out.append(Key(name: field.name, kind: kind, unit: field.unit,
                               isConditional: (field.condition != nil && alternatives[i] == nil) || sentinel))
            }
        }
        return out
    }

    static func kind(of type: FieldType) -> Key.Kind {
        switch type {
        case let .integer(_, numeric):
            return numeric.enumeration.isEmpty ? .number : .choice(names: numeric.enumeration.map(\.name))
        case .ieee754, .medfloat: return .number
        case .utf8, .bytes: return .text
        case .structure: return .object
        case .flags, .pad: return .object  // not reached: neither is a key of its own
        }
    }
}
