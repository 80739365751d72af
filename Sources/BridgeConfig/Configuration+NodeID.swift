#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Configuration {
    /// The longest `node_id`.
    public static let nodeIDMaxLength = 64

    /// The default `node_id`: this host's name, made a valid node id (``sanitizedNodeID(_:)``).
    public static var defaultNodeID: String {
        var buffer = [CChar](repeating: 0, count: 256)
        let name = gethostname(&buffer, buffer.count) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        return sanitizedNodeID(name)
    }

    /// A host name as a node id: lower-cased, every character outside `[a-z0-9_-]` replaced by
    /// `-`, cut to ``nodeIDMaxLength`` characters; `gatt2mqtt` if that leaves nothing.
    public static func sanitizedNodeID(_ hostName: String) -> String {
        let id = String(hostName.lowercased().prefix(nodeIDMaxLength).map { isNodeIDCharacter($0) ? $0 : "-" })
        return id.isEmpty ? "gatt2mqtt" : id
    }

    /// Whether `id` is usable as a `node_id`: 1 to ``nodeIDMaxLength`` ASCII letters, digits,
    /// `_` or `-` (it is an MQTT topic level, docs/scale-out.md).
    public static func isValidNodeID(_ id: String) -> Bool {
        StringRule.nodeID.matches(id)
    }

    static func isNodeIDCharacter(_ c: Character) -> Bool {
        c.isASCII && (c.isLetter || c.isNumber || c == "_" || c == "-")
    }

    /// `id` if it is a valid `node_id`, else the error for `path` and `line`.
    static func checkedNodeID(_ id: String, path: String, line: Int?) throws(ConfigError) -> String {
        guard isValidNodeID(id) else {
            throw ConfigError(path: path, line: line, message: "'\(id)' \(StringRule.nodeID.message)")
        }
        return id
    }
}
