import BinaryCoding
import BridgeConfig
import BridgeStore
import Logging

/// One setting `bridge/request/options` may change (docs/bridge-api.md "options"): its key in the
/// file's words (dotted), whether it applies only after a restart, and how a value validated by
/// the file's loader is copied over the running configuration.
struct RuntimeOption: Sendable {
    let key: String
    let restartRequired: Bool
    let copy: @Sendable (inout Configuration, Configuration) -> Void
}

/// The settings that may be changed over MQTT, and how they persist: kept in the state database
/// (table `bridgeOption`, one JSON value per key) and applied over the configuration file (and
/// its `GATT2MQTT_…` overrides) at every start and reload — the file itself is never rewritten.
/// A value is checked by the file's own loader (the same rules and messages).
enum RuntimeOptions {
    static let all: [RuntimeOption] = [
        RuntimeOption(key: "log_level", restartRequired: false) { $0.logLevel = $1.logLevel },
        RuntimeOption(key: "limits.max_payload", restartRequired: true) { $0.limits.maxPayload = $1.limits.maxPayload },
        RuntimeOption(key: "limits.max_commands", restartRequired: true) { $0.limits.maxCommands = $1.limits.maxCommands },
        RuntimeOption(key: "limits.max_queued", restartRequired: true) { $0.limits.maxQueued = $1.limits.maxQueued },
        RuntimeOption(key: "limits.redelivery_cache", restartRequired: true) { $0.limits.redeliveryCache = $1.limits.redeliveryCache },
        RuntimeOption(key: "homeassistant.enabled", restartRequired: true) { $0.homeAssistant.enabled = $1.homeAssistant.enabled },
        RuntimeOption(key: "homeassistant.discovery_prefix", restartRequired: true) {
            $0.homeAssistant.discoveryPrefix = $1.homeAssistant.discoveryPrefix
        },
        RuntimeOption(key: "database.history_max_events", restartRequired: true) {
            $0.database.historyMaxEvents = $1.database.historyMaxEvents
        },
        RuntimeOption(key: "database.history_max_age", restartRequired: true) { $0.database.historyMaxAge = $1.database.historyMaxAge },
    ]

    static var keys: String { all.map(\.key).joined(separator: ", ") }

    static func named(_ key: String) -> RuntimeOption? { all.first { $0.key == key } }

    /// `{"limits":{"max_queued":5}}` (zigbee2mqtt's nesting) and `{"limits.max_queued":5}` alike,
    /// as dotted keys in order.
    static func flatten(_ o: JSONObject, prefix: String = "") -> [(key: String, value: JSONValue)] {
        var out: [(key: String, value: JSONValue)] = []
        for (key, value) in o {
            let path = prefix.isEmpty ? key : "\(prefix).\(key)"
            if let inner = value.objectValue, named(path) == nil { out += flatten(inner, prefix: path) } else { out.append((path, value)) }
        }
        return out
    }

    /// The values checked by the configuration file's loader: a configuration of only them
    /// (the rest defaults). Throws its error (path and message) for the first bad value.
    static func parse(_ values: [(key: String, value: JSONValue)]) throws(ConfigError) -> Configuration {
        var root = JSONObject()
        for (key, value) in values {
            let parts = key.split(separator: ".").map(String.init)
            if parts.count == 1 { root[key] = value; continue }
            var section = root[parts[0]]?.objectValue ?? [:]
            section[parts[1]] = value
            root[parts[0]] = .object(section)
        }
        // JSON is YAML (flow style): one parser, one set of rules for the file and the requests.
        return try Configuration(yaml: JSONValue.object(root).jsonText)
    }

    /// `configuration` with the options kept in `store` applied; one that no longer loads (a
    /// key this version does not know, a value its rules refuse) is logged and left out.
    static func applyingStored(_ store: BridgeStore, to configuration: Configuration, logger: Logger) -> Configuration {
        var out = configuration
        for (key, text) in (try? store.options()) ?? [] {
            guard let option = named(key), let value = try? JSONValue(parsing: text) else {
                logger.warning("an option set over MQTT is not known (ignored)", metadata: ["option": "\(key)"])
                continue
            }
            do { option.copy(&out, try parse([(key, value)])) } catch {
                logger.warning("an option set over MQTT is not valid (ignored)", metadata: ["option": "\(key)", "error": "\(error.message)"])
            }
        }
        return out
    }
}
