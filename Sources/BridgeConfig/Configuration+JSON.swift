import BinaryCoding

// The loaded configuration as JSON, in the file's keys (after the `GATT2MQTT_…` overrides), for
// `bridge/info`'s `config` (docs/bridge-api.md): what zigbee2mqtt's users read there. Secrets
// are not in a `Configuration` (a `password` is refused: `password_file` or `password_env`
// name where it is); the paths and variable names are given, never what the files hold, and
// any key that names a secret is redacted all the same (``redactingSecrets(_:)``).

extension Configuration {
    /// The configuration in the file's shape, secrets redacted.
    public var json: JSONValue {
        var o = JSONObject()
        o["mqtt"] = mqtt.json
        o["bluetooth"] = bluetooth.json
        o["database"] = database.json
        o["homeassistant"] = ["enabled": .bool(homeAssistant.enabled), "discovery_prefix": .string(homeAssistant.discoveryPrefix)]
        if let metrics { o["metrics"] = ["listen": .string(metrics.listen), "allowed_hosts": .array(metrics.allowedHosts.map { .string($0) })] }
        if let frontend {
            var f: JSONObject = ["listen": .string(frontend.listen), "allow_unauthenticated": .bool(frontend.allowUnauthenticated),
                                 "allowed_hosts": .array(frontend.allowedHosts.map { .string($0) })]
            if let t = frontend.authTokenFile { f["auth_token_file"] = .string(t) }
            o["frontend"] = .object(f)
        }
        o["log_level"] = .string(logLevel.rawValue)
        o["node_id"] = .string(nodeID)
        o["cluster"] = ["enabled": .bool(cluster.enabled), "hysteresis": .int(Int64(cluster.hysteresis)),
                        "handover_after": .string(formatDuration(cluster.handoverAfter)),
                        "seen_interval": .string(formatDuration(cluster.seenInterval)),
                        "lost_after": .string(formatDuration(cluster.lostAfter)),
                        "claim_settle": .string(formatDuration(cluster.claimSettle)),
                        "drain_timeout": .string(formatDuration(cluster.drainTimeout))]
        o["limits"] = ["max_payload": .int(Int64(limits.maxPayload)), "max_commands": .int(Int64(limits.maxCommands)),
                       "max_queued": .int(Int64(limits.maxQueued)), "redelivery_cache": .int(Int64(limits.redeliveryCache))]
        if !advertisementFormats.isEmpty {
            var f = JSONObject()
            for name in advertisementFormats.keys.sorted() { f[name] = advertisementFormats[name] }
            o["advertisement_formats"] = .object(f)
        }
        o["devices"] = .array(devices.map(\.json))
        return Self.redactingSecrets(.object(o))
    }

    /// What stands for a redacted value.
    public static let redacted = "<redacted>"

    /// `value` with every member whose key names a secret (`password`, `token`, `secret`,
    /// `bindkey`, `api_key`, `private_key`) replaced by ``redacted``, at any depth; keys ending in
    /// `_file` or `_env` (where the secret is: a path, a variable's name) are kept.
    public static func redactingSecrets(_ value: JSONValue) -> JSONValue {
        switch value {
        case let .object(o):
            var out = JSONObject()
            for (key, v) in o {
                let k = key.lowercased()
                let names = ["password", "token", "secret", "bindkey", "api_key", "private_key"].contains { k.contains($0) }
                out[key] = names && !k.hasSuffix("_file") && !k.hasSuffix("_env") ? .string(redacted) : redactingSecrets(v)
            }
            return .object(out)
        case let .array(a): return .array(a.map(redactingSecrets))
        default: return value
        }
    }
}

extension MQTTSettings {
    var json: JSONValue {
        var o: JSONObject = ["url": .string("\(useTLS ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)"),
                             "client_id": .string(clientID), "base_topic": .string(baseTopic),
                             "protocol": .string(protocolVersion.rawValue), "keepalive": .string(formatDuration(keepAlive))]
        if let username { o["username"] = .string(username) }
        if let passwordFile { o["password_file"] = .string(passwordFile) }
        if let passwordEnvironment { o["password_env"] = .string(passwordEnvironment) }
        if let tls {
            var t = JSONObject()
            if let v = tls.caFile { t["ca_file"] = .string(v) }
            if let v = tls.caDirectory { t["ca_dir"] = .string(v) }
            if let v = tls.certificateFile { t["cert_file"] = .string(v) }
            if let v = tls.keyFile { t["key_file"] = .string(v) }
            if let v = tls.version { t["version"] = .string(v) }
            t["verify_hostname"] = .bool(tls.verifyHostname)
            o["tls"] = .object(t)
        }
        o["qos"] = .int(Int64(qos))
        o["retain"] = .bool(retainState)
        o["reconnect_min"] = .string(formatDuration(reconnectMin))
        o["reconnect_max"] = .string(formatDuration(reconnectMax))
        o["api"] = .string(api.rawValue)
        return .object(o)
    }
}

extension BluetoothSettings {
    var json: JSONValue {
        var o: JSONObject = ["adapters": .array(adapters.map { .string($0) }), "max_connections": .int(Int64(maxConnections)),
                             "notify": .string(notify.rawValue)]
        if let busAddress { o["bus_address"] = .string(busAddress) }
        return .object(o)
    }
}

extension DatabaseSettings {
    var json: JSONValue {
        var o: JSONObject = ["history_max_events": .int(Int64(historyMaxEvents)), "history_max_age": .string(formatDuration(historyMaxAge))]
        if let path { o["path"] = .string(path) }
        return .object(o)
    }
}
