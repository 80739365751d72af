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

    /// Whether `topic` matches `filter` (MQTT 5 §4.7.1–4.7.2): `+` is one level (an empty one
    /// too), `#` the level it stands at and every one below, including none ("a/#" matches "a"),
    /// a filter that starts with a wildcard does not match a topic that starts with `$`. A shared
    /// subscription `$share/<group>/<filter>` matches as `<filter>`. `filter` is one
    /// ``validateFilter(_:)`` accepted (every subscription's is). On the UTF-8 bytes of both, in
    /// place: every inbound message is matched against every subscription.
    public static func matches(filter: String, topic: String) -> Bool {
        // Native strings (small ones too) are contiguous UTF-8: matched in place, no copies.
        if let r = filter.utf8.withContiguousStorageIfAvailable({ f in
            topic.utf8.withContiguousStorageIfAvailable { t in matches(filter: f, topic: t) }
        }), let r { return r }
        var filter = filter, topic = topic
        return filter.withUTF8 { f in topic.withUTF8 { t in matches(filter: f, topic: t) } }
    }

    static func matches(filter: UnsafeBufferPointer<UInt8>, topic t: UnsafeBufferPointer<UInt8>) -> Bool {
        let slash = UInt8(ascii: "/"), plus = UInt8(ascii: "+"), hash = UInt8(ascii: "#")
        let f = filter
        var fi = 0, ti = 0
        let fn = f.count, tn = t.count
        if fn > 7, f[0] == UInt8(ascii: "$"), f.starts(with: "$share/".utf8) {
            fi = 7
            while fi < fn && f[fi] != slash { fi += 1 }  // the group
            guard fi < fn else { return false }
            fi += 1
        }
        if tn > 0, t[0] == UInt8(ascii: "$"), fi < fn, f[fi] == plus || f[fi] == hash { return false }
        // Level by level; fi and ti at the start of a level of each.
        while true {
            if fi < fn, f[fi] == hash, fi + 1 == fn { return true }
            if fi < fn, f[fi] == plus, fi + 1 == fn || f[fi + 1] == slash {
                fi += 1
                while ti < tn && t[ti] != slash { ti += 1 }
            } else {
                while fi < fn && f[fi] != slash {
                    guard ti < tn, t[ti] == f[fi] else { return false }
                    fi += 1
                    ti += 1
                }
                if ti < tn && t[ti] != slash { return false }
            }
            // Both at the end of a level.
            if fi == fn { return ti == tn }
            fi += 1
            // The topic has no level left: only a last `#` matches (its parent level did).
            if ti == tn { return fi + 1 == fn && f[fi] == hash }
            ti += 1
        }
    }
}
