import BinaryCoding

/// The configuration's JSON Schema (draft-07), generated from the declarations the loader
/// reads by (``Configuration/shape(profiles:)``): docs/config-schema.json, `gatt2mqtt
/// config-schema`, and `config_schema` in `bridge/info`. Editors that read YAML with a schema
/// (yaml-language-server's `# yaml-language-server: $schema=…` line) complete and check the file
/// with it. What it cannot state (one key against another, a value against the rest of the file,
/// a duration's upper bound when written as text) the bridge checks, and the key's description
/// says so.
public enum ConfigSchema {
    /// Draft-07: what yaml-language-server and most editors read (every keyword used here is in it).
    public static let dialect = "http://json-schema.org/draft-07/schema#"

    /// The schema; `profiles`: the registered profiles' ids (`DeviceProfiles.all`).
    public static func json(profiles: [ProfileID]?) -> JSONValue {
        var o: JSONObject = ["$schema": .string(dialect), "title": "gatt2mqtt configuration"]
        o.merge(section(Configuration.shape(profiles: profiles)))
        return .object(o)
    }

    /// The schema as the file docs/config-schema.json holds it (indented, ending with a newline).
    public static func text(profiles: [ProfileID]?) -> String {
        json(profiles: profiles).prettyJSONText + "\n"
    }

    static func section(_ s: ConfigSection) -> JSONObject {
        var o: JSONObject = ["type": "object", "description": .string(s.help)]
        var properties = JSONObject()
        for k in s.keys {
            var p: JSONObject = ["description": .string(k.help)]
            p.merge(value(k.shape))
            properties[k.name] = .object(p)
        }
        o["properties"] = .object(properties)
        let required = s.keys.filter(\.required).map { JSONValue.string($0.name) }
        if !required.isEmpty { o["required"] = .array(required) }
        o["additionalProperties"] = false
        let rules = s.rules.map(rule)
        if !rules.isEmpty { o["allOf"] = .array(rules) }
        return o
    }

    static func value(_ shape: ConfigShape) -> JSONObject {
        switch shape {
        case let .string(rule):
            var o: JSONObject = ["type": "string"]
            if let rule { o["pattern"] = .string(rule.pattern) }
            return o
        case let .integer(range):
            return ["type": "integer", "minimum": .int(Int64(range.lowerBound)), "maximum": .int(Int64(range.upperBound))]
        case .boolean:
            return ["type": "boolean"]
        case let .duration(positive):
            var number: JSONObject = ["type": "number", "maximum": .int(DurationLimits.maximumSeconds)]
            number[positive ? "exclusiveMinimum" : "minimum"] = 0
            let text: JSONObject = ["type": "string", "pattern": .string(DurationLimits.pattern),
                                    "description": .string(durationText + (positive ? "; longer than 0" : "") + " (the bounds as text checked by the bridge)")]
            return ["anyOf": [.object(number), .object(text)]]
        case let .byteSize(range):
            return ["anyOf": [["type": "integer", "minimum": .int(Int64(range.lowerBound)), "maximum": .int(Int64(range.upperBound))],
                              ["type": "string", "pattern": .string(byteSizePattern)]]]
        case let .choice(names):
            return ["enum": .array(choices(names))]
        case let .choiceOrList(names):
            let one: JSONValue = ["enum": .array(choices(names))]
            return ["anyOf": [one, ["type": "array", "items": one]]]
        case let .section(s):
            var o = section(s)
            o["description"] = nil  // the key's own description stands
            return o
        case let .list(item, minItems, unique):
            var o: JSONObject = ["type": "array", "items": .object(value(item))]
            if minItems > 0 { o["minItems"] = .int(Int64(minItems)) }
            if unique { o["uniqueItems"] = true }
            return o
        case .layout:
            return ["type": ["string", "object"]]
        case .refused:
            return ["not": [:]]
        case let .objectMap(rule):
            return ["type": "object", "propertyNames": ["pattern": .string(rule.pattern)], "additionalProperties": ["type": "object"]]
        }
    }

    static let durationText = "500ms, 5s, 2m, 1h, 7d or a number of seconds, at most \(DurationLimits.maximumText)"

    /// The names, and a name that YAML reads as a number (`protocol: 5`) as that number too.
    static func choices(_ names: [String]) -> [JSONValue] {
        names.flatMap { name -> [JSONValue] in
            if let n = Int64(name) { return [.string(name), .int(n)] }
            return [.string(name)]
        }
    }

    static func rule(_ rule: SectionRule) -> JSONValue {
        switch rule {
        case let .anyOf(keys, _):
            return ["anyOf": .array(keys.map { ["required": [.string($0)]] })]
        case let .notBoth(a, b, _):
            return ["not": ["required": [.string(a), .string(b)]]]
        case let .together(a, b, _):
            return ["dependencies": [a: [.string(b)], b: [.string(a)]]]
        case let .presentExactlyWhen(key, other, value):
            return ["if": ["properties": [other: ["const": .string(value)]], "required": [.string(other)]],
                    "then": ["required": [.string(key)]],
                    "else": ["not": ["required": [.string(key)]]]]
        }
    }
}
