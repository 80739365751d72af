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

    public init(reloadConfiguration: (@Sendable () throws -> Configuration)? = nil, setLogLevel: (@Sendable (LogLevel) -> Void)? = nil,
                restart: (@Sendable () -> Void)? = nil, configurationFile: String? = nil, logLevel: LogLevel? = nil) {
        self.logLevel = logLevel
        self.reloadConfiguration = reloadConfiguration
        self.setLogLevel = setLogLevel
        self.restart = restart
        self.configurationFile = configurationFile
    }
}

/// The bridge: routes MQTT commands to device sessions, publishes the bridge's own topics,
/// resumes the durable outbox, and answers `bridge/request/…` (Bridge+Requests.swift): devices
/// are added, changed and removed at runtime. Transports come in through `MQTTPort` and
/// `BLECentral`.
public final class Bridge: Sendable {
    public typealias DriverFactory = @Sendable (DeviceConfig) throws -> any DeviceDriver

    /// One device the bridge runs.
    struct Registered: Sendable {
        var config: DeviceConfig
        var source: DeviceSource
        var session: DeviceSession
    }

    /// The configuration file as last loaded (at start or by `config/reload`).
    let file: Mutex<Configuration>
    var configuration: Configuration { file.withLock { $0 } }
    let topics: Topics
    let store: BridgeStore
    let mqtt: any MQTTPort
    /// The answers' writes staged this turn (``AnswerBatch``); `mqtt` is this batch.
    let batch: AnswerBatch
    let central: any BLECentral
    let drivers: DriverFactory
    let control: BridgeControl
    /// Every device, by id: the file's and the runtime ones.
    let registry = Mutex<[String: Registered]>([:])
    /// Sessions started after `run()` began, handed to its task group.
    let spawns: AsyncStream<Spawn>
    let spawnSink: AsyncStream<Spawn>.Continuation
    /// Requests that change the registry, handled one at a time in arrival order.
    let changes: AsyncStream<@Sendable () async -> Void>
    let changeSink: AsyncStream<@Sendable () async -> Void>.Continuation
    let output: SessionOutput
    let logger: Logger
    let version: String
    let discovery: HomeAssistantDiscovery?
    let counters = BridgeCounters()
    let healthInterval: Duration
    let tick: Duration
    /// The one clock of every deadline, timeout and wait (``BridgeClock``).
    let clock: BridgeClock
    var sleep: Sleep { clock.sleep }
    let connectAttempt: Duration
    let started = ContinuousClock.now
    /// The log level now (the file's, or the last `options` request).
    let logLevel: Mutex<LogLevel>
    /// Settings a `config/reload` saw changed that only a restart applies.
    let restartRequired = Mutex<[String]>([])
    /// The running scan and what it saw (for `device/add` without a profile).
    let scanning = Mutex(ScanState())
    /// Several bridges on one broker (`cluster.enabled`, docs/scale-out.md); nil: this bridge
    /// runs every device it is configured with.
    let cluster: ClusterState?
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

    /// Every filter the bridge needs to subscribe to (`mqtt.api: off`: not `bridge/request/#`).
    public var subscriptions: [String] {
        let own = api == .off ? topics.subscriptions.filter { $0 != topics.requestFilter } : topics.subscriptions
        return own + (discovery.map { [$0.statusTopic] } ?? []) + clusterSubscriptions
    }

    /// The default of `init`'s `connectAttempt`: long enough for a present device to connect and
    /// resolve its services, short enough that an away one holds the others up for at most this.
    public static let defaultConnectAttempt: Duration = BridgeDefaults.connectAttempt

