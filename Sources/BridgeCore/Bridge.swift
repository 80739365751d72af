import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging

/// The bridge: routes MQTT commands to device sessions, publishes the bridge's own topics, and
/// resumes the durable outbox. Transports come in through `MQTTPort` and `BLECentral`.
public final class Bridge: Sendable {
    public typealias DriverFactory = @Sendable (DeviceConfig) throws -> any DeviceDriver

    let configuration: Configuration
    let topics: Topics
    let store: BridgeStore
    let mqtt: any MQTTPort
    let sessions: [String: DeviceSession]
    let logger: Logger
    let version: String
    let discovery: HomeAssistantDiscovery?
    let counters = BridgeCounters()
    let healthInterval: Duration
    let tick: Duration
    let sleep: Sleep
    let started = ContinuousClock.now

    /// Every filter the bridge needs to subscribe to.
    public var subscriptions: [String] {
        topics.subscriptions + (discovery.map { [$0.statusTopic] } ?? [])
    }

    /// The default of `init`'s `connectAttempt`: long enough for a present device to connect and
    /// resolve its services, short enough that an away one holds the others up for at most this.
    public static let defaultConnectAttempt: Duration = .seconds(10)

    /// - Parameter connectAttempt: how long one connect attempt (scan included) may hold the
    ///   adapter's connect gate, so a device that is away cannot keep the others from connecting
    ///   (`shared/spec/bridge.md` points 2–3).
    /// - Parameter tick: how often every session checks its deadlines, timeouts, keep-alives and
    ///   polls (one ticker for all sessions).
    /// - Parameter sleep: how the bridge's tasks wait; the runtime passes its event loop's timers
    ///   so that waiting wakes no other thread.
    public init(configuration: Configuration, store: BridgeStore, mqtt: any MQTTPort, central: any BLECentral,
                drivers: DriverFactory, version: String = "0.1.0", logger: Logger = Logger(label: "gatt2mqtt.bridge"),
                tick: Duration = .milliseconds(50), healthInterval: Duration = .seconds(60),
                connectAttempt: Duration = Bridge.defaultConnectAttempt, sleep: Sleep = .task) throws {
        self.healthInterval = healthInterval
        self.tick = tick
        self.sleep = sleep
        self.configuration = configuration
        self.topics = Topics(base: configuration.mqtt.baseTopic)
        self.store = store
        self.mqtt = mqtt
        self.logger = logger
        self.version = version
        discovery = configuration.homeAssistant.enabled
            ? HomeAssistantDiscovery(prefix: configuration.homeAssistant.discoveryPrefix, topics: topics, version: version) : nil
        let states = (try? store.states()) ?? [:]
        let output = SessionOutput(topics: topics, gate: ConnectGate(),
                                   history: (configuration.database.historyMaxEvents, configuration.database.historyMaxAge),
                                   mqtt: mqtt, store: store, stateQoS: configuration.mqtt.qos,
                                   retainState: configuration.mqtt.retainState, logger: logger, counters: counters,
                                   sleep: sleep)
        var sessions: [String: DeviceSession] = [:]
        for device in configuration.devices {
            let driver = try drivers(device)
            sessions[device.id] = DeviceSession(
                config: device, driver: driver, central: central, output: output, initialState: states[device.id] ?? [:],
                reconnect: (configuration.mqtt.reconnectMin, configuration.mqtt.reconnectMax),
                connectAttempt: connectAttempt)
        }
        self.sessions = sessions
    }

