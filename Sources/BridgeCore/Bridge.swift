import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging
import Synchronization

/// Where a device's configuration comes from: the YAML file (authoritative: changed only by
/// editing it) or a `bridge/request/device/add` (kept in the store).
public enum DeviceSource: String, Sendable, Equatable {
    case file
    case mqtt
}

/// What the bridge needs from the process around it for `restart`, `config/reload` and
/// `options` (the runtime fills these in; a nil hook makes its request an error saying so).
public struct BridgeControl: Sendable {
    /// Reads and validates the configuration file again.
    public var reloadConfiguration: (@Sendable () throws -> Configuration)?
    /// Changes the log level of the running process.
    public var setLogLevel: (@Sendable (LogLevel) -> Void)?
    /// Stops the bridge gracefully and starts it again (same process id).
    public var restart: (@Sendable () -> Void)?
    /// The configuration file, for `bridge/info` and the errors that say to edit it.
    public var configurationFile: String?
    /// The log level at start when not the file's (`gatt2mqtt run --log-level`).
    public var logLevel: LogLevel?
    /// Checks the Bluetooth side now, for `health_check`: the bus, `org.bluez`, each adapter.
    public var checkBluetooth: (@Sendable () async -> BluetoothHealth)?
    /// The configuration file's bytes as they are on disk, for `backup`; throws a message that
    /// names the file when it cannot be read or is larger than the limit given (bytes).
    public var readConfigurationFile: (@Sendable (_ limit: Int) throws -> [UInt8])?

    public init(reloadConfiguration: (@Sendable () throws -> Configuration)? = nil, setLogLevel: (@Sendable (LogLevel) -> Void)? = nil,
                restart: (@Sendable () -> Void)? = nil, configurationFile: String? = nil, logLevel: LogLevel? = nil) {
        self.logLevel = logLevel
        self.reloadConfiguration = reloadConfiguration
        self.setLogLevel = setLogLevel
        self.restart = restart
        self.configurationFile = configurationFile
    }
}

/// The bridge's core: the registry of devices (the file's and those added over MQTT), the
/// routing of `/set`, `/get` and `/write` to their sessions (Bridge+Commands), the bridge's own
/// retained topics (Bridge+Announce), the durable outbox resumed at start, and the one timer.
/// Every other feature is a ``BridgeExtension`` (Extensions/) the core installs when it is
/// enabled: the bridge API, several bridges on one broker, Home Assistant discovery, health.
/// Transports come in through `MQTTPort` and `BLECentral`.
public final class Bridge: Sendable {
    public typealias DriverFactory = @Sendable (DeviceConfig) throws -> any DeviceDriver

    /// One device the bridge runs: a class, so a look-up copies one reference, not the whole
    /// configuration (every command looks its session up).
    final class Registered: Sendable {
        let config: DeviceConfig
        let source: DeviceSource
        let session: DeviceSession

        init(config: DeviceConfig, source: DeviceSource, session: DeviceSession) {
            self.config = config
            self.source = source
            self.session = session
        }
    }

    /// The configuration file as last loaded (at start or by `config/reload`).
    let loadedConfiguration: Mutex<Configuration>
    var configuration: Configuration { loadedConfiguration.withLock { $0 } }
    let topics: Topics
    let store: BridgeStore
    let mqtt: any MQTTPort
    /// The answers' writes staged this turn (``AnswerBatch``); `mqtt` is this batch.
    let batch: AnswerBatch
    let central: any BLECentral
    /// The device profiles: drivers, discovery, guesses (`DeviceProfiles.all` in the runtime).
    let profiles: ProfileCatalog
    let control: BridgeControl
    /// Every device, by id: the file's and the runtime ones.
    let registry = Mutex<[String: Registered]>([:])
    /// Sessions started after `run()` began, handed to its task group.
    let spawns: AsyncStream<Spawn>
    let spawnSink: AsyncStream<Spawn>.Continuation
    /// A passive device's session started at runtime: the discovery for passive devices, which
    /// waits while there is none, begins (``listenForPassiveDevices()``).
    let passiveStarts: AsyncStream<Void>
    let passiveStartSink: AsyncStream<Void>.Continuation
    let output: SessionOutput
    let logger: Logger
    let version: String
    let counters = BridgeCounters()
    let tick: Duration
    /// The one clock of every deadline, timeout and wait (``BridgeClock``).
    let clock: BridgeClock
    var sleep: Sleep { clock.sleep }
    let connectAttempt: Duration
    let started = ContinuousClock.now
    /// The log level now (the file's, or the last `options` request).
    let logLevel: Mutex<LogLevel>
    /// The QoS 1 messages handled lately (``Redeliveries``).
    let redeliveries: Mutex<Redeliveries>
    /// The bounds on what arrives over MQTT (`limits`, as at start).
    let limits: LimitSettings
    /// What `bridge/request/…` may do (`mqtt.api`, as at start).
    let api: BridgeAPIAccess
    /// The retained requests this bridge cleared lately (``OwnClears``).
    let ownClears = Mutex(OwnClears())
    /// The messages the previous run died handling (``AfterCrash``).
    let afterCrash = Mutex(AfterCrash())
    /// The features beside the core (``BridgeExtension``), installed by `init`.
    let extensions = InstalledExtensions()

