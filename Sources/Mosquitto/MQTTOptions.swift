#if canImport(Glibc)
import Glibc
#endif

/// MQTT protocol level (MQTT 3.1.1 §3.1.2.2, MQTT 5 §3.1.2.2).
public enum MQTTProtocolVersion: Int32, Sendable, Hashable {
    case v311 = 4
    case v5 = 5
}

/// Where the password comes from. Its value never appears in logs or descriptions.
public enum MQTTPassword: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Read the first line of this file at connect time.
    case file(String)
    /// Read this environment variable at connect time.
    case environment(String)
    /// A literal value (tests, or a value the caller already holds in memory).
    case literal(String)

    public var description: String {
        switch self {
        case .file(let path): "password from file \(path)"
        case .environment(let name): "password from $\(name)"
        case .literal: "password (literal, redacted)"
        }
    }

    public var debugDescription: String { description }

    /// Resolves the password. Errors name the file or variable, never the value.
    func resolve() throws(MQTTError) -> String {
        switch self {
        case .literal(let value):
            return value
        case .environment(let name):
            guard let raw = getenv(name) else {
                throw .credentials("environment variable \(name) is not set")
            }
            return String(cString: raw)
        case .file(let path):
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw .credentials("cannot open password file \(path): \(String(cString: strerror(errno)))")
            }
            defer { close(fd) }
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while bytes.count < 65_536 {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 {
                    throw .credentials("cannot read password file \(path): \(String(cString: strerror(errno)))")
                }
                if n == 0 { break }
                bytes.append(contentsOf: chunk[0..<n])
            }
            let line = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false).first ?? []
            var text = Array(line)
            if text.last == UInt8(ascii: "\r") { text.removeLast() }
            return String(decoding: text, as: UTF8.self)
        }
    }
}

/// User name and password (MQTT 5 §3.1.3.5, §3.1.3.6).
public struct MQTTCredentials: Sendable, Hashable, CustomStringConvertible {
    public var username: String
    public var password: MQTTPassword?

    public init(username: String, password: MQTTPassword? = nil) {
        self.username = username
        self.password = password
    }

    public var description: String { "user \(username), \(password.map(\.description) ?? "no password")" }
}

/// TLS settings (the broker's `listener`+`cafile`/`certfile`/`keyfile` counterpart).
/// Hostname verification is on unless `verifyHostname` is set to false.
public struct MQTTTLSOptions: Sendable, Hashable {
    /// PEM file of trusted CA certificates.
    public var caFile: String?
    /// Directory of hashed CA certificates (`openssl rehash`).
    public var caDirectory: String?
    /// PEM client certificate (needs `keyFile`).
    public var certificateFile: String?
    /// PEM private key of the client certificate.
    public var keyFile: String?
    /// Passphrase of an encrypted `keyFile` (read at `init`, never logged).
    public var keyPassword: MQTTPassword?
    /// "tlsv1.2" or "tlsv1.3"; nil lets OpenSSL choose (libmosquitto's default allows 1.2 and 1.3).
    public var version: String?
    /// OpenSSL cipher list; nil for the default.
    public var ciphers: String?
    /// Check that the broker certificate matches the host name (default true).
    public var verifyHostname: Bool

    public init(
        caFile: String? = nil, caDirectory: String? = nil, certificateFile: String? = nil, keyFile: String? = nil,
        keyPassword: MQTTPassword? = nil, version: String? = nil, ciphers: String? = nil, verifyHostname: Bool = true
    ) {
        self.caFile = caFile
        self.caDirectory = caDirectory
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.keyPassword = keyPassword
        self.version = version
        self.ciphers = ciphers
        self.verifyHostname = verifyHostname
    }
}

/// The Will message (MQTT 5 §3.1.2.5, §3.1.3.2–3.1.3.4).
public struct MQTTWill: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    public var retain: Bool
    /// Will properties (MQTT 5 only): payload format, expiry, content type, response topic,
    /// correlation data, user properties.
    public var properties: MQTTPublishProperties

    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
                properties: MQTTPublishProperties = MQTTPublishProperties()) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.properties = properties
    }
}

/// Automatic reconnect with jittered exponential backoff.
///
/// Attempt *n* (1-based) waits a uniformly random time in `[d/2, d]` where
/// `d = min(maximumDelay, minimumDelay · 2^(n-1))` ("equal jitter"); a successful CONNACK
/// resets *n*.
public struct MQTTReconnectPolicy: Sendable, Hashable {
    /// Reconnect at all after a lost connection.
    public var enabled: Bool
    public var minimumDelay: Duration
    public var maximumDelay: Duration
    /// Also retry when the very first connection attempt fails; `connect()` then waits for
    /// the first success. When false (default) `connect()` throws the first failure.
    public var retryInitialConnect: Bool

