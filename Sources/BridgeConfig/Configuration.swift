import BinaryCoding

/// The bridge's configuration (`config/gatt2mqtt.yaml`). Every field has a default except
/// `devices[].id` and, per device, an `address` or a `name_pattern`.
public struct Configuration: Sendable, Equatable {
    public var mqtt = MQTTSettings()
    public var bluetooth = BluetoothSettings()
    public var database = DatabaseSettings()
    public var homeAssistant = HomeAssistantSettings()
    /// `metrics`: the Prometheus endpoint; nil (no `metrics` section) = off.
    public var metrics: MetricsSettings?
    /// `frontend`: the web frontend (docs/frontend.md); nil (no `frontend` section) = off.
    public var frontend: FrontendSettings?
    public var devices: [DeviceConfig] = []
    /// `log_level` (environment `GATT2MQTT_LOG_LEVEL`); `gatt2mqtt run --log-level` wins over both.
    public var logLevel: LogLevel = .info
    /// `node_id`: this bridge's name among several on one broker (docs/scale-out.md); default the
    /// host name (``defaultNodeID``); environment `GATT2MQTT_NODE_ID`.
    public var nodeID: String = Configuration.defaultNodeID
    /// `cluster`: several bridges on one broker sharing devices (docs/scale-out.md); off by default.
    public var cluster = ClusterSettings()
    /// `limits`: bounds on what arrives over MQTT (docs/configuration.md).
    public var limits = LimitSettings()
    /// `advertisement_formats`: the user's advertisement formats by name, each a format
    /// definition (JSON) that the advertisement profile's parser checks (docs/configuration.md,
    /// "Passive devices").
    public var advertisementFormats: [String: JSONValue] = [:]
    /// The line of each key path checked with the whole file after loading (a device's `format`,
    /// an `advertisement_formats` entry), for the profiles' errors (``ProfileRules/validate(configuration:)``).
    public var lines: [String: Int] = [:]

    public init() {}
}

/// `limits`: bounds on what arrives over MQTT, so that no publisher can make the bridge grow
/// without end (issue 20). Each applies from the start of the bridge (a `config/reload` that
/// changes one lists `limits` in `restart_required`).
public struct LimitSettings: Sendable, Equatable {
    /// `max_payload`: the largest payload taken from the broker, in bytes (default 256 KiB); a
    /// larger one is answered `payload_too_large` and not parsed. Under MQTT 5 the broker is also
    /// asked (CONNECT Maximum Packet Size) not to send packets much larger than this.
    public var maxPayload = 256 * 1024
    /// `max_commands`: the most commands one `/set` array may hold (default 100); more is
    /// answered `too_many_commands` and none of them runs.
    public var maxCommands = 100
    /// `max_queued`: the most commands waiting per device (default 100); one more is answered
    /// `queue_full`.
    public var maxQueued = 100
    /// `redelivery_cache`: the memory, in bytes, for recognising QoS 1 messages the broker
    /// delivers again after a reconnect (default 1 MiB; digests, not payloads, are kept).
    public var redeliveryCache = 1024 * 1024

    public init() {}

    /// The range of `max_payload`: 1 KiB to MQTT's largest payload.
    public static let maxPayloadRange = 1024...268_435_455
    public static let maxCommandsRange = 1...100_000
    public static let maxQueuedRange = 1...1_000_000
    /// The range of `redelivery_cache`: 0 (no redelivery check) to 256 MiB.
    public static let redeliveryCacheRange = 0...(256 * 1024 * 1024)
}

/// `mqtt.api`: who may use `bridge/request/…` (docs/bridge-api.md).
public enum BridgeAPIAccess: String, Sendable, Equatable, CaseIterable {
    /// Every request (the default).
    case full
    /// Only the requests that read (`info`, `devices`, `health_check`); the others are answered
    /// `forbidden`.
    case readOnly = "read_only"
    /// None: the bridge does not subscribe to `bridge/request/#`.
    case off
}