    /// Runs until cancelled: announces the bridge, resumes the outbox, runs every device session;
    /// on cancellation publishes `offline` and closes the links.
    public func run() async {
        let configured = Set(configuration.devices.map(\.id))
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
            for m in discovery.removals(previous: previous, current: configuration.devices) { mqtt.send(m) }
            try? store.replaceDiscoveryTopics(Set(discovery.messages(for: configuration.devices).map(\.topic)))
        }
        for r in gone { try? store.removeDevice(r.id) }
        let known = Dictionary(((try? store.devices()) ?? []).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        for device in configuration.devices {
            // Pairing and last-seen survive restarts; an address change means another device.
            let old = known[device.id].flatMap { $0.address == device.address ? $0 : nil }
            try? store.upsertDevice(DeviceRecord(id: device.id, address: device.address, profile: device.profile.rawValue, name: device.name,
                                                 paired: old?.paired ?? false, lastSeen: old?.lastSeen))
        }
        announce()
        resumeOutbox()
        await withDiscardingTaskGroup { group in
            for session in sessions.values {
                group.addTask { await session.run() }
            }
            group.addTask {
                // One ticker for every session (one timer wake-up per tick, not one per device).
                let all = Array(self.sessions.values)
                while !Task.isCancelled {
                    try? await self.sleep(self.tick)
                    for s in all { s.tickNow() }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await self.sleep(self.healthInterval)
                    if Task.isCancelled { break }
                    await self.publishHealth()
                }
            }
        }
        mqtt.send(OutboundMessage(topic: topics.bridgeState, json: ["state": "offline"], qos: 1, retain: true))
    }

    /// Publishes the bridge's retained topics (at start, and again after the broker came back).
    public func announce() {
        mqtt.send(OutboundMessage(topic: topics.bridgeState, json: ["state": "online"], qos: 1, retain: true))
        var info = JSONObject()
        info["version"] = .string(version)
        info["base_topic"] = .string(topics.base)
        info["adapter"] = .string(configuration.bluetooth.adapter)
        info["devices"] = .int(Int64(configuration.devices.count))
        mqtt.send(OutboundMessage(topic: topics.bridgeInfo, json: .object(info), qos: 1, retain: true))
        let devices: [JSONValue] = configuration.devices.map { d in
            var o = JSONObject()
            o["id"] = .string(d.id)
            if let n = d.name { o["name"] = .string(n) }
            if let a = d.address { o["address"] = .string(a) }
            o["profile"] = .string(d.profile.rawValue)
            return .object(o)
        }
        mqtt.send(OutboundMessage(topic: topics.bridgeDevices, json: .array(devices), qos: 1, retain: true))
        publishDiscovery()
    }

    func publishDiscovery() {
        guard let discovery else { return }
        for m in discovery.messages(for: configuration.devices) { mqtt.send(m) }
    }

    /// `<base>/bridge/health` (QoS 0, not retained): uptime, memory, counters, per-device link
    /// state and queue depth.
    public func publishHealth() async {
        var o = JSONObject()
        o["uptime_s"] = .int((ContinuousClock.now - started).components.seconds)
        if let rss = residentMemoryBytes() { o["rss_bytes"] = .int(Int64(rss)) }
        o.merge(counters.json)
        var devices = JSONObject()
        for id in sessions.keys.sorted() { devices[id] = await sessions[id]!.health() }
        o["devices"] = .object(devices)
        mqtt.send(OutboundMessage(topic: topics.bridgeHealth, json: .object(o), qos: 0, retain: false))
    }

    /// The broker came back (the client reconnected): republish retained state.
    public func brokerReconnected() async {
        announce()
        for s in sessions.values { await s.republish() }
    }

