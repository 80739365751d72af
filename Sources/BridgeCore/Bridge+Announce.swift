import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging

// The bridge's own retained topics: `bridge/state`, `bridge/info`, `bridge/devices`.

extension Bridge {
    /// Publishes the bridge's retained topics (at start, and again after the broker came back).
    public func announce() {
        mqtt.send(OutboundMessage(topic: topics.bridgeState, json: ["state": "online"], qos: 1, retain: true))
        publishInfo()
        publishDevices()
        for e in extensions.all { e.announce() }
    }

    /// `bridge/info` (retained): version, configuration summary (no secrets), devices.
    func publishInfo() {
        mqtt.send(OutboundMessage(topic: topics.bridgeInfo, json: .object(info), qos: 1, retain: true))
    }

    var info: JSONObject {
        let c = configuration
        let all = devices
        var o = JSONObject()
        o["version"] = .string(version)
        o["base_topic"] = .string(topics.base)
        o["adapter"] = .string(c.bluetooth.adapter)
        o["adapters"] = .array(c.bluetooth.adapters.map { .string($0) })
        o["log_level"] = .string(logLevel.withLock { $0 }.rawValue)
        if let f = control.configurationFile { o["config_file"] = .string(f) }
        o["devices"] = .int(Int64(all.count))
        o["devices_from_file"] = .int(Int64(all.filter { $0.source == .file }.count))
        o["devices_from_mqtt"] = .int(Int64(all.filter { $0.source == .mqtt }.count))
        o["uptime_s"] = .int((ContinuousClock.now - started).components.seconds)
        o["mqtt"] = ["host": .string(c.mqtt.host), "port": .int(Int64(c.mqtt.port)), "client_id": .string(c.mqtt.clientID),
                     "protocol": .string(c.mqtt.protocolVersion.rawValue), "tls": .bool(c.mqtt.useTLS),
                     "api": .string(api.rawValue)]
        o["homeassistant"] = ["enabled": .bool(c.homeAssistant.enabled), "discovery_prefix": .string(c.homeAssistant.discoveryPrefix)]
        // The loaded configuration in the file's keys, secrets redacted (zigbee2mqtt's `config`).
        o["config"] = c.json
        for e in extensions.all { e.info(into: &o) }
        return o
    }

    /// `bridge/devices` (retained): every device with where it comes from, pairing and last seen.
    func publishDevices() {
        mqtt.send(OutboundMessage(topic: topics.bridgeDevices, json: devicesJSON, qos: 1, retain: true))
    }

    var devicesJSON: JSONValue {
        let records = Dictionary(((try? store.devices()) ?? []).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        return .array(devices.map { r in
            let d = r.config
            var o = JSONObject()
            o["id"] = .string(d.id)
            if let n = d.name { o["name"] = .string(n) }
            if let a = d.address { o["address"] = .string(a) }
            if let p = d.namePattern { o["name_pattern"] = .string(p) }
            o["profile"] = .string(d.profile.rawValue)
            o["source"] = .string(r.source.rawValue)
            o["paired"] = .bool(records[d.id]?.paired ?? false)
            if let seen = records[d.id]?.lastSeen { o["last_seen"] = .string(DeviceState.timestamp(seen)) }
            if d.profile == .custom { o["topics"] = .array(d.characteristics.map { .string($0.topic) }) }
            // zigbee2mqtt's shape, for what was written for it: the name and what the device exposes.
            o["friendly_name"] = .string(d.id)
            o["definition"] = definition(of: d)
            return .object(o)
        })
    }
}