    /// - Parameter connectAttempt: how long one connect attempt (scan included) may hold the
    ///   adapter's connect gate, so a device that is away cannot keep the others from connecting
    ///   (`shared/spec/bridge.md` points 2–3).
    /// - Parameter tick: how often every session checks its deadlines, timeouts, keep-alives and
    ///   polls (one ticker for all sessions).
    /// - Parameter sleep: how the bridge's tasks wait; the runtime passes its event loop's timers
    ///   so that waiting wakes no other thread.
    /// - Parameter clock: the clock of every deadline and wait (default: the continuous clock,
    ///   waiting with `sleep`); tests pass a manual one.
    /// - Parameter batchCommits: the caller runs ``commitBatch()`` once per event-loop turn
    ///   (before the loop sleeps), so the answers of one turn are committed together
    ///   (``AnswerBatch``); false: each session commits at the end of each event it handles.
    public init(configuration: Configuration, store: BridgeStore, mqtt: any MQTTPort, central: any BLECentral,
                drivers: @escaping DriverFactory, version: String = "0.1.0", logger: Logger = Logger(label: "gatt2mqtt.bridge"),
                tick: Duration = BridgeDefaults.tick, healthInterval: Duration = BridgeDefaults.healthInterval,
                connectAttempt: Duration = Bridge.defaultConnectAttempt, sleep: Sleep = .task, clock: BridgeClock? = nil,
                control: BridgeControl = BridgeControl(), batchCommits: Bool = false) throws {
        self.healthInterval = healthInterval
        self.tick = tick
        self.clock = clock ?? .continuous(sleep: sleep)
        self.file = Mutex(configuration)
        self.topics = Topics(base: configuration.mqtt.baseTopic)
        self.store = store
        let batch = AnswerBatch(inner: mqtt, store: store, metrics: counters.metrics, logger: logger, deferred: batchCommits)
        self.batch = batch
        // Every publish, the bridge's own included, goes through the batch: none overtakes a
        // response or state held for its commit.
        let mqtt: any MQTTPort = batch
        self.mqtt = mqtt
        self.central = central
        self.drivers = drivers
        self.control = control
        self.logger = logger
        self.version = version
        self.connectAttempt = connectAttempt
        limits = configuration.limits
        api = configuration.mqtt.api
        redeliveries = Mutex(Redeliveries(budget: configuration.limits.redeliveryCache))
        cluster = configuration.cluster.enabled ? ClusterState(node: configuration.nodeID, settings: configuration.cluster) : nil
        logLevel = Mutex(control.logLevel ?? configuration.logLevel)
        discovery = configuration.homeAssistant.enabled
            ? HomeAssistantDiscovery(prefix: configuration.homeAssistant.discoveryPrefix, topics: topics, version: version) : nil
        var output = SessionOutput(topics: topics, gate: ConnectGate(),
                                   history: (configuration.database.historyMaxEvents, configuration.database.historyMaxAge),
                                   mqtt: mqtt, batch: batch, store: store, stateQoS: configuration.mqtt.qos,
                                   retainState: configuration.mqtt.retainState, logger: logger, counters: counters,
                                   clock: self.clock)
        if configuration.cluster.enabled { output.node = configuration.nodeID }
        output.maxQueued = configuration.limits.maxQueued
        if let discovery {
            // A device's `device` block follows what its state learnt (a GoPro's model, firmware, serial).
            output.deviceInfoChanged = { [mqtt] device, state in
                for m in discovery.messages(for: device, state: state) { mqtt.send(m) }
            }
        }
        self.output = output
        (spawns, spawnSink) = AsyncStream.makeStream(of: Spawn.self)
        (changes, changeSink) = AsyncStream.makeStream(of: (@Sendable () async -> Void).self)
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
    }

    /// Commits the answers staged since the last call in one transaction and publishes what
    /// waited for them. The runtime calls it from its event loop's before-sleep hook (with
    /// `batchCommits: true`); true when it committed or published anything.
    @discardableResult
    public func commitBatch() -> Bool { batch.commit() }

    func makeSession(_ device: DeviceConfig, state: JSONObject?) throws -> DeviceSession {
        let configuration = self.configuration
        // Several adapters: the device's pin follows its configuration (a device added or changed at runtime).
        if let adapters = central as? AdapterSet, let address = device.address { adapters.pin(address, to: device.adapter) }
        return DeviceSession(config: device, driver: try drivers(device), central: central, output: output, initialState: state ?? [:],
                             reconnect: (configuration.mqtt.reconnectMin, configuration.mqtt.reconnectMax),
                             connectAttempt: connectAttempt, owned: cluster == nil)
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
        if let discovery {
            // Withdraw what was published before and is configured no more (a device, or a mapping
            // of one). A store from before the topics were recorded still knows the gone devices.
            var previous = (try? store.discoveryTopics()) ?? []
            previous.formUnion(gone.compactMap { r -> DeviceConfig? in
                guard let p = DeviceProfile(rawValue: r.profile), p != .custom else { return nil }
                var d = DeviceConfig(id: r.id, profile: p)
                d.address = r.address
                return d
            }.flatMap { discovery.messages(for: [$0]).map(\.topic) })
            for m in discovery.removals(previous: previous, current: current) { mqtt.send(m) }
            try? store.replaceDiscoveryTopics(Set(discovery.messages(for: current).map(\.topic)))
        }
        for r in gone { try? store.removeDevice(r.id) }
        for device in current { registerInStore(device) }
        announce()
        answerCrashed()
        resumeOutbox()
        await withDiscardingTaskGroup { group in
            runCluster(in: &group)
            for r in registry.withLock({ Array($0.values) }) {
                group.addTask { await r.session.run() }
            }
            group.addTask {
                // One ticker for every session (one timer wake-up per tick, not one per device).
                while !Task.isCancelled {
                    try? await self.sleep(self.tick)
                    for s in self.registry.withLock({ $0.values.map(\.session) }) { s.tickNow() }
                    self.clusterTick()
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await self.sleep(self.healthInterval)
                    if Task.isCancelled { break }
                    await self.publishHealth()
                }
            }
            group.addTask {
                // Registry changes, one at a time (device/add waits for its link meanwhile).
                for await change in self.changes { await change() }
            }
            // Sessions added at runtime join the group; the stream ends when the bridge is cancelled.
            for await spawn in spawns {
                switch spawn {
                case let .session(session): group.addTask { await session.run() }
                case let .job(job): group.addTask { await job() }
                }
            }
            group.cancelAll()
        }
        await stopScan()
        try? store.clearAllInflight()  // a clean stop: nothing is being handled
        publishNodeState(online: false)
        // With several bridges, the bridge is offline when the last of them stops.
        if cluster?.view.withLock({ $0.online.count > 1 }) != true {
            mqtt.send(OutboundMessage(topic: topics.bridgeState, json: ["state": "offline"], qos: 1, retain: true))
        }
    }

