import BinaryCoding
import BridgeConfig
import BridgeStore

/// Home Assistant discovery (`homeassistant.enabled`, docs/homeassistant.md), the bridge's side:
/// the config messages published at start, after the broker came back and when Home Assistant
/// says `online` on its status topic; withdrawn for devices configured no more (at start) or
/// removed; a device's own as it is added, changed or learns its model (``deviceInfoHook``); the
/// topics published, recorded in the store. What the messages say is ``HomeAssistantDiscovery``'s.
///
/// Several bridges on one broker (`cluster.enabled`) share the base topic, so the config topics
/// too: a device's config messages come from its owner only — when it claims the device, and
/// at start, broker back and Home Assistant's `online` for the devices it owns — so they carry
/// the owner's state (its model, firmware) and are not published once per node. Every node
/// publishes the bridge's own (the same messages) and withdraws what is configured no more.
final class DiscoveryExtension: BridgeExtension {
    unowned let bridge: Bridge
    let discovery: HomeAssistantDiscovery
    /// Home Assistant's status topic (every inbound message is compared with it).
    let statusTopic: String

    init(bridge: Bridge, discovery: HomeAssistantDiscovery) {
        self.bridge = bridge
        self.discovery = discovery
        statusTopic = discovery.statusTopic
    }

    /// What a session calls when its state learnt a device's model, firmware or serial: the
    /// device's config messages again, their `device` block updated.
    static func deviceInfoHook(_ discovery: HomeAssistantDiscovery, mqtt: any MQTTPort) -> @Sendable (DeviceConfig, JSONObject) -> Void {
        { device, state in
            for m in discovery.messages(for: device, state: state) { mqtt.send(m) }
        }
    }

    var subscriptions: [String] { [statusTopic] }

    /// Home Assistant (re)started: everything again.
    func handle(_ message: InboundMessage) -> Bool {
        guard message.topic == statusTopic else { return false }
        if String(decoding: message.payload, as: UTF8.self) == "online" { publishAll() }
        return true
    }

    /// Withdraws what was published before and is configured no more (a device, or a mapping of
    /// one). A store from before the topics were recorded still knows the gone devices.
    func willRun(current: [DeviceConfig], gone: [DeviceRecord]) {
        let store = bridge.store
        var previous = (try? store.discoveryTopics()) ?? []
        previous.formUnion(gone.compactMap { r -> DeviceConfig? in
            guard let p = ProfileID(rawValue: r.profile), p != .custom else { return nil }
            var d = DeviceConfig(id: r.id, profile: p)
            d.address = r.address
            return d
        }.flatMap { discovery.messages(for: [$0]).map(\.topic) })
        let states = (try? store.states()) ?? [:]
        for m in discovery.removals(previous: previous, current: current, states: states) { bridge.mqtt.send(m) }
        try? store.replaceDiscoveryTopics(Set(discovery.messages(for: current, states: states).map(\.topic)))
    }

    func announce() { publishAll() }

    func publishAll() {
        let devices = bridge.deviceConfigs.filter { publishes($0.id) }
        for m in discovery.messages(for: devices, states: (try? bridge.store.states()) ?? [:]) { bridge.mqtt.send(m) }
    }

    /// Whether this bridge publishes `device`'s config messages: yes, but in a cluster only
    /// while it owns the device.
    func publishes(_ device: String) -> Bool { bridge.extensions.router?.owns(device) ?? true }

    /// The config messages of one device, its `device` block from the stored state.
    func messages(for device: DeviceConfig) -> [OutboundMessage] {
        discovery.messages(for: device, state: ((try? bridge.store.states()) ?? [:])[device.id] ?? [:])
    }

    func deviceStarted(_ device: DeviceConfig) {
        if publishes(device.id) { for m in messages(for: device) { bridge.mqtt.send(m) } }
        recordTopics()
    }

    /// A cluster node claimed the device: it publishes its config from now on.
    func deviceOwned(_ device: DeviceConfig) {
        for m in messages(for: device) { bridge.mqtt.send(m) }
    }

    func deviceRetired(_ device: DeviceConfig) {
        for m in discovery.messages(for: [device], states: (try? bridge.store.states()) ?? [:]) where !m.topic.contains("/\(discovery.bridgeIdentifier)/") {
            bridge.mqtt.send(OutboundMessage(topic: m.topic, payload: [], qos: 1, retain: true))
        }
        recordTopics()
    }

    /// A device's configuration changed: the entities it has no more are withdrawn.
    func deviceReplaced(_ old: DeviceConfig, with new: DeviceConfig) {
        let stale = Set(discovery.messages(for: [old]).map(\.topic)).subtracting(discovery.messages(for: [new]).map(\.topic))
        for t in stale.sorted() { bridge.mqtt.send(OutboundMessage(topic: t, payload: [], qos: 1, retain: true)) }
    }

    func devicesChanged() { recordTopics() }

    /// The topics of every device's config messages, recorded for the withdrawal at the next start.
    func recordTopics() {
        try? bridge.store.replaceDiscoveryTopics(Set(discovery.messages(for: bridge.deviceConfigs, states: (try? bridge.store.states()) ?? [:]).map(\.topic)))
    }
}
