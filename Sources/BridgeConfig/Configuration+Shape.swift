// The declared shape of every section of the file (``ConfigSection``): what the loader reads
// (Configuration+Loading.swift) and what docs/config-schema.json says (``ConfigSchema``).

extension Configuration {
    /// The top level of the file. `profiles`: the registered profiles' ids (a device's `profile`
    /// is one of them); nil: any name of a profile's form.
    public static func shape(profiles: [ProfileID]? = nil) -> ConfigSection {
        ConfigSection("The gatt2mqtt bridge's configuration (docs/configuration.md).", keys: [
            ConfigKey("mqtt", .section(MQTTSettings.shape), "The broker and the topics."),
            ConfigKey("bluetooth", .section(BluetoothSettings.shape), "The adapters and how the bridge talks to BlueZ."),
            ConfigKey("database", .section(DatabaseSettings.shape), "The SQLite state file and the event history."),
            ConfigKey("homeassistant", .section(HomeAssistantSettings.shape), "Home Assistant MQTT discovery."),
            ConfigKey("metrics", .section(MetricsSettings.shape), "The Prometheus endpoint (docs/metrics.md); off without this section."),
            ConfigKey("frontend", .section(FrontendSettings.shape), "The web frontend (docs/frontend.md); off without this section."),
            ConfigKey("log_level", .choice(of: LogLevel.self),
                      "The log level (default info; GATT2MQTT_LOG_LEVEL and `run --log-level` win over it)."),
            ConfigKey("node_id", .string(.nodeID),
                      "This bridge's name among several on one broker (docs/scale-out.md); default the host name."),
            ConfigKey("cluster", .section(ClusterSettings.shape), "Several bridges on one broker sharing the devices (docs/scale-out.md); off by default."),
            ConfigKey("limits", .section(LimitSettings.shape), "Bounds on what arrives over MQTT."),
            ConfigKey("advertisement_formats", .objectMap(.formatName),
                      "The user's advertisement formats: NAME → a layout format definition (docs/advertisements.md), checked by the advertisement profile; a name may not be a built-in format's."),
            ConfigKey("devices", .list(.section(DeviceConfig.shape(profiles: profiles)), minItems: 0, unique: false),
                      "The devices. Ids and addresses are unique, `bridge` is reserved, and a device's adapter is one of bluetooth.adapters (checked by the bridge)."),
        ])
    }
}

extension MQTTSettings {
    static let tlsShape = ConfigSection("TLS to the broker (turns TLS on).", keys: [
        ConfigKey("ca_file", .string(nil), "CA certificates (PEM file)."),
        ConfigKey("ca_dir", .string(nil), "A directory of CA certificates (default /etc/ssl/certs when no ca_file)."),
        ConfigKey("cert_file", .string(nil), "Client certificate (with key_file)."),
        ConfigKey("key_file", .string(nil), "Client key (with cert_file)."),
        ConfigKey("version", .string(nil), "tlsv1.2 or tlsv1.3 (default: the library's choice)."),
        ConfigKey("verify_hostname", .boolean, "Check the broker's host name against its certificate (default true)."),
    ], rules: [.together("cert_file", "key_file", message: "cert_file and key_file go together")])

    public static let shape = ConfigSection("The broker and the topics.", keys: [
        ConfigKey("url", .string(.mqttURL), "mqtt://host[:port] or mqtts://host[:port] (TLS, default port 8883); default mqtt://127.0.0.1:1883."),
        ConfigKey("client_id", .string(nil), "MQTT client id (persistent session); default gatt2mqtt."),
        ConfigKey("base_topic", .string(.baseTopic), "Prefix of every topic; default gatt2mqtt."),
        ConfigKey("protocol", .choice(of: ProtocolVersion.self), "MQTT protocol version; default 5."),
        ConfigKey("keepalive", .duration(positive: false), "MQTT keep-alive: 0 (off) or 5s to 65535s (checked by the bridge); default 30s."),
        ConfigKey("username", .string(nil), "User name."),
        ConfigKey("password_file", .string(nil), "Read the password from this file (first line)."),
        ConfigKey("password_env", .string(nil), "Read the password from this environment variable."),
        ConfigKey("password", .refused, "passwords are not kept in the config: use password_file or password_env"),
        ConfigKey("qos", .integer(0...2), "QoS of state publishes; default 1."),
        ConfigKey("retain", .boolean, "Retain device state; default true."),
        ConfigKey("reconnect_min", .duration(positive: false), "Shortest broker reconnect backoff (at most reconnect_max, checked by the bridge); default 500ms."),
        ConfigKey("reconnect_max", .duration(positive: false), "Longest broker reconnect backoff; default 30s."),
        ConfigKey("api", .choice(of: BridgeAPIAccess.self), "What bridge/request/… may do (docs/bridge-api.md); default full."),
        ConfigKey("tls", .section(tlsShape), "TLS settings."),
    ])
}

