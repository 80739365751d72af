import CMosquitto

/// Topic name and filter checks (MQTT 5 §4.7), done by libmosquitto's
/// `mosquitto_pub_topic_check2` / `mosquitto_sub_topic_check2` plus a UTF-8 check.
public enum MQTTTopic {
    /// Throws `.invalidTopic` unless `topic` is a valid PUBLISH topic name.
    public static func validateTopic(_ topic: String) throws(MQTTError) {
        if let reason = check(topic, filter: false) { throw .invalidTopic(String(topic.prefix(200)), reason: reason) }
    }

    /// Throws `.invalidTopicFilter` unless `filter` is a valid SUBSCRIBE topic filter
    /// (including `$share/<group>/<filter>`).
    public static func validateFilter(_ filter: String) throws(MQTTError) {
        if let reason = check(filter, filter: true) { throw .invalidTopicFilter(String(filter.prefix(200)), reason: reason) }
    }

    /// The reason `text` is not a valid topic (or filter), or nil. Works on the string's own
    /// UTF-8 storage (no copy for native strings).
    private static func check(_ text: String, filter: Bool) -> String? {
        var text = text
        return text.withUTF8 { bytes -> String? in
            if bytes.isEmpty { return "empty" }
            if bytes.count > 65535 { return "longer than 65535 bytes" }
            if bytes.contains(0) { return "contains U+0000" }
            let rc = bytes.withMemoryRebound(to: CChar.self) {
                filter ? mosquitto_sub_topic_check2($0.baseAddress, $0.count) : mosquitto_pub_topic_check2($0.baseAddress, $0.count)
            }
            if rc != 0 {
                if rc != 3 { return MosquittoCode(code: rc).description }
                return filter ? "+ or # not alone in its level, or # not last" : "contains a wildcard (+ or #)"
            }
            let utf8 = bytes.withMemoryRebound(to: CChar.self) { mosquitto_validate_utf8($0.baseAddress, Int32($0.count)) }
            return utf8 == 0 ? nil : "not valid MQTT UTF-8 (MQTT 5 §1.5.4)"
        }
    }

    /// Whether `filter` can only match the identical topic (no wildcard, not shared).
    static func isExact(_ filter: String) -> Bool {
        !filter.utf8.contains(UInt8(ascii: "+")) && !filter.utf8.contains(UInt8(ascii: "#")) && !filter.hasPrefix("$share/")
    }

    /// Whether `topic` matches `filter` (MQTT 5 §4.7), via `mosquitto_topic_matches_sub`
    /// (libmosquitto 2.0's `…_sub2` ignores its length arguments, so NUL-terminated strings
    /// are passed). A shared subscription `$share/<group>/<filter>` matches as `<filter>`.
    public static func matches(filter: String, topic: String) -> Bool {
        var filter = filter
        if filter.hasPrefix("$share/") {
            let rest = filter.dropFirst(7)
            guard let slash = rest.firstIndex(of: "/") else { return false }
            filter = String(rest[rest.index(after: slash)...])
        }
        var result = false
        let rc = filter.withCString { f in
            topic.withCString { t in mosquitto_topic_matches_sub(f, t, &result) }
        }
        return rc == 0 && result
    }
}
