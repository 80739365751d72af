import BinaryCoding
import BridgeConfig
import BridgeStore
import Synchronization

/// One feature of the bridge beside its core (zigbee2mqtt's `lib/extension/*`): the bridge API,
/// several bridges on one broker, Home Assistant discovery, health. The core (``Bridge``: the
/// registry of devices, the routing of `/set`, `/get` and `/write` to the sessions, announce,
/// outbox resume, the timer) creates an extension only when its feature is enabled, and calls
/// its hooks; every hook has a default that does nothing.
protocol BridgeExtension: AnyObject, Sendable {
    /// The filters it needs besides the core's.
    var subscriptions: [String] { get }
    /// The filters on which the bridge must receive its own publishes too (MQTT 5 no-local off).
    var ownPublishesWanted: Set<String> { get }
    /// A message before the core routes it (after the inbound limits and the crash-loop guard):
    /// true when it was the extension's and is handled.
    func handle(_ message: InboundMessage) -> Bool
    /// `run()` is about to start: `current` are the devices it runs, `gone` the store's devices
    /// configured no more (their rows go next).
    func willRun(current: [DeviceConfig], gone: [DeviceRecord])
    /// Its tasks, added to `run()`'s task group before the sessions'.
    func start(in group: inout DiscardingTaskGroup)
    /// `run()`'s task group ended (the bridge is stopping); called in the reverse order of `start`.
    func stop() async
    /// Whether it needs ``tick()`` every `tick` of the bridge (the cluster: its reports,
    /// claims and stall watch); the device sessions need no tick, they post their deadlines.
    var ticks: Bool { get }
    /// The core's timer, every `tick` while ``ticks``.
    func tick()
    /// The bridge publishes its retained topics (at start, and again after the broker came back).
    func announce()
    /// Its part of `bridge/info`.
    func info(into o: inout JSONObject)
    /// The broker came back; true when the extension republishes the sessions' retained state
    /// itself (the core then leaves them alone).
    func brokerReconnected() -> Bool
    /// The broker connection is gone.
    func brokerDisconnected()
    /// Whether `<base>/bridge/state` stays `online` when this bridge stops (another bridge of
    /// the same broker still runs).
    var keepsBridgeOnline: Bool { get }
    /// The registry changed at runtime (``Bridge/deviceStarted(_:)`` and the others): a device's
    /// session started, a device left the bridge, a device's configuration changed, or a
    /// `config/reload` ended.
    func deviceStarted(_ device: DeviceConfig)
    func deviceRetired(_ device: DeviceConfig)
    func deviceReplaced(_ old: DeviceConfig, with new: DeviceConfig)
    func devicesChanged()
    /// Several bridges on one broker: this bridge became `device`'s owner (it runs it now).
    func deviceOwned(_ device: DeviceConfig)
}

extension BridgeExtension {
    var subscriptions: [String] { [] }
    var ownPublishesWanted: Set<String> { [] }
    func handle(_ message: InboundMessage) -> Bool { false }
    func willRun(current: [DeviceConfig], gone: [DeviceRecord]) {}
    func start(in group: inout DiscardingTaskGroup) {}
    func stop() async {}
    var ticks: Bool { false }
    func tick() {}
    func announce() {}
    func info(into o: inout JSONObject) {}
    func brokerReconnected() -> Bool { false }
    func brokerDisconnected() {}
    var keepsBridgeOnline: Bool { false }
    func deviceStarted(_ device: DeviceConfig) {}
    func deviceRetired(_ device: DeviceConfig) {}
    func deviceReplaced(_ old: DeviceConfig, with new: DeviceConfig) {}
    func devicesChanged() {}
    func deviceOwned(_ device: DeviceConfig) {}
}

/// Where the commands of `/set`, `/get` and `/write` go when an extension decides it (several
/// bridges on one broker: only the device's owner runs them). Without one, each goes straight
/// to its device's session.
protocol CommandRouting: Sendable {
    /// Delivers, holds or drops `command` for `device`.
    func route(_ command: PendingCommand, to session: DeviceSession, device: String)
    /// Whether this bridge answers a command for `device` that no session takes (a bad or
    /// unknown one).
    func answers(for device: String?) -> Bool
    /// Whether this bridge runs `device` now (its owner), so publishes what describes it.
    func owns(_ device: String) -> Bool
}

/// The extensions a bridge runs, installed once at the end of its `init` (they refer back to
/// the bridge, so they come after it) and only read afterwards.
final class InstalledExtensions: Sendable {
    struct Contents: Sendable {
        var all: [any BridgeExtension] = []
        var router: (any CommandRouting)?
        var health: HealthExtension?
        var cluster: ClusterExtension?
        var requests: BridgeAPIExtension?
        var discovery: DiscoveryExtension?
    }

    private let installed = Mutex(Contents())

    func install(_ contents: Contents) { installed.withLock { $0 = contents } }

    var all: [any BridgeExtension] { installed.withLock { $0.all } }
    var router: (any CommandRouting)? { installed.withLock { $0.router } }
    var health: HealthExtension? { installed.withLock { $0.health } }
    var cluster: ClusterExtension? { installed.withLock { $0.cluster } }
    var requests: BridgeAPIExtension? { installed.withLock { $0.requests } }
    var discovery: DiscoveryExtension? { installed.withLock { $0.discovery } }
}