    /// Keeps the store's registry row of a device (pairing and last-seen survive restarts; an
    /// address change means another device).
    func registerInStore(_ device: DeviceConfig) {
        let old = ((try? store.devices()) ?? []).first { $0.id == device.id }.flatMap { $0.address == device.address ? $0 : nil }
        try? store.upsertDevice(DeviceRecord(id: device.id, address: device.address, profile: device.profile.rawValue, name: device.name,
                                             paired: old?.paired ?? false, lastSeen: old?.lastSeen))
    }

    /// Publishes the bridge's retained topics (at start, and again after the broker came back).
    public func announce() {
        mqtt.send(OutboundMessage(topic: topics.bridgeState, json: ["state": "online"], qos: 1, retain: true))
        if cluster?.started.withLock({ $0 }) != nil { publishNodeState(online: true) }
        publishInfo()
        publishDevices()
        publishDiscovery()
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
        if let cluster {
            o["node_id"] = .string(cluster.node)
            o["cluster"] = .object(["enabled": true, "nodes_online": .array(cluster.view.withLock { $0.online.sorted() }.map { .string($0) })])
        }
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
        o["scanning"] = .bool(scanning.withLock { $0.scan != nil })
        o["restart_required"] = .array(restartRequired.withLock { $0 }.map { .string($0) })
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
            if let seen = records[d.id]?.lastSeen { o["last_seen"] = .string(seen.iso8601) }
            if d.profile == .custom { o["topics"] = .array(d.characteristics.map { .string($0.topic) }) }
            return .object(o)
        })
    }

    func publishDiscovery() {
        guard let discovery else { return }
        for m in discovery.messages(for: deviceConfigs, states: (try? store.states()) ?? [:]) { mqtt.send(m) }
    }

    /// The Home Assistant config messages of one device, its `device` block from the stored
    /// state (empty when discovery is off).
    public func discoveryMessages(for device: DeviceConfig) -> [OutboundMessage] {
        guard let discovery else { return [] }
        return discovery.messages(for: device, state: ((try? store.states()) ?? [:])[device.id] ?? [:])
    }

    /// `<base>/bridge/health` (QoS 0, not retained): uptime, memory, counters, per-device link
    /// state and queue depth.
    public func publishHealth() async {
        mqtt.send(OutboundMessage(topic: topics.bridgeHealth, json: .object(await health()), qos: 0, retain: false))
    }

    func health() async -> JSONObject {
        var o = JSONObject()
        o["uptime_s"] = .int((ContinuousClock.now - started).components.seconds)
        if let rss = residentMemoryBytes() { o["rss_bytes"] = .int(Int64(rss)) }
        o.merge(counters.json)
        var devices = JSONObject()
        let all = registry.withLock { $0 }
        for id in all.keys.sorted() { devices[id] = await all[id]!.session.health() }
        o["devices"] = .object(devices)
        return o
    }

    /// The broker came back (the client reconnected): republish retained state.
    public func brokerReconnected() async {
        announce()
        if let cluster {
            // Several bridges: the claims and reports are read again before this node acts or
            // republishes anything of its devices (its view may be stale: its Will may be out).
            cluster.disconnected.withLock { $0 = false }
            resync(cluster, at: clock.now())
            return
        }
        for s in registry.withLock({ $0.values.map(\.session) }) { await s.republish() }
    }

    /// Commands left in the outbox by a previous run (or by a session that was replaced):
    /// `sent` ones end `error` (interrupted — at-most-once), queued ones go back to their device
    /// (or expire).
    func resumeOutbox(for device: String? = nil) {
        guard let pending = try? store.pendingCommands(for: device) else { return }
        let (now, wallNow) = (clock.now(), Date())
        for entry in pending {
            guard let cmd = PendingCommand(outboxEntry: entry, now: now, wallNow: wallNow), let session = session(entry.deviceID) else {
                if let id = entry.id { try? store.removeCommand(id) }
                continue
            }
            if CommandQueue.resumption(of: entry.status) == .interrupted {
                if let id = entry.id { try? store.removeCommand(id) }
                output.respond(cmd, device: entry.deviceID, .error,
                               error: CommandError(.interrupted, "the bridge stopped after the command was written (not repeated)"))
            } else {
                routeCommand(cmd, to: session, device: entry.deviceID)
            }
        }
    }

    /// Handles one inbound MQTT message (any thread; returns at once).
    public func handle(_ message: InboundMessage) {
        // Too large, a retained request, a clear: dealt with before anything is parsed (Bridge+Inbound).
        guard admit(message) else { return }
        guard let mark = beginHandling(message) else { return }  // the message that crashed the last run, again
        defer { mark.end() }
        if handleCluster(message) { return }
        if let discovery, message.topic == discovery.statusTopic {
            if String(decoding: message.payload, as: UTF8.self) == "online" { publishDiscovery() }
            return
        }
        guard let route = topics.route(message.topic) else { return }
        // The broker's second delivery of a message already handled (its PUBACK was lost with
        // the connection): acknowledged by the client, not acted on again (at most once).
        if isRedelivery(message, route) {
            logger.warning("ignoring a message the broker delivered again after a reconnect (already handled)",
                           metadata: ["topic": "\(message.topic)", "packet_id": "\(message.packetID ?? 0)"])
            return
        }
        switch route {
        case let .set(device):
            if message.retain { return ignoreRetained(message) }
            guard let session = session(device, message) else { return }
            let commands: [InboundCommand]
            do throws(CommandError) { commands = try parseSetPayload(message.payload, maxCommands: limits.maxCommands) } catch {
                return reject(device: device, message, transaction: nil, error: error)
            }
            for c in commands { routeCommand(pending(.command(c.body), c.transaction, message, session), to: session, device: device) }
        case let .setAttribute(device, attribute):
            if message.retain { return ignoreRetained(message) }
            guard let session = session(device, message) else { return }
            let body: JSONObject = [attribute: parseShortcutValue(message.payload)]
            routeCommand(pending(.command(body), nil, message, session), to: session, device: device)
        case let .get(device):
            if message.retain { return ignoreRetained(message) }  // a read at every start, for nobody
            guard let session = session(device, message) else { return }
            var attributes: [String] = []
            var transaction: JSONValue?
            if var o = (try? JSONValue(parsing: message.payload))?.objectValue {
                // `transaction` is echoed, as for /set, not an attribute to read.
                transaction = o["transaction"]
                o["transaction"] = nil
                attributes = o.keys
            }
            let body: JSONObject = ["get": .array(attributes.map { .string($0) })]
            routeCommand(pending(.command(body), transaction, message, session), to: session, device: device)
        case let .write(device, characteristic):
            if message.retain { return ignoreRetained(message) }
            guard let session = session(device, message) else { return }
            routeCommand(pending(.write(topic: characteristic, payload: message.payload), nil, message, session), to: session, device: device)
        case let .bridgeRequest(operation):
            handleBridgeRequest(operation, message)
        }
    }

    func pending(_ payload: PendingCommand.Payload, _ transaction: JSONValue?, _ m: InboundMessage, _ s: DeviceSession) -> PendingCommand {
        let now = clock.now()
        return PendingCommand(payload: payload, transaction: transaction, responseTopic: m.responseTopic,
                              correlationData: m.correlationData, deadline: now + s.config.offlineDeadline, received: now)
    }

    func session(_ device: String, _ m: InboundMessage) -> DeviceSession? {
        if let s = session(device) { return s }
        reject(device: nil, m, transaction: nil, error: CommandError(.unknownDevice, "no device '\(device)' is configured"))
        return nil
    }

    func reject(device: String?, _ m: InboundMessage, transaction: JSONValue?, error: CommandError) {
        // With several bridges, one answers: the device's owner, or the leader when none.
        guard answers(for: device) else { return }
        counters.command(.error, error)
        if let device { counters.metrics.rejected(device: device, error) }
        var response = CommandResponse(transaction: transaction, status: .error, error: error)
        response.node = output.node
        let body = response.json
        if let rt = m.responseTopic {
            mqtt.send(OutboundMessage(topic: rt, json: body, qos: 1, retain: false, correlationData: m.correlationData))
        } else if let device {
            mqtt.send(OutboundMessage(topic: topics.response(device), json: body, qos: 1, retain: false))
        }
        mqtt.send(OutboundMessage(topic: topics.bridgeEvent, json: ["type": "command_rejected", "topic": .string(m.topic),
                                                                      "error": .string(error.description)], qos: 0, retain: false))
    }

    func ignoreRetained(_ m: InboundMessage) {
        logger.info("ignoring a retained command", metadata: ["topic": "\(m.topic)"])
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
