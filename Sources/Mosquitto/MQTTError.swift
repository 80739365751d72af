import CMosquitto

#if canImport(Glibc)
import Glibc
#endif

/// A result code returned by a libmosquitto function (`MOSQ_ERR_*` in `mosquitto.h`).
///
/// Mapped from the *returned* code, never from `errno`; only `.system` carries the `errno`
/// value that libmosquitto documents as meaningful for `MOSQ_ERR_ERRNO`.
public enum MosquittoCode: Equatable, Hashable, Sendable, CustomStringConvertible {
    /// `MOSQ_ERR_NOMEM`: out of memory.
    case noMemory
    /// `MOSQ_ERR_PROTOCOL`: protocol error talking to the broker.
    case protocolError
    /// `MOSQ_ERR_INVAL`: an argument was invalid.
    case invalidArgument
    /// `MOSQ_ERR_NO_CONN`: the client is not connected.
    case noConnection
    /// `MOSQ_ERR_CONN_REFUSED`: the broker refused the connection.
    case connectionRefused
    /// `MOSQ_ERR_NOT_FOUND`: not found.
    case notFound
    /// `MOSQ_ERR_CONN_LOST`: the connection was lost.
    case connectionLost
    /// `MOSQ_ERR_TLS`: a TLS error (certificate, key, verification).
    case tls
    /// `MOSQ_ERR_PAYLOAD_SIZE`: payload too large.
    case payloadSize
    /// `MOSQ_ERR_NOT_SUPPORTED`: not supported (e.g. properties on an MQTT 3.1.1 connection).
    case notSupported
    /// `MOSQ_ERR_AUTH`: authentication failed.
    case authentication
    /// `MOSQ_ERR_ACL_DENIED`: access denied.
    case aclDenied
    /// `MOSQ_ERR_UNKNOWN`: unknown error.
    case unknown
    /// `MOSQ_ERR_ERRNO`: a system call failed; `errno` as documented by libmosquitto.
    case system(errno: Int32)
    /// `MOSQ_ERR_EAI`: host name lookup failed.
    case lookupFailed
    /// `MOSQ_ERR_PROXY`: SOCKS proxy error.
    case proxy
    /// `MOSQ_ERR_MALFORMED_UTF8`: a string was not valid UTF-8.
    case malformedUTF8
    /// `MOSQ_ERR_KEEPALIVE`: keepalive expired.
    case keepalive
    /// `MOSQ_ERR_MALFORMED_PACKET`: malformed packet.
    case malformedPacket
    /// `MOSQ_ERR_DUPLICATE_PROPERTY`: an MQTT 5 property was duplicated.
    case duplicateProperty
    /// `MOSQ_ERR_TLS_HANDSHAKE`: the TLS handshake failed.
    case tlsHandshake
    /// `MOSQ_ERR_QOS_NOT_SUPPORTED`: the broker does not support this QoS.
    case qosNotSupported
    /// `MOSQ_ERR_OVERSIZE_PACKET`: the packet exceeds the broker's maximum packet size.
    case oversizePacket
    /// `MOSQ_ERR_OCSP`: OCSP failure.
    case ocsp
    /// `MOSQ_ERR_TIMEOUT`: timed out.
    case timeout
    /// `MOSQ_ERR_RETAIN_NOT_SUPPORTED`: the broker does not support retained messages.
    case retainNotSupported
    /// `MOSQ_ERR_TOPIC_ALIAS_INVALID`: invalid topic alias.
    case topicAliasInvalid
    /// `MOSQ_ERR_ADMINISTRATIVE_ACTION`: disconnected by an administrative action.
    case administrativeAction
    /// `MOSQ_ERR_ALREADY_EXISTS`: already exists.
    case alreadyExists
    /// A code this wrapper does not know.
    case other(Int32)