    /// Every filter the bridge needs to subscribe to (`mqtt.api: off`: not `bridge/request/#`).
    public var subscriptions: [String] {
        let own = topics.subscriptions.filter { $0 != topics.requestFilter }  // the bridge API's is its extension's
        return own + extensions.all.flatMap(\.subscriptions)
    }

    /// How long `device/add` may wait for its device (`timeout`, seconds; default 30).
    public static let addTimeouts: ClosedRange<Duration> = .milliseconds(1) ... .seconds(300)

    /// Work that needs time (a scan, a registry change) runs in `run()`'s task group.
    enum Spawn: Sendable {
        case session(DeviceSession)
        case job(@Sendable () async -> Void)
    }

    /// `config/reload` without a request (SIGHUP): the outcome goes to the log and `bridge/event`.
    public func reloadConfiguration() { extensions.requests?.reloadConfiguration() }

    /// The default of `init`'s `connectAttempt`: long enough for a present device to connect and
    /// resolve its services, short enough that an away one holds the others up for at most this.
    public static let defaultConnectAttempt: Duration = BridgeDefaults.connectAttempt

    /// - Parameter connectAttempt: how long one connect attempt (scan included) may hold the
    ///   adapter's connect gate, so a device that is away cannot keep the others from connecting
    ///   (`shared/spec/bridge.md` points 2–3).
    /// - Parameter tick: how often an extension that ``BridgeExtension/ticks`` (the cluster) is
    ///   ticked; the device sessions have no tick: the bridge's timer wakes them at their deadlines.
    /// - Parameter sleep: how the bridge's tasks wait; the runtime passes its event loop's timers
    ///   so that waiting wakes no other thread.
    /// - Parameter clock: the clock of every deadline and wait (default: the continuous clock,
    ///   waiting with `sleep`); tests pass a manual one.
    /// - Parameter batchCommits: the caller runs ``commitBatch()`` once per event-loop turn
    ///   (before the loop sleeps), so the answers of one turn are committed together
    ///   (``AnswerBatch``); false: each session commits at the end of each event it handles.
    /// - Parameter loop: the event loop every device session runs on (the runtime's), whose
    ///   callbacks then hand a session its events in their own turn (``SessionEvents``); nil:
    ///   each session on a serial queue of its own.
    public init(configuration: Configuration, store: BridgeStore, mqtt: any MQTTPort, central: any BLECentral,
                profiles: ProfileCatalog, version: String = "0.1.0", logger: Logger = Logger(label: "gatt2mqtt.bridge"),
                tick: Duration = BridgeDefaults.tick, healthInterval: Duration = BridgeDefaults.healthInterval,
                connectAttempt: Duration = Bridge.defaultConnectAttempt, sleep: Sleep = .task, clock: BridgeClock? = nil,
                control: BridgeControl = BridgeControl(), batchCommits: Bool = false,
                loop: SessionLoop? = nil) throws {
        // The options set over MQTT earlier (bridge/request/options), over the file's settings.
        var configuration = configuration
        let fileLevel = configuration.logLevel
        configuration = RuntimeOptions.applyingStored(store, to: configuration, logger: logger)
        if control.logLevel == nil, configuration.logLevel != fileLevel { control.setLogLevel?(configuration.logLevel) }
        self.tick = tick
        self.clock = clock ?? .continuous(sleep: sleep)
        self.loadedConfiguration = Mutex(configuration)
        self.topics = Topics(base: configuration.mqtt.baseTopic)
        self.store = store
        let batch = AnswerBatch(inner: mqtt, store: store, metrics: counters.metrics, logger: logger, deferred: batchCommits)
        self.batch = batch
        // Every publish, the bridge's own included, goes through the batch: none overtakes a
        // response or state held for its commit.
        let mqtt: any MQTTPort = batch
        self.mqtt = mqtt
        self.central = central
        self.profiles = profiles
        self.control = control
        self.logger = logger
        self.version = version
        self.connectAttempt = connectAttempt
        limits = configuration.limits
        api = configuration.mqtt.api
        redeliveries = Mutex(Redeliveries(budget: configuration.limits.redeliveryCache))
        logLevel = Mutex(control.logLevel ?? configuration.logLevel)
        var discovery = configuration.homeAssistant.enabled
            ? HomeAssistantDiscovery(prefix: configuration.homeAssistant.discoveryPrefix, topics: topics, version: version,
                                     frontendURL: configuration.frontend?.address, profiles: profiles) : nil
        discovery?.advertisementFormats = configuration.advertisementFormats
        var output = SessionOutput(topics: topics, gate: ConnectGate(),
                                   history: (configuration.database.historyMaxEvents, configuration.database.historyMaxAge),
                                   mqtt: mqtt, batch: batch, store: store, stateQoS: configuration.mqtt.qos,
                                   retainState: configuration.mqtt.retainState, logger: logger, counters: counters,
                                   clock: self.clock)
        if configuration.cluster.enabled { output.node = configuration.nodeID }
        output.loop = loop
        output.maxQueued = configuration.limits.maxQueued
        if let discovery {
            // A device's `device` block follows what its state learnt (a GoPro's model, firmware, serial).
            output.deviceInfoChanged = DiscoveryExtension.deviceInfoHook(discovery, mqtt: mqtt)
        }
        self.output = output
        (spawns, spawnSink) = AsyncStream.makeStream(of: Spawn.self)
        (passiveStarts, passiveStartSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let states = (try? store.states()) ?? [:]
        var registered: [String: Registered] = [:]
        for device in configuration.devices {
            registered[device.id] = Registered(config: device, source: .file, session: try makeSession(device, state: states[device.id]))
        }
        // Devices added over MQTT earlier; one the file now also defines (same id or address)
        // yields to the file.
        for (id, text) in (try? store.runtimeDevices()) ?? [] {
            do {
                let device = try DeviceConfig(json: try JSONValue(parsing: text))
                if let clash = Self.clash(device, with: registered.values.map(\.config)) {
                    logger.warning("a device added over MQTT yields to the configuration file", metadata: ["device": "\(id)", "reason": "\(clash)"])
                    try? store.removeRuntimeDevice(id: id)
                    continue
                }
                registered[device.id] = Registered(config: device, source: .mqtt, session: try makeSession(device, state: states[device.id]))
            } catch {
                logger.error("a device added over MQTT could not be restored", metadata: ["device": "\(id)", "error": "\(error)"])
            }
        }
        registry.withLock { $0 = registered }
        var installed = InstalledExtensions.Contents()
        let requests = BridgeAPIExtension(bridge: self)
        installed.requests = requests
        if configuration.cluster.enabled {
            // Several bridges on one broker (docs/scale-out.md): commands go through the cluster's route.
            let cluster = ClusterExtension(bridge: self, node: configuration.nodeID, settings: configuration.cluster)
            installed.cluster = cluster
            installed.router = cluster
            installed.all.append(cluster)
        }
        let health = HealthExtension(bridge: self, interval: healthInterval)
        if let discovery {
            let published = DiscoveryExtension(bridge: self, discovery: discovery)
            installed.discovery = published
            installed.all.append(published)
        }
        installed.health = health
        installed.all += [requests, health]
        extensions.install(installed)
    }

    /// Commits the answers staged since the last call in one transaction and publishes what
    /// waited for them. The runtime calls it from its event loop's before-sleep hook (with
    /// `batchCommits: true`); true when it committed or published anything.
    @discardableResult
    public func commitBatch() -> Bool { batch.commit() }

    func makeSession(_ device: DeviceConfig, state: JSONObject?) throws -> DeviceSession {
        let configuration = self.configuration
        // Several adapters: the device's pin follows its configuration (a device added or changed at runtime).
        if let decoder = try profiles.makeDecoder(for: device, formats: configuration.advertisementFormats) {
            // A passive device: no link; its advertisements come from the bridge's discovery (Bridge+Passive).
            // An encrypted one resumes from its stored counter (a replay stays refused across restarts).
            let counter = decoder.keyCheck.flatMap { try? store.passiveCounter(for: device.id, keyCheck: $0) }
            return DeviceSession(config: device, driver: PassiveDevices.NoDriver(), central: central, output: output, initialState: state ?? [:],
                                 reconnect: (configuration.mqtt.reconnectMin, configuration.mqtt.reconnectMax),
                                 owned: output.node == nil, decoder: decoder, lastCounter: counter)
        }
        if let adapters = central as? AdapterSet, let address = device.address { adapters.pin(address, to: device.adapter) }
        return DeviceSession(config: device, driver: try profiles.makeDriver(for: device), central: central, output: output, initialState: state ?? [:],
                             reconnect: (configuration.mqtt.reconnectMin, configuration.mqtt.reconnectMax),
                             connectAttempt: connectAttempt, owned: output.node == nil)  // a node owns no device until it claims it
    }

    /// Why `device` cannot join `others`: the same id, or the same address.
    static func clash(_ device: DeviceConfig, with others: [DeviceConfig]) -> String? {
        if others.contains(where: { $0.id == device.id }) { return "a device '\(device.id)' exists already" }
        if let a = device.address, let other = others.first(where: { $0.address == a }) {
            return "\(a) is already the device '\(other.id)'"
        }
        return nil
    }

    /// Every device, file first then runtime, each in its order.
    var devices: [Registered] {
        let all = registry.withLock { Array($0.values) }
        let fileOrder = configuration.devices.map(\.id)
        let runtimeOrder = ((try? store.runtimeDevices()) ?? []).map(\.id)
        func rank(_ r: Registered) -> Int {
            (r.source == .file ? fileOrder.firstIndex(of: r.config.id) : runtimeOrder.firstIndex(of: r.config.id).map { $0 + 100_000 }) ?? 200_000
        }
        return all.sorted { (rank($0), $0.config.id) < (rank($1), $1.config.id) }
    }

    var deviceConfigs: [DeviceConfig] { devices.map(\.config) }

    func session(_ id: String) -> DeviceSession? { registry.withLock { $0[id]?.session } }

    /// Runs until cancelled: announces the bridge, resumes the outbox, runs every device session
    /// (and those added later); on cancellation publishes `offline` and closes the links.
    public func run() async {
        let current = deviceConfigs
        let configured = Set(current.map(\.id))
        let gone = ((try? store.devices()) ?? []).filter { !configured.contains($0.id) }
        for e in extensions.all { e.willRun(current: current, gone: gone) }
        for r in gone { try? store.removeDevice(r.id) }
        for device in current { registerInStore(device) }
        announce()
        answerCrashed()
        resumeOutbox()
        await withDiscardingTaskGroup { group in
            for e in extensions.all { e.start(in: &group) }
            for r in registry.withLock({ Array($0.values) }) {
                group.addTask { await r.session.run() }
            }
            group.addTask { await self.listenForPassiveDevices() }
            group.addTask { await self.runTimer() }
            // Sessions added at runtime join the group; the stream ends when the bridge is cancelled.
            for await spawn in spawns {
                switch spawn {
                case let .session(session):
                    group.addTask { await session.run() }
                    if session.isPassive { passiveStartSink.yield() }
                case let .job(job): group.addTask { await job() }
                }
            }
            group.cancelAll()
        }
        for e in extensions.all.reversed() { await e.stop() }
        try? store.clearAllInflight()  // a clean stop: nothing is being handled
        // What the last turn staged is committed and its publishes handed over now, not at the
        // loop's next commit: `offline` below would wait behind them and could leave after the
        // MQTT client (stopped next) had disconnected cleanly — no Will, the retained state left
        // `online` (BridgeTests "a stop publishes offline even with writes staged").
        batch.commit()
        // With several bridges, the bridge is offline when the last of them stops.
        if !extensions.all.contains(where: \.keepsBridgeOnline) {
            mqtt.send(OutboundMessage(topic: topics.bridgeState, json: ["state": "offline"], qos: 1, retain: true))
        }
    }

    /// The bridge's one timer (issue 24 §4): it sleeps until the earliest deadline any session
    /// posted (``WakeSchedule``), woken sooner when an earlier one is posted, then ticks the
    /// sessions whose deadline came; an extension that ``BridgeExtension/ticks`` (the cluster)
    /// is ticked every `tick` in the same wake-ups. An idle bridge without a cluster wakes only
    /// when a device has something due: no fixed tick.
    func runTimer() async {
        let wake = output.wake
        var extensionsDue = extensions.all.contains(where: \.ticks) ? clock.now() + tick : nil
        while !Task.isCancelled {
            let now = clock.now()
            let due = wake.takeDue(at: now)
            if !due.isEmpty {
                for s in registry.withLock({ $0.values.map(\.session) }) where due.contains(ObjectIdentifier(s)) { s.tick() }
            }
            if let t = extensionsDue, now >= t {
                for e in extensions.all where e.ticks { e.tick() }
                extensionsDue = now + tick
            }
            await wake.wait(until: earliest(wake.earliest, extensionsDue), clock: clock)
        }
    }

    /// Keeps the store's registry row of a device (pairing and last-seen survive restarts; an
    /// address change means another device).
    func registerInStore(_ device: DeviceConfig) {
        let old = ((try? store.devices()) ?? []).first { $0.id == device.id }.flatMap { $0.address == device.address ? $0 : nil }
        try? store.upsertDevice(DeviceRecord(id: device.id, address: device.address, profile: device.profile.rawValue, name: device.name,
                                             paired: old?.paired ?? false, lastSeen: old?.lastSeen))
    }

    /// The Home Assistant config messages of one device, its `device` block from the stored
    /// state (empty when discovery is off).
    public func discoveryMessages(for device: DeviceConfig) -> [OutboundMessage] {
        extensions.discovery?.messages(for: device) ?? []
    }

    /// Home Assistant discovery (``DiscoveryExtension``); nil when it is off.
    var discovery: HomeAssistantDiscovery? { extensions.discovery?.discovery }

    /// A device's session started at runtime (added, renamed, changed, or new in the file).
    func deviceStarted(_ device: DeviceConfig) { for e in extensions.all { e.deviceStarted(device) } }
    /// A device left the bridge (removed, renamed, or its session replaced).
    func deviceRetired(_ device: DeviceConfig) { for e in extensions.all { e.deviceRetired(device) } }
    /// A device's configuration changed (its session is being replaced).
    func deviceReplaced(_ old: DeviceConfig, with new: DeviceConfig) { for e in extensions.all { e.deviceReplaced(old, with: new) } }
    /// A `config/reload` changed the registry.
    func devicesChanged() { for e in extensions.all { e.devicesChanged() } }

    /// Several bridges on one broker: this bridge became the device's owner.
    func deviceOwned(_ device: DeviceConfig) { for e in extensions.all { e.deviceOwned(device) } }

    /// `<base>/bridge/health` now (``HealthExtension``).
    public func publishHealth() async { await extensions.health?.publish() }

    func health() async -> JSONObject { await extensions.health?.report() ?? [:] }

    /// Several bridges on one broker (``ClusterExtension``); nil: this bridge runs every device
    /// it is configured with.
    var cluster: ClusterExtension? { extensions.cluster }

    /// The broker came back (the client reconnected): republish retained state (with several
    /// bridges, the cluster republishes after it read the claims again).
    public func brokerReconnected() async {
        announce()
        var republished = false
        for e in extensions.all where e.brokerReconnected() { republished = true }
        if republished { return }
        for s in registry.withLock({ $0.values.map(\.session) }) { await s.republish() }
    }

}

/// How the bridge's tasks wait: `Task.sleep` (the default), or an event loop's timers (the
/// runtime's, so a tick wakes only the loop's own thread).
public struct Sleep: Sendable {
    public let body: @Sendable (Duration) async throws -> Void
    public init(_ body: @escaping @Sendable (Duration) async throws -> Void) { self.body = body }
    /// `Task.sleep(for:)`.
    public static let task = Sleep { try await Task.sleep(for: $0) }
    public func callAsFunction(_ d: Duration) async throws { try await body(d) }
}
