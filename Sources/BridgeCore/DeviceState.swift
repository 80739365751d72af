import BinaryCoding
import Foundation

/// A device's state as stored and published (retained `<base>/<device>`), without I/O: what
/// changes it, when `last_seen` is stamped, when a sighting's RSSI is news.
struct DeviceState: Sendable {
    private(set) var values: JSONObject
    /// The last `last_seen` text and its second: formatting a date costs more than the rest of
    /// a merge, and a busy device is stamped many times a second.
    private var stampCache: (second: Double, text: String)?

    init(_ values: JSONObject) { self.values = values }

    var isEmpty: Bool { values.isEmpty }
    var json: String { JSONValue.object(values).jsonText }

    /// Merges what a driver output `changed`. When that changes the state, it is stamped
    /// `last_seen` (whenever the state is published anyway, it says when the device was last
    /// heard) and its JSON text returned, with whether its `hardware` changed; nil otherwise.
    mutating func merge(_ changed: JSONObject, at date: Date) -> (json: String, hardwareChanged: Bool)? {
        guard !changed.isEmpty else { return nil }
        var merged = values
        merged.merge(changed)
        guard merged != values else { return nil }
        let hardwareChanged = merged["hardware"] != values["hardware"]
        merged["last_seen"] = .string(stampText(date))
        values = merged
        return (json, hardwareChanged)
    }

    /// Merges `changed` and stamps `last_seen`, changed or not (link up, a sighting); the JSON text.
    mutating func stamp(_ changed: JSONObject, at date: Date) -> String {
        values.merge(changed)
        values["last_seen"] = .string(stampText(date))
        return json
    }

    /// Whether a sighting at `rssi` goes into the state: the first one, and one that moved by
    /// at least ``BridgeDefaults/rssiStep`` dBm from the published value.
    func rssiIsNews(_ rssi: Int) -> Bool {
        guard let published = values["rssi"]?.intValue else { return true }
        // The state's `rssi` may be anything a device or the store said: no overflow, no abs(.min).
        let (difference, overflow) = published.subtractingReportingOverflow(rssi)
        return overflow || difference.magnitude >= UInt(BridgeDefaults.rssiStep)
    }

    /// ``timestamp(_:)`` of `date`, from the cache when it is in the same second.
    private mutating func stampText(_ date: Date) -> String {
        let second = date.timeIntervalSince1970.rounded(.down)
        if let c = stampCache, c.second == second { return c.text }
        let text = Self.timestamp(date)
        stampCache = (second, text)
        return text
    }

    /// `last_seen`'s form: ISO 8601 in UTC (`2025-06-01T12:00:00Z`), as Home Assistant's
    /// timestamp sensors take it.
    static func timestamp(_ date: Date) -> String { date.formatted(Date.ISO8601FormatStyle()) }
}