    /// Maps a returned `MOSQ_ERR_*` code. Call it right after the failing call so that
    /// `MOSQ_ERR_ERRNO` captures the matching `errno`.
    public init(code: Int32) {
        switch code {
        case 1: self = .noMemory
        case 2: self = .protocolError
        case 3: self = .invalidArgument
        case 4: self = .noConnection
        case 5: self = .connectionRefused
        case 6: self = .notFound
        case 7: self = .connectionLost
        case 8: self = .tls
        case 9: self = .payloadSize
        case 10: self = .notSupported
        case 11: self = .authentication
        case 12: self = .aclDenied
        case 13: self = .unknown
        case 14: self = .system(errno: errno)
        case 15: self = .lookupFailed
        case 16: self = .proxy
        case 18: self = .malformedUTF8
        case 19: self = .keepalive
        case 21: self = .malformedPacket
        case 22: self = .duplicateProperty
        case 23: self = .tlsHandshake
        case 24: self = .qosNotSupported
        case 25: self = .oversizePacket
        case 26: self = .ocsp
        case 27: self = .timeout
        case 28: self = .retainNotSupported
        case 29: self = .topicAliasInvalid
        case 30: self = .administrativeAction
        case 31: self = .alreadyExists
        default: self = .other(code)
        }
    }

    /// The raw `MOSQ_ERR_*` value.
    public var code: Int32 {
        switch self {
        case .noMemory: 1
        case .protocolError: 2
        case .invalidArgument: 3
        case .noConnection: 4
        case .connectionRefused: 5
        case .notFound: 6
        case .connectionLost: 7
        case .tls: 8
        case .payloadSize: 9
        case .notSupported: 10
        case .authentication: 11
        case .aclDenied: 12
        case .unknown: 13
        case .system: 14
        case .lookupFailed: 15
        case .proxy: 16
        case .malformedUTF8: 18
        case .keepalive: 19
        case .malformedPacket: 21
        case .duplicateProperty: 22
        case .tlsHandshake: 23
        case .qosNotSupported: 24
        case .oversizePacket: 25
        case .ocsp: 26
        case .timeout: 27
        case .retainNotSupported: 28
        case .topicAliasInvalid: 29
        case .administrativeAction: 30
        case .alreadyExists: 31
        case .other(let code): code
        }
    }

    public var description: String {
        if case .system(let number) = self, let text = strerror(number) {
            return "\(String(cString: text)) (errno \(number))"
        }
        guard let text = mosquitto_strerror(code) else { return "MOSQ_ERR \(code)" }
        return "\(String(cString: text)) (MOSQ_ERR \(code))"
    }
}

/// An MQTT 5 reason code (MQTT 5.0 §2.4), or an MQTT 3.1.1 CONNACK return code (MQTT 3.1.1
/// §3.2.2.3) when `isMQTT311Connack` is set.
public struct MQTTReasonCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    /// Set when this is an MQTT 3.1.1 CONNACK return code (1…5), not an MQTT 5 reason code.
    public var isMQTT311Connack: Bool

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
        self.isMQTT311Connack = false
    }

    /// An MQTT 3.1.1 CONNACK return code (§3.2.2.3).
    public init(mqtt311Connack code: UInt8) {
        self.rawValue = code
        self.isMQTT311Connack = true
    }

    /// MQTT 5 §2.4: codes at or above 0x80 are failures.
    public var isFailure: Bool { isMQTT311Connack ? rawValue != 0 : rawValue >= 0x80 }

    /// 0x00 Success.
    public static let success = MQTTReasonCode(rawValue: 0x00)
    /// 0x10 No matching subscribers (PUBACK/PUBREC; still a success).
    public static let noMatchingSubscribers = MQTTReasonCode(rawValue: 0x10)
    /// 0x80 Unspecified error.
    public static let unspecifiedError = MQTTReasonCode(rawValue: 0x80)
    /// 0x86 Bad user name or password.
    public static let badUserNameOrPassword = MQTTReasonCode(rawValue: 0x86)
    /// 0x87 Not authorized.
    public static let notAuthorized = MQTTReasonCode(rawValue: 0x87)
    /// 0x8F Topic filter invalid.
    public static let topicFilterInvalid = MQTTReasonCode(rawValue: 0x8F)
    /// 0x90 Topic name invalid.
    public static let topicNameInvalid = MQTTReasonCode(rawValue: 0x90)
    /// 0x95 Packet too large.
    public static let packetTooLarge = MQTTReasonCode(rawValue: 0x95)
    /// 0x97 Quota exceeded.
    public static let quotaExceeded = MQTTReasonCode(rawValue: 0x97)

    public var description: String {
        let hex = "0x" + String(rawValue, radix: 16, uppercase: true)
        if isMQTT311Connack {
            let text = mosquitto_connack_string(Int32(rawValue)).map { String(cString: $0) } ?? "unknown"
            return "\(text) (CONNACK \(rawValue))"
        }
        let text = mosquitto_reason_string(Int32(rawValue)).map { String(cString: $0) } ?? "unknown"
        return "\(text) (\(hex))"
    }
}

