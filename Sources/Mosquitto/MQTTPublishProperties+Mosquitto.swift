import CMosquitto

#if canImport(Glibc)
import Glibc
#endif

/// An owned libmosquitto property list, freed exactly once.
final class MosquittoPropertyList {
    var pointer: OpaquePointer?

    init() {}

    deinit { mosquitto_property_free_all(&pointer) }

    /// Hands the list to libmosquitto (e.g. `mosquitto_will_set_v5` on success).
    func release() -> OpaquePointer? {
        defer { pointer = nil }
        return pointer
    }

    func check(_ rc: Int32, _ what: String) throws(MQTTError) {
        if rc != 0 { throw .library(MosquittoCode(code: rc), operation: "adding MQTT 5 property \(what)") }
    }

    func addString(_ id: mqtt5_property, _ value: String, _ what: String) throws(MQTTError) {
        try check(mosquitto_property_add_string(&pointer, Int32(id.rawValue), value), what)
    }

    func addUserProperties(_ properties: [MQTTUserProperty]) throws(MQTTError) {
        for property in properties {
            try check(
                mosquitto_property_add_string_pair(&pointer, Int32(MQTT_PROP_USER_PROPERTY.rawValue), property.name, property.value),
                "user property \(property.name)")
        }
    }
}

extension MQTTPublishProperties {
    /// Builds the PUBLISH (or Will) property list (MQTT 5 §3.3.2.3).
    func makePropertyList() throws(MQTTError) -> MosquittoPropertyList {
        let list = MosquittoPropertyList()
        if let utf8 = payloadIsUTF8 {
            try list.check(
                mosquitto_property_add_byte(&list.pointer, Int32(MQTT_PROP_PAYLOAD_FORMAT_INDICATOR.rawValue), utf8 ? 1 : 0),
                "payload format indicator")
        }
        if let expiry = messageExpiryInterval {
            try list.check(
                mosquitto_property_add_int32(&list.pointer, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expiry),
                "message expiry interval")
        }
        if let contentType { try list.addString(MQTT_PROP_CONTENT_TYPE, contentType, "content type") }
        if let responseTopic {
            try MQTTTopic.validateTopic(responseTopic)
            try list.addString(MQTT_PROP_RESPONSE_TOPIC, responseTopic, "response topic")
        }
        if let data = correlationData {
            guard data.count <= 65535 else { throw .invalidOptions("correlation data longer than 65535 bytes") }
            let rc = data.withUnsafeBytes {
                mosquitto_property_add_binary(
                    &list.pointer, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), $0.baseAddress, UInt16($0.count))
            }
            try list.check(rc, "correlation data")
        }
        try list.addUserProperties(userProperties)
        return list
    }

    /// Copies the properties libmosquitto hands to a callback (MQTT 5 §3.3.2.3).
    init(copying list: OpaquePointer?) {
        self.init()
        var cursor = list
        while let property = cursor {
            let id = mosquitto_property_identifier(property)
            switch UInt32(id) {
            case MQTT_PROP_PAYLOAD_FORMAT_INDICATOR.rawValue:
                var value: UInt8 = 0
                if mosquitto_property_read_byte(property, id, &value, false) != nil { payloadIsUTF8 = value == 1 }
            case MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue:
                var value: UInt32 = 0
                if mosquitto_property_read_int32(property, id, &value, false) != nil { messageExpiryInterval = value }
            case MQTT_PROP_CONTENT_TYPE.rawValue:
                contentType = Self.readString(property, id)
            case MQTT_PROP_RESPONSE_TOPIC.rawValue:
                responseTopic = Self.readString(property, id)
            case MQTT_PROP_CORRELATION_DATA.rawValue:
                var value: UnsafeMutableRawPointer?
                var length: UInt16 = 0
                if mosquitto_property_read_binary(property, id, &value, &length, false) != nil {
                    correlationData = value.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(length))) } ?? []
                    free(value)
                }
            case MQTT_PROP_USER_PROPERTY.rawValue:
                var name: UnsafeMutablePointer<CChar>?
                var value: UnsafeMutablePointer<CChar>?
                if mosquitto_property_read_string_pair(property, id, &name, &value, false) != nil {
                    userProperties.append(
                        MQTTUserProperty(name.map { String(cString: $0) } ?? "", value.map { String(cString: $0) } ?? ""))
                    free(name)
                    free(value)
                }
            case MQTT_PROP_SUBSCRIPTION_IDENTIFIER.rawValue:
                var value: UInt32 = 0
                if mosquitto_property_read_varint(property, id, &value, false) != nil { subscriptionIdentifiers.append(value) }
            default:
                break
            }
            cursor = mosquitto_property_next(property)
        }
    }

    private static func readString(_ property: OpaquePointer, _ id: Int32) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard mosquitto_property_read_string(property, id, &value, false) != nil, let value else { return nil }
        defer { free(value) }
        return String(cString: value)
    }
}
