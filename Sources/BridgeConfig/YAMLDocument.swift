import BinaryCoding
import Foundation
import Yams

/// A YAML document that cannot become JSON, with the line where the problem is.
public struct YAMLConversionError: Error, Sendable, Equatable, CustomStringConvertible {
    public let line: Int?
    public let reason: String
    public init(line: Int?, reason: String) {
        self.line = line
        self.reason = reason
    }
    public var description: String { line.map { "YAML line \($0): \(reason)" } ?? "YAML: \(reason)" }
}

/// The one YAML → JSON conversion of the project: the configuration file (its embedded layouts)
/// and the CLI's layout files go through it (docs/configuration.md, "YAML").
///
/// Plain scalars follow the YAML 1.2 core schema, not YAML 1.1: `true`/`True`/`TRUE` and
/// `false`/… are the booleans (so an enum name `on`/`off`/`yes`/`no` stays text);
/// `null`/`Null`/`NULL`/`~`/empty is null; integers are decimal, `0x` hex or `0o` octal (kept to
/// 64 bits; no sexagesimal `1:30`, no leading-zero octal: `017` is 17); floats are decimal with an
/// optional exponent. `.inf`, `-.inf` and `.nan`, which JSON cannot hold, stay text. Quoted
/// scalars, and scalars tagged `!!str`, are always text. Mapping keys must be scalars and unique;
/// mapping order is kept. Aliases (`*name`) are refused, with the line of the node they repeat: an
/// alias can make a few hundred bytes expand into gigabytes ("billion laughs").
public enum YAMLDocument {
    /// Parses the first document of `text`; an empty document is `null`.
    public static func parse(_ text: String) throws(YAMLConversionError) -> (value: JSONValue, tree: YAMLTree) {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text, .basic)
        } catch let error as YamlError {
            throw YAMLConversionError(line: line(of: error), reason: summary(of: error))
        } catch {
            throw YAMLConversionError(line: nil, reason: "\(error)")
        }
        guard let root else { return (.null, YAMLTree(root: nil)) }
        var aliases = AliasGuard()
        return (try JSONValue(yaml: root, &aliases), YAMLTree(root: root))
    }

    /// Finds aliases in a composed tree, walked in document order (``visit(_:)`` each node
    /// before its children): Yams puts the anchored node itself where an alias was, so a node
    /// met a second time, at the same start (line, column, kind), is an alias. Two nodes of
    /// one kind cannot start at one place, except empty scalars (harmless: not counted). The
    /// alias is refused before the walk goes into it (walking every use would expand a
    /// "billion laughs" file into gigabytes).
    struct AliasGuard {
        private struct Start: Hashable {
            let line: Int
            let column: Int
            let kind: UInt8
        }
        private var seen: Set<Start> = []

        mutating func visit(_ node: Node) throws(YAMLConversionError) {
            guard let mark = node.mark else { return }
            let kind: UInt8
            switch node {
            case let .scalar(s):
                if s.string.isEmpty { return }
                kind = 0
            case .sequence: kind = 1
            case .mapping: kind = 2
            case .alias: kind = 3
            }
            if !seen.insert(Start(line: mark.line, column: mark.column, kind: kind)).inserted {
                throw YAMLConversionError(line: mark.line, reason: "anchors and aliases are not supported (the node here is used again through an alias)")
            }
        }
    }

    /// A plain or quoted scalar as JSON, by the rules above.
    static func json(_ scalar: Node.Scalar) -> JSONValue {
        let quoted = scalar.style != .plain && scalar.style != .any
        return quoted || scalar.tag.rawValue == Tag.Name.str.rawValue ? .string(scalar.string) : coreSchemaScalar(scalar.string)
    }

    static func line(of error: YamlError) -> Int? {
        switch error {
        case let .scanner(_, _, mark, _), let .parser(_, _, mark, _), let .composer(_, _, mark, _):
            return mark.line
        default:
            return nil
        }
    }

    static func summary(of error: YamlError) -> String {
        switch error {
        case let .scanner(_, problem, _, _), let .parser(_, problem, _, _), let .composer(_, problem, _, _):
            return problem
        default:
            return "\(error)".split(whereSeparator: \.isNewline).first.map(String.init) ?? "syntax error"
        }
    }

    /// A plain YAML scalar resolved by the YAML 1.2 core schema (see ``YAMLDocument``).
    public static func coreSchemaScalar(_ text: String) -> JSONValue {
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
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
            if radix == 10, let d = Double(text), d.isFinite { return .double(d) }  // beyond 64 bits
            return .string(text)
        }
        // Core-schema float: [-+]? ( . digits | digits [ . digits? ] ) ( [eE] [-+]? digits )?
        let isFloat = text.range(of: #"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$"#, options: .regularExpression) != nil
        if isFloat, let d = Double(text), d.isFinite { return .double(d) }
        return .string(text)
    }
}

/// The composed YAML a value came from, to find the line of a key path (for error messages).
public struct YAMLTree: @unchecked Sendable {
    let root: Node?

    /// The line of the node at a key path such as `fields[2].bits[0].name`, if it exists (the
    /// line of its key for a mapping member; else the nearest line on the way).
    public func line(of path: String) -> Int? {
        guard var node = root else { return nil }
        var line = node.mark?.line
        for component in Self.pathComponents(path) {
            switch component {
            case let .key(key):
                guard let mapping = node.mapping,
                    let pair = mapping.first(where: { $0.key.scalar?.string == key })
                else { return line }
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
    /// Converts a composed YAML node (``YAMLDocument``'s rules).
    init(yaml node: Node, _ aliases: inout YAMLDocument.AliasGuard) throws(YAMLConversionError) {
        try aliases.visit(node)
        switch node {
        case let .scalar(scalar):
            self = YAMLDocument.json(scalar)
        case let .sequence(sequence):
            var items: [JSONValue] = []
            for item in sequence { items.append(try JSONValue(yaml: item, &aliases)) }
            self = .array(items)
        case let .mapping(mapping):
            var object = JSONObject()
            for (key, value) in mapping {
                try aliases.visit(key)
                guard case let .scalar(k) = key else {
                    throw YAMLConversionError(line: key.mark?.line, reason: "mapping keys must be plain scalars")
                }
                if object[k.string] != nil {
                    throw YAMLConversionError(line: key.mark?.line, reason: "duplicate key '\(k.string)'")
                }
                object[k.string] = try JSONValue(yaml: value, &aliases)
            }
            self = .object(object)
        case let .alias(alias):
            throw YAMLConversionError(line: alias.mark?.line, reason: "anchors and aliases are not supported")
        }
    }
}
