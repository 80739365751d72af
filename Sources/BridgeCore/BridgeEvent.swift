import BinaryCoding

/// A message on `<base>/bridge/event` (docs/bridge-api.md "Events"), in zigbee2mqtt's shape
/// `{"type":…,"data":{…}}`: `data` holds the event's fields, with `friendly_name` (the device's
/// id, what zigbee2mqtt's automations read) when it concerns a device. The same fields also stay
/// at the top level, as before, for one release (deprecated).
enum BridgeEvent {
    static func json(_ type: String, _ fields: JSONObject) -> JSONValue {
        var data = fields
        if let device = fields["device"], data["friendly_name"] == nil { data["friendly_name"] = device }
        var o: JSONObject = ["type": .string(type), "data": .object(data)]
        for (key, value) in fields where key != "type" && key != "data" { o[key] = value }  // deprecated: the old top-level fields
        return .object(o)
    }
}