/// `cluster`: several bridges on one broker sharing the devices, each device owned by the node
/// that sees it best, handed over when another sees it clearly better (docs/scale-out.md).
public struct ClusterSettings: Sendable, Equatable {
    public var enabled = false
    /// `hysteresis`: dB by which another node must see a device better than its owner before a
    /// handover (default 6, range 0...60).
    public var hysteresis = 6
    /// `handover_after`: how long another node must see it that much better (default 10s).
    public var handoverAfter: Duration = .seconds(10)
    /// `seen_interval`: how often a node publishes what it sees (default 5s).
    public var seenInterval: Duration = .seconds(5)
    /// `lost_after`: a sighting older than this no longer counts; an owner that has neither a link
    /// nor a sighting this recent releases the device (default 30s; more than `seen_interval`).
    public var lostAfter: Duration = .seconds(30)
    /// `claim_settle`: how long a claimant waits for a competing claim before it connects (default 1s).
    public var claimSettle: Duration = .seconds(1)
    /// `drain_timeout`: how long an owner handing a device over may finish the commands it holds
    /// (default 5s).
    public var drainTimeout: Duration = .seconds(5)

    public init() {}
}

/// The levels of swift-log's `Logger.Level`, by their names.
public enum LogLevel: String, Sendable, Equatable, CaseIterable {
    case trace, debug, info, notice, warning, error, critical
}

public struct MQTTSettings: Sendable, Equatable {
    public enum ProtocolVersion: String, Sendable, Equatable, CaseIterable { case v311 = "3.1.1", v5 = "5" }
    public struct TLS: Sendable, Equatable {
        public var caFile: String?
        public var caDirectory: String?
        public var certificateFile: String?
        public var keyFile: String?
        /// "tlsv1.2" or "tlsv1.3"; nil lets the library choose.
        public var version: String?
        /// Hostname verification; on unless explicitly turned off.
        public var verifyHostname = true
        public init() {}
    }

    public var host = "127.0.0.1"
    public var port = 1883
    public var useTLS = false
    public var clientID = "gatt2mqtt"
    public var baseTopic = "gatt2mqtt"
    public var protocolVersion = ProtocolVersion.v5
    public var keepAlive: Duration = .seconds(30)
    public var username: String?
    /// Read the password from this file (first line).
    public var passwordFile: String?
    /// Read the password from this environment variable.
    public var passwordEnvironment: String?
    public var tls: TLS?
    public var qos = 1
    public var retainState = true
    public var reconnectMin: Duration = .milliseconds(500)
    public var reconnectMax: Duration = .seconds(30)
    /// `api`: what `bridge/request/…` may do (default `full`).
    public var api = BridgeAPIAccess.full

    public init() {}
}

public struct BluetoothSettings: Sendable, Equatable {
    /// `bluetooth.adapters` (or the single `bluetooth.adapter`): the adapters the bridge connects
    /// through, in order; at least one, each `hci<N>`, no repeats. Each device goes through the one
    /// that sees it best, or the one its `adapter` key pins it to (issue 14 §1).
    public var adapters = ["hci0"]
    /// `bluetooth.max_connections`: the most links the bridge keeps on one adapter (controllers
    /// hold 5 to 10 LE links); 1...32, default 7. Applies when there are several adapters.
    public var maxConnections = 7
    /// D-Bus address of the bus where `org.bluez` lives; nil = the system bus
    /// (which honours `DBUS_SYSTEM_BUS_ADDRESS`).
    public var busAddress: String?
    /// How the bridge subscribes to notifications (`bluetooth.notify`).
    public var notify: NotifySetting = .auto
    public init() {}

    /// The first adapter; setting it makes it the only one (`bluetooth.adapter`).
    public var adapter: String {
        get { adapters[0] }
        set { adapters = [newValue] }
    }

    /// The range of `bluetooth.max_connections`.
    public static let maxConnectionsRange = 1...32

    /// Whether `name` is an adapter name as BlueZ gives them: `hci` and a number (`hci0`).
    public static func isAdapterName(_ name: String) -> Bool {
        StringRule.adapter.matches(name)
    }
}

/// `bluetooth.notify`: `auto` uses `AcquireNotify` where BlueZ offers it (values through a
/// socket) and `StartNotify` elsewhere; `start` always uses `StartNotify` (values as
/// `PropertiesChanged`), e.g. where another client already holds the characteristic's socket.
public enum NotifySetting: String, Sendable, Equatable, CaseIterable {
    case auto, start
}

public struct DatabaseSettings: Sendable, Equatable {
    /// nil = `$STATE_DIRECTORY/gatt2mqtt.sqlite`, else `~/.local/state/gatt2mqtt/gatt2mqtt.sqlite`.
    public var path: String?
    public var historyMaxEvents = 10_000
    public var historyMaxAge: Duration = .seconds(7 * 24 * 3600)
    public init() {}
}

