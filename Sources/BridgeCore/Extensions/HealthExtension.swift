import BinaryCoding
import Foundation

/// `<base>/bridge/health` (QoS 0, not retained), every `healthInterval`: uptime, memory, the
/// counters (``BridgeCounters``), each device's link state and queue depth. The same report
/// answers `bridge/request/health_check`.
final class HealthExtension: BridgeExtension {
    unowned let bridge: Bridge
    let interval: Duration

    init(bridge: Bridge, interval: Duration) {
        self.bridge = bridge
        self.interval = interval
    }

    func start(in group: inout DiscardingTaskGroup) {
        group.addTask {
            while !Task.isCancelled {
                try? await self.bridge.sleep(self.interval)
                if Task.isCancelled { break }
                await self.publish()
            }
        }
    }

    func publish() async {
        let topics = bridge.topics
        bridge.mqtt.send(OutboundMessage(topic: topics.bridgeHealth, json: .object(await report()), qos: 0, retain: false))
    }

    func report() async -> JSONObject {
        var o = JSONObject()
        o["uptime_s"] = .int((ContinuousClock.now - bridge.started).components.seconds)
        if let rss = residentMemoryBytes() { o["rss_bytes"] = .int(Int64(rss)) }
        o.merge(bridge.counters.json)
        var devices = JSONObject()
        let all = bridge.registry.withLock { $0 }
        for id in all.keys.sorted() { devices[id] = await all[id]!.session.health() }
        o["devices"] = .object(devices)
        return o
    }
}
