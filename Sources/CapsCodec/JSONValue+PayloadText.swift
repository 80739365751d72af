import BinaryCoding

extension JSONValue {
    /// Compact JSON text for CXR payload strings (spec rokid-caps.md §5.3, §6): no white space,
    /// object keys in their given order, and a number keeps the form it was parsed as: an
    /// integer is written as an integer, a fractional-form number keeps its fraction (`16.0`
    /// stays `16.0`, unlike ``jsonText`` which writes `16`), so a hand-written payload such as
    /// `{"textSize":16.0}` reaches the glasses as written. Non-finite doubles become `null`.
    public var payloadText: String {
        var out = [UInt8]()
        writePayload(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    func writePayload(to out: inout [UInt8]) {
        switch self {
        case let .double(v):
            if v.isFinite { out.append(contentsOf: v.description.utf8) } else { out.append(contentsOf: "null".utf8) }
        case let .array(a):
            out.append(UInt8(ascii: "["))
            for (n, v) in a.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                v.writePayload(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case let .object(o):
            out.append(UInt8(ascii: "{"))
            for (n, m) in o.members.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: JSONValue.string(m.key).jsonText.utf8)
                out.append(UInt8(ascii: ":"))
                m.value.writePayload(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        default:
            out.append(contentsOf: jsonText.utf8)
        }
    }
}