public struct HomeAssistantSettings: Sendable, Equatable {
    public var enabled = true
    public var discoveryPrefix = "homeassistant"
    public init() {}
}

/// `metrics.listen`: where the Prometheus endpoint (`GET /metrics`, docs/metrics.md) listens.
public struct MetricsSettings: Sendable, Equatable {
    /// An IP address (IPv6 without brackets); `localhost` is taken as `127.0.0.1`.
    public var host = "127.0.0.1"
    public var port = 9464
    /// `metrics.allowed_hosts`: names (besides the loopback names and the listen address) a
    /// request's `Host` may carry; any other is refused (DNS rebinding).
    public var allowedHosts: [String] = []

    public init() {}

    public init(host: String, port: Int, allowedHosts: [String] = []) {
        self.host = host
        self.port = port
        self.allowedHosts = allowedHosts
    }

    /// `HOST:PORT` (`[HOST]:PORT` for IPv6).
    public var listen: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// `frontend`: where the web frontend (docs/frontend.md) listens, and the token it asks for.
public struct FrontendSettings: Sendable, Equatable {
    /// An IP address (IPv6 without brackets); `localhost` is taken as `127.0.0.1`.
    public var host = "127.0.0.1"
    public var port = 8080
    /// A file holding the token every request must carry (nil: no authentication).
    public var authTokenFile: String?
    /// `frontend.allow_unauthenticated`: serve without a token on an address beyond loopback
    /// (without it, such a configuration is refused).
    public var allowUnauthenticated = false
    /// `frontend.allowed_hosts`: names (besides the loopback names and the listen address) a
    /// request's `Host` (and a state-changing request's `Origin`) may carry; any other is refused.
    public var allowedHosts: [String] = []
    /// `frontend.url`: the address users reach the frontend at (behind a proxy, by a host
    /// name), an `http` or `https` URL; Home Assistant links the devices to it
    /// (`configuration_url`). Nil: ``address``'s default.
    public var url: String?

    public init() {}

    public init(host: String, port: Int, authTokenFile: String? = nil, allowUnauthenticated: Bool = false, allowedHosts: [String] = []) {
        self.host = host
        self.port = port
        self.authTokenFile = authTokenFile
        self.allowUnauthenticated = allowUnauthenticated
        self.allowedHosts = allowedHosts
    }

    /// `HOST:PORT` (`[HOST]:PORT` for IPv6).
    public var listen: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Where users reach the frontend: `url`, else `http://<listen>` when the listen address is
    /// one address (not the wildcard `0.0.0.0` or `::`, which says nothing of how it is reached).
    public var address: String? {
        if let url { return url }
        return host == "0.0.0.0" || host == "::" ? nil : "http://\(listen)"
    }

    /// Listening on a loopback address only (`127.x.y.z` or `::1`).
    public var isLoopback: Bool { host.hasPrefix("127.") || host == "::1" }
}

/// A device's profile, by name: the `profile` of a `devices[]` entry. Open: which profiles exist
/// is what the bridge registers (`DeviceProfiles.all`, each a `DeviceProfile` of BridgeCore); the
/// configuration checks a name against them when it is given them (``ProfileRules``), and only
/// its form otherwise (a lowercase letter, then lowercase letters, digits and `_`).
public struct ProfileID: RawRepresentable, Hashable, Sendable, Comparable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String

    /// Nil when `rawValue` is not a profile name's form.
    public init?(rawValue: String) {
        guard let first = rawValue.unicodeScalars.first, ("a"..."z").contains(first),
              rawValue.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }) else { return nil }
        self.rawValue = rawValue
    }

    /// A name written in the code (a profile's own id); it must have the form.
    public init(stringLiteral value: String) {
        guard let id = ProfileID(rawValue: value) else { preconditionFailure("'\(value)' is not a profile name") }
        self = id
    }

    public var description: String { rawValue }
    public static func < (a: ProfileID, b: ProfileID) -> Bool { a.rawValue < b.rawValue }

    // The built-in profiles' ids, for code and tests that name them (`device.profile == .custom`).
    /// An Open GoPro camera.
    public static let gopro: ProfileID = "gopro"
    /// Rokid glasses.
    public static let rokid: ProfileID = "rokid"
    /// A GATT device described by characteristic mappings (layouts, Caps, raw).
    public static let custom: ProfileID = "custom"
    /// A passive device: never connected, read from its advertisements (docs/configuration.md,
    /// "Passive devices").
    public static let advertisement: ProfileID = "advertisement"
}

