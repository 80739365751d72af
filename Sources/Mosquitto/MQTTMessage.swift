/// MQTT quality of service (MQTT 5 §4.3).
public enum MQTTQoS: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// QoS 0: at most once; `publish` returns once the packet is written.
    case atMostOnce = 0
    /// QoS 1: at least once; `publish` returns on PUBACK.
    case atLeastOnce = 1
    /// QoS 2: exactly once; `publish` returns on PUBCOMP.
    case exactlyOnce = 2

    public static func < (lhs: MQTTQoS, rhs: MQTTQoS) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// An MQTT 5 user property (MQTT 5 §3.3.2.3.7): a name/value pair; order and duplicates kept.
public struct MQTTUserProperty: Sendable, Hashable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// The MQTT 5 PUBLISH properties this client sends and receives (MQTT 5 §3.3.2.3). All are
/// ignored by the broker on MQTT 3.1.1, so sending a non-empty set there is an error.
public struct MQTTPublishProperties: Sendable, Hashable {
    /// §3.3.2.3.2: the payload is UTF-8 text (`true`) or unspecified bytes (`false`).
    public var payloadIsUTF8: Bool?
    /// §3.3.2.3.3: lifetime of the message in seconds.
    public var messageExpiryInterval: UInt32?
    /// §3.3.2.3.9: MIME type of the payload.
    public var contentType: String?
    /// §3.3.2.3.5: topic for a response (request/response pattern).
    public var responseTopic: String?
    /// §3.3.2.3.6: correlation data for a response.
    public var correlationData: [UInt8]?
    /// §3.3.2.3.7: user properties, in order.
    public var userProperties: [MQTTUserProperty]
    /// §3.3.2.3.8: identifiers of the subscriptions that matched (inbound only).
    public var subscriptionIdentifiers: [UInt32]

    public init(
        payloadIsUTF8: Bool? = nil,
        messageExpiryInterval: UInt32? = nil,
        contentType: String? = nil,
        responseTopic: String? = nil,
        correlationData: [UInt8]? = nil,
        userProperties: [MQTTUserProperty] = [],
        subscriptionIdentifiers: [UInt32] = []
    ) {
        self.payloadIsUTF8 = payloadIsUTF8
        self.messageExpiryInterval = messageExpiryInterval
        self.contentType = contentType
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.userProperties = userProperties
        self.subscriptionIdentifiers = subscriptionIdentifiers
    }

    /// No property set.
    public var isEmpty: Bool {
        payloadIsUTF8 == nil && messageExpiryInterval == nil && contentType == nil && responseTopic == nil
            && correlationData == nil && userProperties.isEmpty && subscriptionIdentifiers.isEmpty
    }
}

/// A received application message (MQTT 5 §3.3). Topic, payload and properties are copied out
/// of libmosquitto inside its callback.
public struct MQTTMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    /// Set when the message was delivered because it is retained (§3.3.1.3).
    public var retain: Bool
    public var properties: MQTTPublishProperties
    /// The packet identifier of a QoS 1 or 2 message as received (nil for QoS 0 and for messages
    /// to send). A message the broker delivers again after a reconnect, because its PUBACK did
    /// not reach the broker, carries the same identifier (MQTT 5 §4.4).
    public var packetID: Int?

    public init(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false,
        properties: MQTTPublishProperties = MQTTPublishProperties(), packetID: Int? = nil
    ) {
        self.packetID = packetID
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.properties = properties
    }

    /// The payload as UTF-8 text (invalid sequences repaired).
    public var payloadString: String { String(decoding: payload, as: UTF8.self) }
}

/// Retain handling for a subscription (MQTT 5 §3.8.3.1).
public enum MQTTRetainHandling: Sendable, Hashable {
    /// Send retained messages at subscribe time (0).
    case sendAlways
    /// Send retained messages only if the subscription did not exist (1).
    case sendIfNew
    /// Never send retained messages at subscribe time (2).
    case never
}

/// MQTT 5 subscription options (§3.8.3.1); ignored on MQTT 3.1.1.
public struct MQTTSubscribeOptions: Sendable, Hashable {
    /// Do not receive our own publishes (No Local).
    public var noLocal: Bool
    /// Keep the retain flag as published (Retain As Published).
    public var retainAsPublished: Bool
    public var retainHandling: MQTTRetainHandling

    public init(noLocal: Bool = false, retainAsPublished: Bool = false, retainHandling: MQTTRetainHandling = .sendAlways) {
        self.noLocal = noLocal
        self.retainAsPublished = retainAsPublished
        self.retainHandling = retainHandling
    }

    var mosquittoValue: Int32 {
        var value: Int32 = 0
        if noLocal { value |= 0x04 }
        if retainAsPublished { value |= 0x08 }
        switch retainHandling {
        case .sendAlways: break
        case .sendIfNew: value |= 0x10
        case .never: value |= 0x20
        }
        return value
    }
}

/// A change of the connection, delivered by `MQTTClient.connectionEvents()`.
public enum MQTTConnectionEvent: Sendable, Equatable {
    /// CONNACK success; `sessionPresent` per MQTT 5 §3.2.2.1.1.
    case connected(sessionPresent: Bool)
    /// The connection ended. `reason` is nil after `disconnect()`.
    case disconnected(reason: MQTTError?)
    /// A reconnect attempt is scheduled after `delay`.
    case reconnecting(attempt: Int, delay: Duration)
}