/// The one error type of the `Mosquitto` module.
public enum MQTTError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The connect options cannot be used; the text names the option and why.
    case invalidOptions(String)
    /// A topic name is not valid for PUBLISH (MQTT 5 §4.7: no wildcards, not empty, UTF-8,
    /// at most 65535 bytes).
    case invalidTopic(String, reason: String)
    /// A topic filter is not valid for SUBSCRIBE (MQTT 5 §4.7.1: `#` last and alone in its
    /// level, `+` alone in its level).
    case invalidTopicFilter(String, reason: String)
    /// The payload is larger than the configured or protocol maximum (MQTT 5 §1.5.7:
    /// 268 435 455 bytes).
    case payloadTooLarge(size: Int, limit: Int)
    /// MQTT 5 properties were given on an MQTT 3.1.1 connection.
    case propertiesRequireMQTT5
    /// The password could not be read from its file or environment variable (the password
    /// itself is never part of the message).
    case credentials(String)
    /// The operation needs a connection and the client is not connected (and the offline
    /// policy does not queue it).
    case notConnected
    /// The bounded queue of QoS ≥ 1 publishes issued while disconnected is full.
    case offlineQueueFull(limit: Int)
    /// The broker refused the connection (CONNACK reason code).
    case connectionRefused(MQTTReasonCode)
    /// The broker rejected a PUBLISH (PUBACK/PUBREC reason code ≥ 0x80, MQTT 5 §3.4.2.1).
    case publishRejected(topic: String, MQTTReasonCode)
    /// The broker rejected a SUBSCRIBE (SUBACK reason code ≥ 0x80, MQTT 5 §3.9.3; 0x80 in
    /// MQTT 3.1.1 §3.9.3).
    case subscribeRejected(filter: String, MQTTReasonCode)
    /// The connection dropped before a QoS 0 publish was written.
    case connectionLost
    /// A libmosquitto call failed; `operation` names the call.
    case library(MosquittoCode, operation: String)
    /// The waiting task was cancelled (the operation itself may still complete).
    case cancelled
    /// The client was disconnected with `disconnect()` (or was never connected) and cannot be used.
    case closed

    public var description: String {
        switch self {
        case .invalidOptions(let text): "invalid MQTT options: \(text)"
        case .invalidTopic(let topic, let reason): "invalid topic \"\(topic)\": \(reason)"
        case .invalidTopicFilter(let filter, let reason): "invalid topic filter \"\(filter)\": \(reason)"
        case .payloadTooLarge(let size, let limit): "payload of \(size) bytes exceeds the limit of \(limit) bytes"
        case .propertiesRequireMQTT5: "MQTT 5 properties were given but the connection uses MQTT 3.1.1"
        case .credentials(let text): "MQTT credentials: \(text)"
        case .notConnected: "not connected to the MQTT broker"
        case .offlineQueueFull(let limit): "offline publish queue is full (\(limit) QoS 1/2 messages)"
        case .connectionRefused(let code): "broker refused the connection: \(code)"
        case .publishRejected(let topic, let code): "broker rejected the publish to \"\(topic)\": \(code)"
        case .subscribeRejected(let filter, let code): "broker rejected the subscription to \"\(filter)\": \(code)"
        case .connectionLost: "connection lost before the message was sent"
        case .library(let code, let operation): "\(operation) failed: \(code)"
        case .cancelled: "cancelled while waiting for the broker"
        case .closed: "the MQTT client is closed"
        }
    }
}
