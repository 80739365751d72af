extension LimitSettings {
    /// The `limits` section (docs/configuration.md); sizes as bytes or with a unit (`256KiB`).
    /// From the environment (`partial`), an error names `path`, which already names the key and
    /// the variable.
    mutating func load(_ node: ConfigNode, path: String, partial: Bool = false) throws(ConfigError) {
        do throws(ConfigError) {
            var r = try MappingReader(node, path: path, section: Self.shape)
            if let v = try r.byteSize("max_payload") { maxPayload = v }
            if let v = try r.int("max_commands") { maxCommands = v }
            if let v = try r.int("max_queued") { maxQueued = v }
            if let v = try r.byteSize("redelivery_cache") { redeliveryCache = v }
            try r.finish()
        } catch {
            guard partial else { throw error }
            throw ConfigError(path: path, line: nil, message: error.message)
        }
    }
}

extension MappingReader {
    /// A size in bytes: a whole number, optionally with a unit `B`, `KiB`, `MiB` (also `K`/`KB`,
    /// `M`/`MB`, taken as 1024 and 1024², as a broker's settings are), e.g. `262144`, `256KiB`, `1MiB`.
    mutating func byteSize(_ key: String) throws(ConfigError) -> Int? {
        guard case let .byteSize(range) = shape(key) else { preconditionFailure("\(child(key)) is not declared a size") }
        guard let n = take(key) else { return nil }
        guard case let .scalar(s) = n.kind, let v = parseByteSize(s.string) else {
            throw ConfigError(path: child(key), line: n.line, message: "expected a size like 262144, 256KiB or 1MiB")
        }
        guard range.contains(v) else {
            throw ConfigError(path: child(key), line: n.line,
                              message: "\(v) bytes is out of range \(range.lowerBound)…\(range.upperBound)")
        }
        return v
    }
}

/// `262144`, `256KiB`, `1MiB`, `512B` (units any case; `K`, `KB`, `M`, `MB` are binary too);
/// nil for anything else, and for a size beyond `Int`.
func parseByteSize(_ text: String) -> Int? {
    let t = text.trimmingCharacters(in: " ")
    let digits = t.prefix { $0.isASCII && $0.isNumber }
    guard !digits.isEmpty, let number = Int(digits) else { return nil }
    let unit = String(t.dropFirst(digits.count)).trimmingCharacters(in: " ").lowercased()
    let scale: Int
    switch unit {
    case "", "b": scale = 1
    case "k", "kb", "kib": scale = 1024
    case "m", "mb", "mib": scale = 1024 * 1024
    default: return nil
    }
    let (v, overflow) = number.multipliedReportingOverflow(by: scale)
    return overflow ? nil : v
}

/// The text ``parseByteSize(_:)`` reads, as a JSON Schema pattern (docs/config-schema.json).
let byteSizePattern = "^ *[0-9]+ *([bB]|[kKmM]([iI]?[bB])?)? *$"