    /// Commands left in the outbox by a previous run: `sent` ones end `error` (interrupted —
    /// at-most-once), queued ones go back to their device (or expire).
    func resumeOutbox() {
        guard let pending = try? store.pendingCommands() else { return }
        for entry in pending {
            let body = (try? JSONValue(parsing: entry.command))?.objectValue
            var cmd = PendingCommand(payload: .command(body ?? [:]), outboxID: entry.id,
                                     transaction: entry.transaction.flatMap { try? JSONValue(parsing: $0) },
                                     responseTopic: entry.responseTopic, correlationData: entry.correlationData.map { Array($0) },
                                     deadline: entry.deadline, attribute: entry.attribute)
            if let w = body?["write"]?.stringValue, let p = body?["payload"]?.stringValue {
                cmd.payload = .write(topic: w, payload: Array(p.utf8))
            }
            guard let session = sessions[entry.deviceID], body != nil else {
                if let id = entry.id { try? store.removeCommand(id) }
                continue
            }
            if entry.status == .sent {
                if let id = entry.id { try? store.removeCommand(id) }
                SessionOutput(topics: topics, gate: ConnectGate(), history: (0, .zero), mqtt: mqtt, store: store, stateQoS: 1,
                              retainState: true, logger: logger, counters: counters, sleep: sleep)
                    .respond(cmd, device: entry.deviceID, .error,
                             error: CommandError(.interrupted, "the bridge stopped after the command was written (not repeated)"))
            } else {
                session.submit(cmd)
            }
        }
    }

    /// Handles one inbound MQTT message (any thread; returns at once).
    public func handle(_ message: InboundMessage) {
        if let discovery, message.topic == discovery.statusTopic {
            if String(decoding: message.payload, as: UTF8.self) == "online" { publishDiscovery() }
            return
        }
        guard let route = topics.route(message.topic) else { return }
        switch route {
        case let .set(device):
            if message.retain { return ignoreRetained(message) }
            guard let session = session(device, message) else { return }
            let commands: [InboundCommand]
            do throws(CommandError) { commands = try parseSetPayload(message.payload) } catch {
                return reject(device: device, message, transaction: nil, error: error)
            }
            for c in commands { session.submit(pending(.command(c.body), c.transaction, message, session)) }
        case let .setAttribute(device, attribute):
            if message.retain { return ignoreRetained(message) }
            guard let session = session(device, message) else { return }
            let body: JSONObject = [attribute: parseShortcutValue(message.payload)]
            session.submit(pending(.command(body), nil, message, session))
        case let .get(device):
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
            session.submit(pending(.command(body), transaction, message, session))
        case let .write(device, characteristic):
            if message.retain { return ignoreRetained(message) }
            guard let session = session(device, message) else { return }
            session.submit(pending(.write(topic: characteristic, payload: message.payload), nil, message, session))
        case let .bridgeRequest(operation):
            handleBridgeRequest(operation, message)
        }
    }

    func pending(_ payload: PendingCommand.Payload, _ transaction: JSONValue?, _ m: InboundMessage, _ s: DeviceSession) -> PendingCommand {
        let deadline = Date().addingTimeInterval(s.config.offlineDeadline.seconds)
        return PendingCommand(payload: payload, transaction: transaction, responseTopic: m.responseTopic,
                              correlationData: m.correlationData, deadline: deadline, received: .now)
    }

    func session(_ device: String, _ m: InboundMessage) -> DeviceSession? {
        if let s = sessions[device] { return s }
        reject(device: nil, m, transaction: nil, error: CommandError(.unknownDevice, "no device '\(device)' is configured"))
        return nil
    }

    func reject(device: String?, _ m: InboundMessage, transaction: JSONValue?, error: CommandError) {
        counters.command(.error, error)
        if let device { counters.metrics.rejected(device: device, error) }
        let body = CommandResponse(transaction: transaction, status: .error, error: error).json
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

    func handleBridgeRequest(_ operation: String, _ m: InboundMessage) {
        let request = (try? JSONValue(parsing: m.payload))?.objectValue ?? [:]
        var response: JSONObject = [:]
        switch operation {
        case "devices", "info":
            announce()
            response["status"] = "ok"
        default:
            response["status"] = "error"
            response["error"] = .string("unknown bridge request '\(operation)'")
        }
        if let t = request["transaction"] { response["transaction"] = t }
        let topic = m.responseTopic ?? topics.bridgeResponse(operation)
        mqtt.send(OutboundMessage(topic: topic, json: .object(response), qos: 1, retain: false, correlationData: m.correlationData))
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
