import BinaryCoding
import Yams

/// A YAML document that cannot become JSON, with the line where the problem is.
struct YAMLConversionError: Error, CustomStringConvertible {
    let line: Int?
    let reason: String
    var description: String { line.map { "YAML line \($0): \(reason)" } ?? "YAML: \(reason)" }
}

/// Converts YAML (1.1 core schema, as Yams resolves it) to `JSONValue`, for layout files and the
/// bridge's config loader. Mapping keys must be scalars and unique; mapping order is kept.
/// Scalars: null, booleans, integers (decimal, 0x hex, 0o octal; kept to 64 bits), floats
/// (including .inf/.nan), everything else (timestamps too) as its text.
enum YAMLDocument {
    /// Parses the first document of `text`; an empty document is `null`.
    static func parse(_ text: String) throws(YAMLConversionError) -> (value: JSONValue, root: Node?) {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
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
            let tag = node.tag.rawValue
            if tag == Tag.Name.null.rawValue {
                self = .null
            } else if tag == Tag.Name.bool.rawValue, let b = Bool.construct(from: scalar) {
                self = .bool(b)
            } else if tag == Tag.Name.int.rawValue, let i = Int64.construct(from: scalar) {
                self = .int(i)
            } else if tag == Tag.Name.int.rawValue, let u = UInt64.construct(from: scalar) {
                self = .uint(u)
            } else if tag == Tag.Name.int.rawValue || tag == Tag.Name.float.rawValue, let d = Double.construct(from: scalar) {
                self = .double(d)
            } else {
                self = .string(scalar.string)
            }
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
