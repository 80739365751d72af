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
            throw ConfigError(path: "", line: YAMLDocument.line(of: error), message: "invalid YAML: \(YAMLDocument.summary(of: error))")
        } catch {
            throw ConfigError(path: "", line: nil, message: "invalid YAML: \(error)")
        }
        guard let node else { return nil }
        var aliases = YAMLDocument.AliasGuard()
        return try ConfigNode(node, path: "", &aliases)
    }

    init(kind: Kind, line: Int) {
        self.kind = kind
        self.line = line
    }

    init(_ node: Yams.Node, path: String, _ aliases: inout YAMLDocument.AliasGuard) throws(ConfigError) {
        // Refused before anything walks into it: an aliased node is shared in the composed tree,
        // and walking each use would expand a "billion laughs" file into gigabytes.
        do throws(YAMLConversionError) { try aliases.visit(node) } catch {
            throw ConfigError(path: path, line: error.line, message: "YAML \(error.reason)")
        }
        switch node {
        case let .scalar(s):
            self.init(kind: .scalar(s), line: s.mark?.line ?? 0)
        case let .sequence(seq):
            var items: [ConfigNode] = []
            for (i, n) in seq.enumerated() { items.append(try ConfigNode(n, path: "\(path)[\(i)]", &aliases)) }
            self.init(kind: .sequence(items), line: seq.mark?.line ?? 0)
        case let .mapping(map):
            var members: [(key: String, keyLine: Int, value: ConfigNode)] = []
            for (k, v) in map {
                do throws(YAMLConversionError) { try aliases.visit(k) } catch {
                    throw ConfigError(path: path, line: error.line, message: "YAML \(error.reason)")
                }
                guard case let .scalar(ks) = k else {
                    throw ConfigError(path: path, line: k.mark?.line, message: "mapping keys must be plain strings")
                }
                let childPath = path.isEmpty ? ks.string : "\(path).\(ks.string)"
                if members.contains(where: { $0.key == ks.string }) {
                    throw ConfigError(path: childPath, line: ks.mark?.line, message: "duplicate key")
                }
                members.append((ks.string, ks.mark?.line ?? 0, try ConfigNode(v, path: childPath, &aliases)))
            }
            self.init(kind: .mapping(members), line: map.mark?.line ?? 0)
        case let .alias(a):
            throw ConfigError(path: path, line: a.mark?.line, message: "YAML anchors and aliases are not supported")
        }
    }

    /// The line of every key and list item below this node, by key path (`path.key`, `path[i]`).
    func recordLines(path: String, into lines: inout [String: Int]) {
        switch kind {
        case .scalar: return
        case let .sequence(items):
            for (i, item) in items.enumerated() {
                lines["\(path)[\(i)]"] = item.line
                item.recordLines(path: "\(path)[\(i)]", into: &lines)
            }
        case let .mapping(members):
            for m in members {
                lines["\(path).\(m.key)"] = m.keyLine
                m.value.recordLines(path: "\(path).\(m.key)", into: &lines)
            }
        }
    }

    /// The node as JSON (for layouts embedded in the configuration), by ``YAMLDocument``'s rules.
    func jsonValue() -> JSONValue {
        switch kind {
        case let .scalar(s):
            return YAMLDocument.json(s)  // the one rule set (YAMLDocument)
        case let .sequence(items):
            return .array(items.map { $0.jsonValue() })
        case let .mapping(members):
            var o = JSONObject()
            for m in members { o[m.key] = m.value.jsonValue() }
            return .object(o)
        }
    }
}
