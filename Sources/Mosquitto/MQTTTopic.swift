import CMosquitto

/// Topic name and filter checks (MQTT 5 §4.7), done by libmosquitto's
/// `mosquitto_pub_topic_check2` / `mosquitto_sub_topic_check2` plus a UTF-8 check.
public enum MQTTTopic {
    /// Throws `.invalidTopic` unless `topic` is a valid PUBLISH topic name.
    public static func validateTopic(_ topic: String) throws(MQTTError) {
        var bytes = Array(topic.utf8)
        if bytes.isEmpty { throw .invalidTopic(topic, reason: "empty") }
        if bytes.count > 65535 { throw .invalidTopic(String(topic.prefix(40)), reason: "longer than 65535 bytes") }
        if bytes.contains(0) { throw .invalidTopic(topic, reason: "contains U+0000") }
        let rc = bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { mosquitto_pub_topic_check2($0.baseAddress, $0.count) }
        }
        if rc != 0 {
            throw .invalidTopic(topic, reason: rc == 3 ? "contains a wildcard (+ or #)" : MosquittoCode(code: rc).description)
        }
        try validateUTF8(bytes) { .invalidTopic(topic, reason: $0) }
    }

    /// Throws `.invalidTopicFilter` unless `filter` is a valid SUBSCRIBE topic filter
    /// (including `$share/<group>/<filter>`).
    public static func validateFilter(_ filter: String) throws(MQTTError) {
        var bytes = Array(filter.utf8)
        if bytes.isEmpty { throw .invalidTopicFilter(filter, reason: "empty") }
        if bytes.count > 65535 { throw .invalidTopicFilter(String(filter.prefix(40)), reason: "longer than 65535 bytes") }
        if bytes.contains(0) { throw .invalidTopicFilter(filter, reason: "contains U+0000") }
        let rc = bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { mosquitto_sub_topic_check2($0.baseAddress, $0.count) }
        }
        if rc != 0 {
            throw .invalidTopicFilter(
                filter, reason: rc == 3 ? "+ or # not alone in its level, or # not last" : MosquittoCode(code: rc).description)
        }
        try validateUTF8(bytes) { .invalidTopicFilter(filter, reason: $0) }
    }

    /// Whether `topic` matches `filter` (MQTT 5 §4.7), via `mosquitto_topic_matches_sub`
    /// (libmosquitto 2.0's `…_sub2` ignores its length arguments, so NUL-terminated strings
    /// are passed). A shared subscription `$share/<group>/<filter>` matches as `<filter>`.
    public static func matches(filter: String, topic: String) -> Bool {
        var filter = Substring(filter)
        if filter.hasPrefix("$share/") {
            let rest = filter.dropFirst(7)
            guard let slash = rest.firstIndex(of: "/") else { return false }
            filter = rest[rest.index(after: slash)...]
        }
        var result = false
        let rc = String(filter).withCString { f in
            topic.withCString { t in mosquitto_topic_matches_sub(f, t, &result) }
        }
        return rc == 0 && result
    }

    private static func validateUTF8(_ bytes: [UInt8], _ error: (String) -> MQTTError) throws(MQTTError) {
        let rc = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { mosquitto_validate_utf8($0.baseAddress, Int32($0.count)) }
        }
        if rc != 0 { throw error("not valid MQTT UTF-8 (MQTT 5 §1.5.4)") }
    }
}