    public init(enabled: Bool = true, minimumDelay: Duration = .milliseconds(250), maximumDelay: Duration = .seconds(30),
                retryInitialConnect: Bool = false) {
        self.enabled = enabled
        self.minimumDelay = minimumDelay
        self.maximumDelay = maximumDelay
        self.retryInitialConnect = retryInitialConnect
    }

    /// The jittered delay before attempt `attempt` (1-based).
    public func delay(forAttempt attempt: Int, random: Double = Double.random(in: 0...1)) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        var base = minimumDelay * (1 << exponent)
        if base > maximumDelay || base < minimumDelay { base = maximumDelay }
        return base / 2 + (base / 2) * min(max(random, 0), 1)
    }
}

/// What `publish` does while the client is disconnected (between a lost connection and the
/// next CONNACK).
public enum MQTTOfflinePolicy: Sendable, Hashable {
    /// QoS 1/2 publishes are queued in libmosquitto and sent after reconnect, up to `limit`
    /// unacknowledged QoS ≥ 1 messages in total; beyond it `publish` throws
    /// `.offlineQueueFull`. QoS 0 publishes fail with `.notConnected`.
    case queue(limit: Int)
    /// Every publish while disconnected fails with `.notConnected`.
    case failFast
}

/// What a subscription does when its bounded inbound buffer is full.
public enum MQTTInboundOverflow: Sendable, Hashable {
    /// Keep the buffered messages, drop the new one.
    case dropNewest
    /// Drop the oldest buffered message to make room.
    case dropOldest
}

/// Everything needed to connect. Validated by `MQTTClient.init`.
public struct MQTTConnectOptions: Sendable, Hashable {
    public var host: String
    public var port: Int
    /// Local address to bind to, if any.
    public var bindAddress: String?
    /// Client identifier (MQTT 5 §3.1.3.1). Required for a persistent session.
    public var clientID: String?
    public var protocolVersion: MQTTProtocolVersion
    /// Keep alive in seconds (MQTT 5 §3.1.2.10): 0 (off) or 5…65535 (libmosquitto's minimum is 5).
    public var keepAlive: Int
    /// Clean session (3.1.1) / clean start (5). False asks the broker to keep the session.
    public var cleanSession: Bool
    /// MQTT 5 Session Expiry Interval in seconds (§3.1.2.11.2). With `cleanSession == false`
    /// on MQTT 5 a persistent session needs a non-zero value (`UInt32.max`: never expires).
    public var sessionExpiryInterval: UInt32?
    /// Extra MQTT 5 CONNECT user properties.
    public var connectUserProperties: [MQTTUserProperty]
    public var will: MQTTWill?
    public var credentials: MQTTCredentials?
    public var tls: MQTTTLSOptions?
    public var reconnect: MQTTReconnectPolicy
    public var offlinePolicy: MQTTOfflinePolicy
    /// Messages buffered per subscription before `inboundOverflow` applies.
    public var inboundBufferLimit: Int
    public var inboundOverflow: MQTTInboundOverflow
    /// Largest payload `publish` accepts (at most 268 435 455, MQTT 5 §1.5.7).
    public var maximumPayloadSize: Int
    /// Unacknowledged QoS 1/2 messages in flight (libmosquitto's default is 20).
    public var maxInflightMessages: Int
    /// Disable Nagle's algorithm (default true, lower latency).
    public var tcpNoDelay: Bool
    /// MQTT 5 Maximum Packet Size (§3.1.2.11.4), sent in CONNECT: the broker does not send this
    /// client a packet larger than this many bytes (it drops it instead). nil: no limit asked.
    /// MQTT 5 only.
    public var maximumPacketSize: UInt32?