extension BluetoothSettings {
    public static let shape = ConfigSection("The adapters and how the bridge talks to BlueZ.", keys: [
        ConfigKey("adapter", .string(.adapter), "The adapter (default hci0); not with adapters."),
        ConfigKey("adapters", .list(.string(.adapter), minItems: 1, unique: true), "Several adapters, in order (not with adapter)."),
        ConfigKey("max_connections", .integer(maxConnectionsRange), "With several adapters, the most links kept on one adapter; default 7."),
        ConfigKey("bus_address", .string(nil), "D-Bus address of BlueZ; default the system bus."),
        ConfigKey("notify", .choice(of: NotifySetting.self), "auto: AcquireNotify where BlueZ offers it, else StartNotify; start: always StartNotify. Default auto."),
    ], rules: [.notBoth("adapter", "adapters",
                        message: "adapter and adapters both given: keep one (adapter: hci0 for one adapter, adapters: [hci0, hci1] for several)")])
}

extension DatabaseSettings {
    public static let shape = ConfigSection("The SQLite state file and the event history.", keys: [
        ConfigKey("path", .string(nil), "SQLite state file (created 0600); default $STATE_DIRECTORY/gatt2mqtt.sqlite or ~/.local/state/gatt2mqtt/gatt2mqtt.sqlite."),
        ConfigKey("history_max_events", .integer(0...10_000_000), "Events kept in the history; default 10000."),
        ConfigKey("history_max_age", .duration(positive: false), "How long events are kept; default 7d."),
    ])
}

extension HomeAssistantSettings {
    public static let shape = ConfigSection("Home Assistant MQTT discovery.", keys: [
        ConfigKey("enabled", .boolean, "Publish discovery; default true."),
        ConfigKey("discovery_prefix", .string(nil), "Home Assistant's discovery prefix; default homeassistant."),
    ])
}

extension MetricsSettings {
    public static let shape = ConfigSection("The Prometheus endpoint GET /metrics (docs/metrics.md).", keys: [
        ConfigKey("listen", .string(listenRule(example: 9464)), "HOST:PORT with an IP address or localhost (the address and a port 1…65535 checked by the bridge); default 127.0.0.1:9464."),
        ConfigKey("allowed_hosts", .list(.string(hostRule), minItems: 0, unique: false),
                  "Names a request's Host may carry besides the loopback names and the listen address."),
    ])

    /// `listen`'s form; which addresses and ports are valid is checked by the bridge (``parseListen(_:)``).
    static func listenRule(example port: Int) -> StringRule {
        StringRule(pattern: "^(\\[[0-9A-Fa-f:.]+\\]|localhost|[0-9.]+):[0-9]+$",
                   message: "is not HOST:PORT with an IP address and a port 1…65535 (e.g. 127.0.0.1:\(port), [::1]:\(port), 0.0.0.0:\(port))")
    }

    /// An `allowed_hosts` entry: a host name or an IP address (IPv6 in brackets or not), no scheme or port.
    static let hostRule = StringRule(pattern: "^([A-Za-z0-9][A-Za-z0-9.-]{0,252}|\\[?[0-9A-Fa-f:.]+\\]?)$",
                                     message: "is not a host name or IP address (no scheme, port or path: e.g. bridge.example, 192.168.1.20)")
}

extension FrontendSettings {
    public static let shape = ConfigSection("The web frontend (docs/frontend.md).", keys: [
        ConfigKey("listen", .string(MetricsSettings.listenRule(example: 8080)), "HOST:PORT as for metrics.listen (the address and a port 1…65535 checked by the bridge); default 127.0.0.1:8080."),
        ConfigKey("auth_token_file", .string(StringRule(pattern: "^.+$", message: "expected the path of a file holding the token")),
                  "A file holding the token every request must carry (chmod 600). Required when listen is beyond loopback, unless allow_unauthenticated (checked by the bridge)."),
        ConfigKey("allow_unauthenticated", .boolean, "Serve a listen address beyond loopback without a token; default false."),
        ConfigKey("allowed_hosts", .list(.string(MetricsSettings.hostRule), minItems: 0, unique: false),
                  "As metrics.allowed_hosts, for the Host and a POST's Origin."),
        ConfigKey("url", .string(.webURL),
                  "The address users reach the frontend at (Home Assistant's configuration_url; its host is also allowed); default from listen unless that is a wildcard."),
    ])
}

extension ClusterSettings {
    public static let shape = ConfigSection("Several bridges on one broker sharing the devices (docs/scale-out.md).", keys: [
        ConfigKey("enabled", .boolean, "Default false."),
        ConfigKey("hysteresis", .integer(0...60), "dB by which another node must see a device better before a handover; default 6."),
        ConfigKey("handover_after", .duration(positive: true), "How long another node must see it that much better; default 10s."),
        ConfigKey("seen_interval", .duration(positive: true), "How often a node publishes what it sees; default 5s."),
        ConfigKey("lost_after", .duration(positive: true), "A sighting older than this no longer counts; longer than seen_interval (checked by the bridge); default 30s."),
        ConfigKey("claim_settle", .duration(positive: true), "How long a claimant waits for a competing claim; default 1s."),
        ConfigKey("drain_timeout", .duration(positive: true), "How long an owner handing a device over may finish its commands; default 5s."),
    ])
}