/// What the configuration needs of a registered profile: its id, and the checks of a `devices[]`
/// entry that only this profile makes (a `custom` device needs characteristics).
public protocol ProfileRules: Sendable {
    var id: ProfileID { get }
    /// Throws when `device` is not a usable device of this profile; `path` is the entry's key path.
    func validate(_ device: DeviceConfig, path: String) throws(ConfigError)
    /// Throws when the whole file does not hold for this profile (checked after loading, with
    /// the file's other sections: the advertisement profile's formats and its devices' `format`).
    func validate(configuration: Configuration) throws(ConfigError)
}

extension ProfileRules {
    public func validate(_ device: DeviceConfig, path: String) throws(ConfigError) {}
    public func validate(configuration: Configuration) throws(ConfigError) {}
}

/// What happens to a command for a device that is away.
public enum OfflinePolicy: String, Sendable, Equatable, CaseIterable {
    /// Keep it until the device returns or the deadline passes (then `expired`).
    case queue
    /// Answer `error` (device offline) at once.
    case reject
    /// Keep only the newest command per attribute, with the deadline.
    case latest
}

public struct DeviceConfig: Sendable, Equatable {
    public var id: String
    public var name: String?
    /// `AA:BB:CC:DD:EE:FF`, upper case.
    public var address: String?
    /// Regular expression matched against the advertised name when no address is given.
    public var namePattern: String?
    /// `adapter`: the adapter this device is always connected through (one of
    /// `bluetooth.adapters`); nil lets the bridge choose the one that sees it best.
    public var adapter: String?
    public var profile: ProfileID
    public var offlinePolicy = OfflinePolicy.queue
    public var offlineDeadline: Duration = .seconds(60)
    public var commandTimeout: Duration = .seconds(5)
    /// No good exchange for this long (while connected) makes the device `offline`; for a passive
    /// device, no good advertisement for this long (default ``passiveAvailabilityTimeout``).
    public var availabilityTimeout: Duration = .seconds(120)
    public var characteristics: [CharacteristicMapping] = []
    /// A passive device's `format`: a built-in format's name or one of `advertisement_formats`.
    public var format: String?
    /// A passive device's key (16 bytes), from `bindkey` or read from `bindkey_file` at load.
    public var bindkey: [UInt8]?
    /// Where `bindkey` was read from (kept so the file, not the key, is what `json` gives).
    public var bindkeyFile: String?
    /// A passive device publishes its state at most this often (0: on every change).
    public var minInterval: Duration = .zero

    /// Home Assistant's own default for passive Bluetooth devices (15 minutes without an
    /// advertisement: unavailable).
    public static let passiveAvailabilityTimeout: Duration = .seconds(900)

    /// Never connected: read from advertisements (`profile: advertisement`).
    public var isPassive: Bool { profile == .advertisement }

    /// The address is a prefix pattern (`A4:C1:38:*`) rather than one address.
    public var addressIsPattern: Bool { address?.hasSuffix("*") ?? false }

    /// Whether a sighting's `address` is this device's: equal, or starting with the pattern's prefix.
    public func matchesAddress(_ other: String) -> Bool {
        guard let address else { return false }
        let a = other.uppercased()
        return addressIsPattern ? a.hasPrefix(String(address.dropLast())) : a == address
    }

    public init(id: String, profile: ProfileID) {
        self.id = id
        self.profile = profile
    }
}

public struct CharacteristicMapping: Sendable, Equatable {
    public enum Codec: String, Sendable, Equatable, CaseIterable { case layout, caps, gopro, raw }
    public enum Direction: String, Sendable, Equatable, CaseIterable { case read, write, notify }

    /// The characteristic UUID as written (16-bit `2A37`, 128-bit, or `GP-0072`).
    public var uuid: String
    /// Service UUID, when the characteristic UUID is not unique on the device.
    public var service: String?
    public var codec: Codec
    /// For `layout`: `builtin:NAME` or an inline layout object.
    public var layout: JSONValue?
    public var directions: Set<Direction>
    public var pollInterval: Duration?
    /// Topic name under `<base>/<device>/`.
    public var topic: String

    public init(uuid: String, codec: Codec, directions: Set<Direction>, topic: String) {
        self.uuid = uuid
        self.codec = codec
        self.directions = directions
        self.topic = topic
    }
}
