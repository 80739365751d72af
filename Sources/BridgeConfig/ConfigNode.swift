import BinaryCoding
import Yams

/// A YAML node with its position, so every configuration error can name the line.
struct ConfigNode {
    enum Kind {
        case scalar(Yams.Node.Scalar)
        case mapping([(key: String, keyLine: Int, value: ConfigNode)])
        case sequence([ConfigNode])
    }
    var kind: Kind
    var line: Int

    /// Builds the tree from YAML text; syntax errors become a `ConfigError` with the line.
    static func parse(yaml: String) throws(ConfigError) -> ConfigNode? {
        let node: Yams.Node?
        do {
            node = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw ConfigError(path: "", line: ConfigNode.line(of: error), message: "invalid YAML: \(ConfigNode.summary(of: error))")
        } catch {
            throw ConfigError(path: "", line: nil, message: "invalid YAML: \(error)")
        }
        guard let node else { return nil }
        return try ConfigNode(node, path: "")
    }

    init(kind: Kind, line: Int) {
        self.kind = kind
        self.line = line
    }

    init(_ node: Yams.Node, path: String) throws(ConfigError) {
        switch node {
        case let .scalar(s):
            self.init(kind: .scalar(s), line: s.mark?.line ?? 0)
        case let .sequence(seq):
            var items: [ConfigNode] = []
            for (i, n) in seq.enumerated() { items.append(try ConfigNode(n, path: "\(path)[\(i)]")) }
            self.init(kind: .sequence(items), line: seq.mark?.line ?? 0)
        case let .mapping(map):
            var members: [(key: String, keyLine: Int, value: ConfigNode)] = []
            for (k, v) in map {
                guard case let .scalar(ks) = k else {
                    throw ConfigError(path: path, line: k.mark?.line, message: "mapping keys must be plain strings")
                }
                let childPath = path.isEmpty ? ks.string : "\(path).\(ks.string)"
                if members.contains(where: { $0.key == ks.string }) {
                    throw ConfigError(path: childPath, line: ks.mark?.line, message: "duplicate key")
                }
                members.append((ks.string, ks.mark?.line ?? 0, try ConfigNode(v, path: childPath)))
            }
            self.init(kind: .mapping(members), line: map.mark?.line ?? 0)
        case let .alias(a):
            throw ConfigError(path: path, line: a.mark?.line, message: "YAML aliases are not supported")
        }
    }

    private static func line(of error: YamlError) -> Int? {
        switch error {
        case let .scanner(_, _, mark, _), let .parser(_, _, mark, _), let .composer(_, _, mark, _):
            return mark.line
        default:
            return nil
        }
    }

    private static func summary(of error: YamlError) -> String {
        switch error {
        case let .scanner(_, problem, _, _), let .parser(_, problem, _, _), let .composer(_, problem, _, _):
            return problem
        default:
            return "\(error)".split(whereSeparator: \.isNewline).first.map(String.init) ?? "syntax error"
        }
    }

    /// The node as JSON (for layouts embedded in the configuration).
    func jsonValue() -> JSONValue {
        switch kind {
        case let .scalar(s):
            // YAML 1.2 core schema: only true/false are booleans (so an enum name `on` stays text);
            // quoted scalars are always text.
            if s.style == .plain || s.style == .any {
                let t = s.string
                switch t {
                case "true": return .bool(true)
                case "false": return .bool(false)
                case "null", "~", "": return .null
                default: break
                }
                if let i = Int64(t) { return .int(i) }
                if t.hasPrefix("0x"), let i = Int64(t.dropFirst(2), radix: 16) { return .int(i) }
                if let d = Double(t), d.isFinite, t.first.map({ $0.isNumber || $0 == "-" || $0 == "." }) == true { return .double(d) }
            }
            return .string(s.string)
        case let .sequence(items):
            return .array(items.map { $0.jsonValue() })
        case let .mapping(members):
            var o = JSONObject()
            for m in members { o[m.key] = m.value.jsonValue() }
            return .object(o)
        }
    }
}