extension LimitSettings {
    public static let shape = ConfigSection("Bounds on what arrives over MQTT (docs/configuration.md).", keys: [
        ConfigKey("max_payload", .byteSize(maxPayloadRange), "The largest payload taken from the broker; default 256KiB."),
        ConfigKey("max_commands", .integer(maxCommandsRange), "The most commands one /set array may hold; default 100."),
        ConfigKey("max_queued", .integer(maxQueuedRange), "The most commands waiting per device; default 100."),
        ConfigKey("redelivery_cache", .byteSize(redeliveryCacheRange), "Memory for recognising QoS 1 redeliveries (0: off); default 1MiB."),
    ])
}

extension DeviceConfig {
    static let offlineShape = ConfigSection("What happens to a command while the device is away.", keys: [
        ConfigKey("policy", .choice(of: OfflinePolicy.self), "queue (keep until the deadline), reject (answer error at once), latest (keep the newest per attribute); default queue."),
        ConfigKey("deadline", .duration(positive: false), "How long a command may wait for an away or busy device; default 60s."),
    ])

    /// A `devices[]` entry; `profiles` as for ``Configuration/shape(profiles:)``.
    public static func shape(profiles: [ProfileID]?) -> ConfigSection {
        let profile: ConfigShape = profiles.map { .choice($0.map(\.rawValue)) }
            ?? .string(StringRule(pattern: "^[a-z][a-z0-9_]*$", message: "is not a profile name (a lowercase letter, then lowercase letters, digits and _)"))
        return ConfigSection("A device.", keys: [
            ConfigKey("id", .string(.deviceID), required: true, "Topic-safe id, unique; bridge is reserved."),
            ConfigKey("name", .string(nil), "Friendly name (may contain / for grouping)."),
            ConfigKey("address", .string(.address), "AA:BB:CC:DD:EE:FF (this or name_pattern); a passive device's may be a prefix pattern, A4:C1:38:*."),
            ConfigKey("name_pattern", .string(nil), "A regular expression on the advertised name (this or address)."),
            ConfigKey("adapter", .string(.adapter), "Always connect through this adapter, one of bluetooth.adapters."),
            ConfigKey("profile", profile, required: true, "The kind of device."),
            ConfigKey("offline", .section(offlineShape), "What happens to a command while the device is away."),
            ConfigKey("command_timeout", .duration(positive: false), "How long a written command may wait for the answer; default 5s."),
            ConfigKey("availability_timeout", .duration(positive: false),
                      "No good exchange for this long while connected makes the device offline; default 120s. A passive device: no good advertisement for this long; default 900s."),
            ConfigKey("characteristics", .list(.section(CharacteristicMapping.shape), minItems: 0, unique: false),
                      "Characteristic mappings (custom devices, and extra ones); a custom device needs at least one, and topics are unique (checked by the bridge); none on a passive device."),
            ConfigKey("format", .string(.formatName),
                      "profile: advertisement only, required there: a built-in format (bthome, xiaomi, atc, ruuvi, govee…) or a name of advertisement_formats."),
            ConfigKey("bindkey", .string(.bindkey), "profile: advertisement only: the key of an encrypted format, 32 hex digits (a secret: redacted in bridge/info); not with bindkey_file."),
            ConfigKey("bindkey_file", .string(StringRule(pattern: "^.+$", message: "expected the path of a file holding the bindkey")),
                      "profile: advertisement only: a file holding the key as 32 hex digits (a trailing newline is fine), read at load."),
            ConfigKey("min_interval", .duration(positive: false), "profile: advertisement only: publish the state at most this often; default 0 (on every change)."),
        ], rules: [.anyOf(["address", "name_pattern"], message: "needs an address or a name_pattern"),
                   .notBoth("bindkey", "bindkey_file", message: "bindkey and bindkey_file both given: keep one")])
    }
}

extension CharacteristicMapping {
    public static let shape = ConfigSection("A characteristic mapping (docs/configuration.md, \"Characteristic mappings\").", keys: [
        ConfigKey("uuid", .string(.uuid), required: true, "2A37, a 128-bit UUID, or GoPro's GP-0072."),
        ConfigKey("service", .string(nil), "The service UUID, when the characteristic UUID is not unique."),
        ConfigKey("codec", .choice(of: Codec.self), "How values are coded; default raw (hex)."),
        ConfigKey("layout", .layout, "For codec: layout (required then, refused otherwise): builtin:NAME or an inline layout (docs/layouts.md)."),
        ConfigKey("direction", .choiceOrList(Direction.allCases.map(\.rawValue)), "read, write, notify, or a list; default notify."),
        ConfigKey("poll", .duration(positive: false), "Read this often (implies read)."),
        ConfigKey("topic", .string(.mappingTopic), "Topic under <base>/<device>/; default the UUID in lower case; not set, get, response or availability."),
    ], rules: [.presentExactlyWhen(key: "layout", other: "codec", value: Codec.layout.rawValue)])
}
