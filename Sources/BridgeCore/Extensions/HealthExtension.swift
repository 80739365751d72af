import BinaryCoding
import Foundation
import Synchronization

/// What a check of the Bluetooth side found (``BridgeControl/checkBluetooth``), for
/// `bridge/request/health_check`: whether the D-Bus bus answered, whether `org.bluez` is on it,
/// each configured adapter's state (`ok`, `missing`, `powered_off`, or `unknown` when BlueZ could
/// not be asked), and one line per problem.
public struct BluetoothHealth: Sendable, Equatable {
    public var bus: Bool
    public var bluez: Bool
    public var adapters: [String: String]
    public var problems: [String]

    public init(bus: Bool, bluez: Bool, adapters: [String: String], problems: [String]) {
        self.bus = bus
        self.bluez = bluez
        self.adapters = adapters
        self.problems = problems
    }
}

/// `<base>/bridge/health` (QoS 0, not retained), every `healthInterval`: uptime, memory, the
/// counters (``BridgeCounters``), each device's link state and queue depth. The same report
/// answers `bridge/request/health_check`.
final class HealthExtension: BridgeExtension {
    unowned let bridge: Bridge
    let interval: Duration
    /// Whether the broker connection is up (the bridge connected before it runs; the client's
    /// events say when it drops and comes back).
    let brokerUp = Atomic(true)
    /// The callers waiting for the Bluetooth check under way (nil: none runs): one check at a
    /// time, its answer shared by every `health_check` that came meanwhile, so a flood of
    /// requests opens one D-Bus client, not one each.
    let bluetoothWaiters = Mutex<[CheckedContinuation<BluetoothHealth, Never>]?>(nil)

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

    func brokerDisconnected() { brokerUp.store(false, ordering: .relaxed) }

    func brokerReconnected() -> Bool {
        brokerUp.store(true, ordering: .relaxed)
        return false
    }

    /// `bridge/request/health_check`: the checks (the broker connection, then the Bluetooth
    /// side, asked now) and the report; `healthy` only when every check passed, else `reasons`.
    func check() async -> JSONObject {
        var reasons: [String] = []
        var checks = JSONObject()
        let broker = brokerUp.load(ordering: .relaxed)
        checks["mqtt"] = .bool(broker)
        if !broker { reasons.append("the MQTT broker connection is down (the bridge reconnects)") }
        if let probe = bridge.control.checkBluetooth {
            let bt = await checkBluetooth(probe)
            checks["dbus"] = .bool(bt.bus)
            checks["bluez"] = .bool(bt.bluez)
            checks["adapters"] = .object(JSONObject(bt.adapters.sorted { $0.key < $1.key }.map { (key: $0.key, value: JSONValue.string($0.value)) }))
            reasons += bt.problems
        }
        var o: JSONObject = ["healthy": .bool(reasons.isEmpty)]
        if !reasons.isEmpty { o["reasons"] = .array(reasons.map { .string($0) }) }
        o["checks"] = .object(checks)
        o.merge(await report())
        return o
    }

    /// Runs `probe`, or waits for the one under way and takes its answer.
    func checkBluetooth(_ probe: @escaping @Sendable () async -> BluetoothHealth) async -> BluetoothHealth {
        let first = bluetoothWaiters.withLock { w -> Bool in
            guard w == nil else { return false }
            w = []
            return true
        }
        if !first {
            return await withCheckedContinuation { c in
                let now = bluetoothWaiters.withLock { w -> Bool in
                    guard w != nil else { return true }  // it ended meanwhile: check again below
                    w?.append(c)
                    return false
                }
                if now { Task { c.resume(returning: await self.checkBluetooth(probe)) } }
            }
        }
        let result = await probe()
        for waiter in bluetoothWaiters.withLock({ w -> [CheckedContinuation<BluetoothHealth, Never>] in
            defer { w = nil }
            return w ?? []
        }) { waiter.resume(returning: result) }
        return result
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