    public init(
        host: String = "127.0.0.1", port: Int = 1883, bindAddress: String? = nil, clientID: String? = nil,
        protocolVersion: MQTTProtocolVersion = .v5, keepAlive: Int = 60, cleanSession: Bool = true,
        sessionExpiryInterval: UInt32? = nil, connectUserProperties: [MQTTUserProperty] = [], will: MQTTWill? = nil,
        credentials: MQTTCredentials? = nil, tls: MQTTTLSOptions? = nil, reconnect: MQTTReconnectPolicy = MQTTReconnectPolicy(),
        offlinePolicy: MQTTOfflinePolicy = .queue(limit: 1000), inboundBufferLimit: Int = 1024,
        inboundOverflow: MQTTInboundOverflow = .dropNewest, maximumPayloadSize: Int = 268_435_455,
        maxInflightMessages: Int = 20, tcpNoDelay: Bool = true, maximumPacketSize: UInt32? = nil
    ) {
        self.maximumPacketSize = maximumPacketSize
        self.host = host
        self.port = port
        self.bindAddress = bindAddress
        self.clientID = clientID
        self.protocolVersion = protocolVersion
        self.keepAlive = keepAlive
        self.cleanSession = cleanSession
        self.sessionExpiryInterval = sessionExpiryInterval
        self.connectUserProperties = connectUserProperties
        self.will = will
        self.credentials = credentials
        self.tls = tls
        self.reconnect = reconnect
        self.offlinePolicy = offlinePolicy
        self.inboundBufferLimit = inboundBufferLimit
        self.inboundOverflow = inboundOverflow
        self.maximumPayloadSize = maximumPayloadSize
        self.maxInflightMessages = maxInflightMessages
        self.tcpNoDelay = tcpNoDelay
    }

    /// Checks everything that can be checked before touching the network.
    func validate() throws(MQTTError) {
        if host.isEmpty { throw .invalidOptions("host is empty") }
        if !(1...65535).contains(port) { throw .invalidOptions("port \(port) is not in 1…65535") }
        if keepAlive != 0 && !(5...65535).contains(keepAlive) {
            throw .invalidOptions("keepAlive \(keepAlive) must be 0 or 5…65535 seconds")
        }
        if !cleanSession && (clientID ?? "").isEmpty {
            throw .invalidOptions("a persistent session (cleanSession false) needs a client id")
        }
        if let id = clientID, id.utf8.count > 65535 { throw .invalidOptions("client id longer than 65535 bytes") }
        if protocolVersion == .v311 && (sessionExpiryInterval != nil || !connectUserProperties.isEmpty || maximumPacketSize != nil) {
            throw .propertiesRequireMQTT5
        }
        if maximumPacketSize == 0 { throw .invalidOptions("maximumPacketSize must be at least 1") }
        if inboundBufferLimit < 1 { throw .invalidOptions("inboundBufferLimit must be at least 1") }
        if !(0...268_435_455).contains(maximumPayloadSize) {
            throw .invalidOptions("maximumPayloadSize must be in 0…268435455")
        }
        if !(0...65535).contains(maxInflightMessages) { throw .invalidOptions("maxInflightMessages must be in 0…65535") }
        if case .queue(let limit) = offlinePolicy, limit < 1 {
            throw .invalidOptions("offline queue limit must be at least 1")
        }
        if reconnect.minimumDelay <= .zero || reconnect.maximumDelay < reconnect.minimumDelay {
            throw .invalidOptions("reconnect delays must satisfy 0 < minimumDelay ≤ maximumDelay")
        }
        if let will {
            try MQTTTopic.validateTopic(will.topic)
            if will.payload.count > 268_435_455 { throw .payloadTooLarge(size: will.payload.count, limit: 268_435_455) }
            if protocolVersion == .v311 && !will.properties.isEmpty { throw .propertiesRequireMQTT5 }
        }
        if let tls {
            if tls.caFile == nil && tls.caDirectory == nil {
                throw .invalidOptions("TLS needs caFile or caDirectory")
            }
            if (tls.certificateFile == nil) != (tls.keyFile == nil) {
                throw .invalidOptions("TLS certificateFile and keyFile must be given together")
            }
            for (name, path) in [("caFile", tls.caFile), ("certificateFile", tls.certificateFile), ("keyFile", tls.keyFile)] {
                if let path, access(path, R_OK) != 0 {
                    throw .invalidOptions("TLS \(name) \(path) is not readable: \(String(cString: strerror(errno)))")
                }
            }
            if let dir = tls.caDirectory, access(dir, R_OK | X_OK) != 0 {
                throw .invalidOptions("TLS caDirectory \(dir) is not readable")
            }
            if let version = tls.version, !["tlsv1.2", "tlsv1.3"].contains(version) {
                throw .invalidOptions("TLS version \"\(version)\" must be tlsv1.2 or tlsv1.3")
            }
        }
    }
}
