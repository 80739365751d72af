import BinaryCoding
import Foundation
import Yams

/// A YAML document that cannot become JSON, with the line where the problem is.
struct YAMLConversionError: Error, CustomStringConvertible {
    let line: Int?
    let reason: String
    var description: String { line.map { "YAML line \($0): \(reason)" } ?? "YAML: \(reason)" }
}

/// Converts YAML to `JSONValue`, for layout files and the bridge's config loader. Plain scalars
/// follow the YAML 1.2 core schema, not YAML 1.1: only `true`/`false` are booleans (so an enum
/// name `on`/`off`/`yes`/`no` stays text), integers are decimal, `0x` hex or `0o` octal (kept to
/// 64 bits; no sexagesimal `1:30`, no leading-zero octal), floats include `.inf`/`.nan`, and
/// `null`/`~`/empty is null. Quoted scalars, and scalars tagged `!!str`, are always text.
/// Mapping keys must be scalars and unique; mapping order is kept.
enum YAMLDocument {
    /// Parses the first document of `text`; an empty document is `null`.
    static func parse(_ text: String) throws(YAMLConversionError) -> (value: JSONValue, root: Node?) {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text, .basic)
        } catch let error as YamlError {
            throw YAMLConversionError(line: nil, reason: String(describing: error).split(whereSeparator: \.isNewline).joined(separator: " "))
        } catch {
            throw YAMLConversionError(line: nil, reason: "\(error)")
        }
        guard let root else { return (.null, nil) }
        return (try JSONValue(yaml: root), root)
    }

    /// The line of the node at a layout key path such as `fields[2].bits[0].name`, if it exists.
    static func line(of path: String, in root: Node?) -> Int? {
        guard var node = root else { return nil }
        var line = node.mark?.line
        for component in pathComponents(path) {
            switch component {
            case let .key(key):
                guard let mapping = node.mapping,
                    let pair = mapping.first(where: { $0.key.scalar?.string == key })
                else { return line }
                // The key's own line is where a reader looks for a wrong key.
                line = pair.key.mark?.line ?? line
                node = pair.value
            case let .index(i):
                guard let sequence = node.sequence, i >= 0, i < sequence.count else { return line }
                node = sequence[sequence.index(sequence.startIndex, offsetBy: i)]
                line = node.mark?.line ?? line
            }
        }
        return line
    }

    enum PathComponent { case key(String), index(Int) }

    static func pathComponents(_ path: String) -> [PathComponent] {
        var result: [PathComponent] = []
        for part in path.split(separator: ".") {
            var rest = part[...]
            if let bracket = rest.firstIndex(of: "[") {
                if bracket > rest.startIndex { result.append(.key(String(rest[..<bracket]))) }
                rest = rest[bracket...]
                while rest.first == "[", let close = rest.firstIndex(of: "]"), let i = Int(rest[rest.index(after: rest.startIndex)..<close]) {
                    result.append(.index(i))
                    rest = rest[rest.index(after: close)...]
                }
            } else {
                result.append(.key(String(rest)))
            }
        }
        return result
    }
}

extension JSONValue {
    /// Converts a composed YAML node.
    init(yaml node: Node) throws(YAMLConversionError) {
        switch node {
        case let .scalar(scalar):
            let quoted = scalar.style != .plain && scalar.style != .any
            self = quoted || scalar.tag.rawValue == Tag.Name.str.rawValue
                ? .string(scalar.string) : JSONValue.coreSchemaScalar(scalar.string)
        case let .sequence(sequence):
            var items: [JSONValue] = []
            for item in sequence { items.append(try JSONValue(yaml: item)) }
            self = .array(items)
        case let .mapping(mapping):
            var object = JSONObject()
            for (key, value) in mapping {
                guard case let .scalar(k) = key else {
                    throw YAMLConversionError(line: key.mark?.line, reason: "mapping keys must be plain scalars")
                }
                if object[k.string] != nil {
                    throw YAMLConversionError(line: key.mark?.line, reason: "duplicate key '\(k.string)'")
                }
                object[k.string] = try JSONValue(yaml: value)
            }
            self = .object(object)
        case let .alias(alias):
            throw YAMLConversionError(line: alias.mark?.line, reason: "unresolved alias")
        }
    }
}

extension JSONValue {
    /// A plain YAML scalar resolved by the YAML 1.2 core schema.
    static func coreSchemaScalar(_ text: String) -> JSONValue {
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF": return .double(.infinity)
        case "-.inf", "-.Inf", "-.INF": return .double(-.infinity)
        case ".nan", ".NaN", ".NAN": return .double(.nan)
        default: break
        }
        var body = Substring(text)
        let negative = body.first == "-"
        if body.first == "-" || body.first == "+" { body = body.dropFirst() }
        let radix: Int
        if body.hasPrefix("0x") { radix = 16; body = body.dropFirst(2) }
        else if body.hasPrefix("0o") { radix = 8; body = body.dropFirst(2) }
        else { radix = 10 }
        if !body.isEmpty, body.allSatisfy({ $0.isASCII && $0.isHexDigit && Int(String($0), radix: radix) != nil }) {
            if let magnitude = UInt64(body, radix: radix) {
                if !negative { return magnitude <= UInt64(Int64.max) ? .int(Int64(magnitude)) : .uint(magnitude) }
                if magnitude <= UInt64(Int64.max) { return .int(-Int64(magnitude)) }
                if magnitude == UInt64(Int64.max) + 1 { return .int(.min) }
            }
            if radix == 10, let d = Double(text) { return .double(d) }  // beyond 64 bits
            return .string(text)
        }
        // Core-schema float: [-+]? ( . digits | digits [ . digits? ] ) ( [eE] [-+]? digits )?
        let isFloat = text.range(of: #"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$"#, options: .regularExpression) != nil
        if isFloat, let d = Double(text) { return .double(d) }
        return .string(text)
    }
}
