import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Synchronization

// `<base>/bridge/request/<action>` → `<base>/bridge/response/<action>` (docs/bridge-api.md):
// scan, device/add, device/remove, device/rename, device/options, pair, unpair, health_check,
// restart, config/reload, options, info, devices. Every response echoes `transaction` and goes to
// the MQTT 5 response topic (with the correlation data) when the request names one.

/// The running scan and what it saw.
struct ScanState: Sendable {
    var scan: BLEScan?
    /// Bumped by every start and stop, so an old timer cannot stop a newer scan.
    var generation = 0
    var until: ContinuousClock.Instant?
    /// The devices seen by the last scans, by address (kept for `device/add` without a profile):
    /// the ``capacity`` last heard (addresses can be random: a flood of them must not grow this).
    var seen = RecentMap<String, Advertisement>(capacity: ScanState.capacity)
    /// What was last published per address, and when (a sighting is published when it says
    /// something new, or once a second), for as many addresses.
    var published = RecentMap<String, (at: ContinuousClock.Instant, payload: JSONValue)>(capacity: ScanState.capacity)
    /// How many addresses a scan remembers.
    static let capacity = 1000
}

/// A request's answer: `{"status":"ok","data":…}` or `{"status":"error","error":"…"}`, with the
/// request's `transaction`.
struct Reply: Sendable {
    let bridge: Bridge
    let action: String
    let message: InboundMessage
    var transaction: JSONValue?

    func ok(_ data: JSONValue = .object([:])) {
        var o: JSONObject = ["status": "ok", "data": data]
        if let transaction { o["transaction"] = transaction }
        send(o)
    }

    /// - Parameter code: why, for a client to tell: `invalid_value` for a value out of range or of
    ///   the wrong kind; `retained_request`, `payload_too_large` or `forbidden` for a request refused
    ///   before what it asks was looked at (`ErrorCode`, shared with the command errors).
    func error(_ text: String, code: ErrorCode? = nil) {
        var o: JSONObject = ["status": "error", "error": .string(text)]
        if let code { o["code"] = .string(code.rawValue) }
        if let transaction { o["transaction"] = transaction }
        send(o)
        bridge.logger.warning("bridge request refused", metadata: ["request": "\(action)", "error": "\(text)"])
    }

    func send(_ body: JSONObject) {
        let topic = message.responseTopic ?? bridge.topics.bridgeResponse(action)
        bridge.mqtt.send(OutboundMessage(topic: topic, json: .object(body), qos: 1, retain: false, correlationData: message.correlationData))
        bridge.handledRequest(message)
    }
}

/// A request that cannot be carried out, with what is wrong (and `invalid_value` when a value is).
struct RequestError: Error {
    let message: String
    let code: ErrorCode?
    init(_ message: String) { self.message = message; code = nil }
    init(_ code: ErrorCode, _ message: String) { self.message = message; self.code = code }

    /// A number of seconds in a request (`key`: a JSON number) within `range`: an
    /// `invalid_value` error that names the key and the limit otherwise (NaN, infinite,
    /// negative, too large), never a trap.
    static func seconds(_ value: JSONValue, key: String, in range: ClosedRange<Duration>) throws(RequestError) -> Duration {
        guard let s = value.doubleValue else {
            throw RequestError(.invalidValue, "\(key): expected a number of seconds from \(secondsText(range.lowerBound)) to \(secondsText(range.upperBound))")
        }
        do { return try checkedDuration(seconds: s, in: range) } catch {
            throw RequestError(.invalidValue, "\(key): \(s.isFinite ? value.jsonText : "\(s)") \(error.message)")
        }
    }
}

extension Bridge {
    /// How long `device/add` may wait for its device (`timeout`, seconds; default 30).
    public static let addTimeouts: ClosedRange<Duration> = .milliseconds(1) ... .seconds(300)

    /// Every action, as the error for an unknown one lists them.
    static let actions = ["scan", "device/add", "device/remove", "device/rename", "device/options", "pair", "unpair",
                          "health_check", "restart", "config/reload", "options", "info", "devices"]

    /// Work that needs time (a scan, a registry change) runs in `run()`'s task group.
    enum Spawn: Sendable {
        case session(DeviceSession)
        case job(@Sendable () async -> Void)
    }

    func handleBridgeRequest(_ action: String, _ m: InboundMessage) {
        var reply = Reply(bridge: self, action: action, message: m)
        var body = JSONObject()
        let text = String(decoding: m.payload, as: UTF8.self)
        if !text.allSatisfy(\.isWhitespace) {
            do {
                guard let o = try JSONValue(parsing: text).objectValue else {
                    return reply.error("expected a JSON object, e.g. {\"transaction\":\"t1\"}")
                }
                body = o
            } catch {
                return reply.error("invalid JSON: \(error)")
            }
        }
        reply.transaction = body["transaction"]
        body["transaction"] = nil
        if let refusal = forbidden(action) { return reply.error(refusal, code: .forbidden) }
        dispatch(action, body, reply)
    }

    func dispatch(_ action: String, _ body: JSONObject, _ reply: Reply) {
        switch action {
        case "info":
            publishInfo()
            reply.ok(.object(info))
        case "devices":
            publishDevices()
            reply.ok(devicesJSON)
        case "health_check":
            spawnSink.yield(.job { reply.ok(.object(await self.healthCheck())) })
        case "options":
            setOptions(body, reply)
        case "restart":
            guard let restart = control.restart else { return reply.error("this bridge cannot restart itself (no process supervisor hook)") }
            reply.ok(["restarting": true])
            restart()
        case "scan":
            spawnSink.yield(.job { await self.scan(body, reply) })
        case "config/reload", "device/add", "device/remove", "device/rename", "device/options", "pair", "unpair":
            changeSink.yield {
                do throws(RequestError) {
                    reply.ok(try await self.change(action, body))
                } catch {
                    reply.error(error.message, code: error.code)
                }
            }
        default:
            reply.error("unknown request '\(action)' (expected one of \(Self.actions.joined(separator: ", ")))")
        }
    }

    /// Registry changes, run one at a time.
    func change(_ action: String, _ body: JSONObject) async throws(RequestError) -> JSONValue {
        switch action {
        case "config/reload": return try await reload()
        case "device/add": return try await addDevice(body)
        case "device/remove": return try await removeDevice(body)
        case "device/rename": return try await renameDevice(body)
        case "device/options": return try await deviceOptions(body)
        case "pair": return try await pair(body, on: true)
        default: return try await pair(body, on: false)
        }
    }

    // MARK: health_check, options

    func healthCheck() async -> JSONObject {
        var o: JSONObject = ["healthy": true]
        o.merge(await health())
        return o
    }

    func setOptions(_ body: JSONObject, _ reply: Reply) {
        // `{"options":{…}}` (zigbee2mqtt's shape) or the options themselves.
        let options = body["options"]?.objectValue ?? body
        guard !options.keys.isEmpty else { return reply.error("no option given (expected log_level)") }
        for key in options.keys where key != "log_level" {
            return reply.error("unknown option '\(key)' (expected log_level)")
        }
        guard let name = options["log_level"]?.stringValue, let level = LogLevel(rawValue: name) else {
            return reply.error("log_level: expected one of \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard let set = control.setLogLevel else { return reply.error("this bridge cannot change its log level at runtime") }
        set(level)
        logLevel.withLock { $0 = level }
        publishInfo()
        reply.ok(["log_level": .string(level.rawValue)])
    }

    // MARK: scan

    func scan(_ body: JSONObject, _ reply: Reply) async {
        let seconds: Double, span: Duration
        switch body["seconds"] {
        case nil: (seconds, span) = (30, .seconds(30))
        case let v?:
            // 0 (stop) to 600 s.
            do throws(RequestError) { span = try RequestError.seconds(v, key: "seconds", in: .zero ... .seconds(600)) } catch {
                return reply.error(error.message, code: error.code)
            }
            seconds = v.doubleValue ?? 0
        }
        if span == .zero {
            await stopScan()
            return reply.ok(["scanning": false])
        }
        guard let adapter = central.adapterControl else { return reply.error("this Bluetooth central cannot scan") }
        let until = clock.now() + span
        let (running, generation) = scanning.withLock { s -> (Bool, Int) in
            s.generation += 1
            s.until = until
            return (s.scan != nil, s.generation)
        }
        if !running {
            let scan: BLEScan
            do { scan = try await adapter.scan() } catch {
                scanning.withLock { $0.until = nil }
                return reply.error("scan: \(error)")
            }
            scanning.withLock { $0.scan = scan }
            spawnSink.yield(.job { await self.publishSightings(scan) })
            event("scan_started", ["seconds": .double(seconds)])
        }
        publishInfo()
        reply.ok(["scanning": true, "seconds": .double(seconds)])
        try? await sleep(span)
        if scanning.withLock({ $0.generation == generation }) { await stopScan() }
    }

    func stopScan() async {
        let (scan, seen) = scanning.withLock { s -> (BLEScan?, Int) in
            defer { s.scan = nil; s.until = nil; s.generation += 1 }
            return (s.scan, s.seen.count)
        }
        guard let scan else { return }
        await scan.stop()
        event("scan_stopped", ["seen": .int(Int64(seen))])
        publishInfo()
    }

    func publishSightings(_ scan: BLEScan) async {
        for await ad in scan.advertisements {
            let payload = sighting(ad)
            let now = clock.now()
            let publish = scanning.withLock { s -> Bool in
                s.seen[ad.address] = ad
                if let last = s.published[ad.address], last.payload == payload, now - last.at < .seconds(1) { return false }
                s.published[ad.address] = (now, payload)
                return true
            }
            if publish { mqtt.send(OutboundMessage(topic: topics.bridgeScan, json: payload, qos: 0, retain: false)) }
            // A configured device's signal strength (its RSSI diagnostic entity).
            if let rssi = ad.rssi, let session = registry.withLock({ r in r.values.first { $0.config.address == ad.address }?.session }) {
                session.observed(rssi: rssi)
            }
        }
    }

    /// One sighting as published on `<base>/bridge/scan`.
    func sighting(_ ad: Advertisement) -> JSONValue {
        var o = JSONObject()
        o["address"] = .string(ad.address)
        o["name"] = ad.name.map { .string($0) } ?? .null
        o["rssi"] = ad.rssi.map { .int(Int64($0)) } ?? .null
        o["service_uuids"] = .array(ad.serviceUUIDs.map { .string(ProfileGuess.shortUUID($0)) })
        o["manufacturer_data"] = .object(JSONObject(ad.manufacturerData.keys.sorted().map {
            (key: String(format: "0x%04X", $0), value: JSONValue.string(Hex.encode(ad.manufacturerData[$0]!)))
        }))
        o["service_data"] = .object(JSONObject(ad.serviceData.keys.sorted().map {
            (key: ProfileGuess.shortUUID($0), value: JSONValue.string(Hex.encode(ad.serviceData[$0]!)))
        }))
        let configured = registry.withLock { r in r.values.first { $0.config.address == ad.address }?.config.id }
        o["configured"] = .bool(configured != nil)
        if let configured { o["device"] = .string(configured) }
        o["profile_guess"] = profiles.guess(ad).map { .string($0.name) } ?? .null
        o["connected"] = .bool(ad.connected)
        o["paired"] = .bool(ad.paired)
        return .object(o)
    }

    func event(_ type: String, _ extra: JSONObject = [:]) {
        var o: JSONObject = ["type": .string(type)]
        o.merge(extra)
        mqtt.send(OutboundMessage(topic: topics.bridgeEvent, json: .object(o), qos: 0, retain: false))
    }

    // MARK: device/add

    func addDevice(_ body: JSONObject) async throws(RequestError) -> JSONValue {
        for key in body.keys where !["id", "name", "address", "name_pattern", "profile", "options", "characteristics", "timeout"].contains(key) {
            throw RequestError("unknown key '\(key)' (expected id, address or name_pattern, profile, name, options, characteristics, timeout)")
        }
        guard let id = body["id"]?.stringValue, !id.isEmpty else { throw RequestError("id: required (the device's topic name)") }
        try checkNewID(id)
        var json: JSONObject = ["id": .string(id)]
        for key in ["name", "address", "name_pattern", "characteristics"] { if let v = body[key] { json[key] = v } }
        if let a = body["address"]?.stringValue { json["address"] = .string(a.uppercased()) }
        guard json["address"] != nil || json["name_pattern"] != nil else { throw RequestError("address or name_pattern: required") }
        // The profile: given (a profile or a template), else the last scan's guess.
        let seen = scanning.withLock { $0.seen }
        let sighting = json["address"]?.stringValue.flatMap { seen[$0] }
            ?? json["name_pattern"]?.stringValue.flatMap { p in seen.values.sorted { $0.address < $1.address }.first { ad in
                ad.name.map { $0.range(of: p, options: .regularExpression) != nil } ?? false } }
        let guess: ProfileGuess
        if let name = body["profile"]?.stringValue {
            guard let g = profiles.named(name, withBattery: sighting.map { profiles.guess($0)?.characteristics.contains { $0.objectValue?["uuid"] == "2A19" } ?? false } ?? false) else {
                throw RequestError("profile: '\(name)' is not one of \(profiles.names.joined(separator: ", "))")
            }
            guess = g
        } else if let s = sighting, let g = profiles.guess(s) {
            guess = g
        } else if sighting != nil {
            throw RequestError("profile: the scan could not guess what \(json["address"]?.stringValue ?? "the device") is; give a profile (\(profiles.names.joined(separator: ", ")))")
        } else {
            throw RequestError("profile: required, or scan first (bridge/request/scan) so the bridge can guess it")
        }
        json["profile"] = .string(guess.profile.rawValue)
        if json["characteristics"] == nil, !guess.characteristics.isEmpty { json["characteristics"] = .array(guess.characteristics) }
        if json["name"] == nil, let n = sighting?.name { json["name"] = .string(n) }
        var device: DeviceConfig
        do {
            device = try DeviceConfig(json: .object(json), adapters: configuration.bluetooth.adapters, profiles: profiles.rules)
            if let options = body["options"] {
                guard let o = options.objectValue else { throw ConfigError(path: "options", line: nil, message: "expected an object") }
                device = try device.applying(options: o)
            }
        } catch {
            throw RequestError(.invalidValue, "\(error)")
        }
        if let clash = Self.clash(device, with: deviceConfigs) { throw RequestError(clash) }
        let timeout: Duration
        switch body["timeout"] {
        case nil: timeout = .seconds(30)
        case let v?: timeout = try RequestError.seconds(v, key: "timeout", in: Self.addTimeouts)
        }
        let session: DeviceSession
        do { session = try makeSession(device, state: nil) } catch { throw RequestError("\(error)") }
        registry.withLock { $0[device.id] = Registered(config: device, source: .mqtt, session: session) }
        registerInStore(device)
        spawnSink.yield(.session(session))
        switch await session.waitForLink(timeout: timeout) {
        case .up:
            break
        case let outcome:
            registry.withLock { $0[device.id] = nil }
            await session.stop(failingQueuedWith: CommandError(.unknownDevice, "\(device.id) was not added"))
            try? store.removeRuntimeDevice(id: device.id)
            clearRetained(device)
            let reason: String
            if case let .timedOut(error?) = outcome { reason = ": \(error)" } else { reason = "" }
            throw RequestError("\(device.address ?? "no device named like '\(device.namePattern ?? "")'") was not connected within \(secondsText(timeout))\(reason); nothing was added")
        }
        do { try store.saveRuntimeDevice(id: device.id, config: device.json.jsonText) } catch { throw RequestError("the store: \(error)") }
        publishDiscovery(of: device)
        publishDevices()
        publishInfo()
        event("device_added", ["device": .string(device.id), "profile": .string(guess.name)])
        return ["device": device.json, "source": "mqtt", "profile": .string(guess.name)]
    }

    /// A new id must be usable as a topic level and be free.
    func checkNewID(_ id: String) throws(RequestError) {
        guard id.allSatisfy({ ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") && $0.isASCII }) else {
            throw RequestError("id: '\(id)' may only contain letters, digits, '_' and '-'")
        }
        guard id != "bridge" else { throw RequestError("id: 'bridge' is reserved for the bridge's own topics") }
        if let existing = registry.withLock({ $0[id] }) {
            throw RequestError("id: a device '\(id)' exists already (\(existing.source == .file ? "in the configuration file" : "added over MQTT"))")
        }
    }

    // MARK: device/remove, device/rename, device/options

    /// The runtime device `id`, or an error naming why not (unknown, or the file's).
    func runtimeDevice(_ body: JSONObject, key: String = "id") throws(RequestError) -> Registered {
        guard let id = body[key]?.stringValue else { throw RequestError("\(key): required (a device id)") }
        guard let r = registry.withLock({ $0[id] }) else { throw RequestError("\(key): no device '\(id)'") }
        guard r.source == .mqtt else {
            throw RequestError("'\(id)' is defined in the configuration file\(control.configurationFile.map { " (\($0))" } ?? ""): "
                + "edit it there, then send config/reload (or SIGHUP)")
        }
        return r
    }

    func removeDevice(_ body: JSONObject) async throws(RequestError) -> JSONValue {
        for key in body.keys where !["id", "forget"].contains(key) { throw RequestError("unknown key '\(key)' (expected id, forget)") }
        let r = try runtimeDevice(body)
        let forget: Bool
        switch body["forget"] {
        case nil: forget = false
        case .bool(let b)?: forget = b
        default: throw RequestError("forget: expected true or false")
        }
        await retire(r, failingQueuedWith: CommandError(.unknownDevice, "\(r.config.id) was removed"))
        try? store.removeRuntimeDevice(id: r.config.id)
        var forgotten = false
        if forget, let address = r.config.address {
            guard let adapter = central.adapterControl else { throw RequestError("removed, but this Bluetooth central cannot forget devices") }
            do { try await adapter.forget(address: address) } catch {
                throw RequestError("removed, but BlueZ could not forget \(address): \(error)")
            }
            forgotten = true
        }
        publishDevices()
        publishInfo()
        event("device_removed", ["device": .string(r.config.id), "forgotten": .bool(forgotten)])
        return ["id": .string(r.config.id), "forgotten": .bool(forgotten)]
    }

    func renameDevice(_ body: JSONObject) async throws(RequestError) -> JSONValue {
        for key in body.keys where !["from", "to"].contains(key) { throw RequestError("unknown key '\(key)' (expected from, to)") }
        let r = try runtimeDevice(body, key: "from")
        guard let to = body["to"]?.stringValue else { throw RequestError("to: required (the new id)") }
        try checkNewID(to)
        var json = r.config.json.objectValue ?? [:]
        json["id"] = .string(to)
        let renamed: DeviceConfig
        do { renamed = try DeviceConfig(json: .object(json)) } catch { throw RequestError("\(error)") }
        await retire(r, failingQueuedWith: nil)  // its queued commands move with it
        do { try store.renameDevice(from: r.config.id, to: to, config: renamed.json.jsonText) } catch { throw RequestError("the store: \(error)") }
        try await start(renamed, source: .mqtt)
        event("device_renamed", ["from": .string(r.config.id), "to": .string(to)])
        return ["from": .string(r.config.id), "to": .string(to)]
    }

    func deviceOptions(_ body: JSONObject) async throws(RequestError) -> JSONValue {
        for key in body.keys where !["id", "options"].contains(key) { throw RequestError("unknown key '\(key)' (expected id, options)") }
        let r = try runtimeDevice(body)
        guard let options = body["options"]?.objectValue else {
            throw RequestError("options: required, an object of \(DeviceConfig.optionKeys.joined(separator: ", "))")
        }
        let changed: DeviceConfig
        do { changed = try r.config.applying(options: options) } catch { throw RequestError(.invalidValue, "\(error)") }
        if changed != r.config {
            try? store.saveRuntimeDevice(id: changed.id, config: changed.json.jsonText)
            try await replace(r, with: changed)
        }
        return ["device": changed.json]
    }

    /// Replaces a device's session with one for its new configuration: the link is closed and
    /// opened again; queued commands carry over.
    func replace(_ r: Registered, with device: DeviceConfig) async throws(RequestError) {
        registry.withLock { $0[r.config.id] = nil }
        await r.session.stop(failingQueuedWith: nil)
        if let discovery {
            let stale = Set(discovery.messages(for: [r.config]).map(\.topic)).subtracting(discovery.messages(for: [device]).map(\.topic))
            for t in stale.sorted() { mqtt.send(OutboundMessage(topic: t, payload: [], qos: 1, retain: true)) }
        }
        try await start(device, source: r.source)
    }

    /// Starts a session for `device` (already in the store), hands it its queued commands and
    /// publishes its discovery and the bridge's lists.
    func start(_ device: DeviceConfig, source: DeviceSource) async throws(RequestError) {
        let session: DeviceSession
        do { session = try makeSession(device, state: ((try? store.states()) ?? [:])[device.id]) } catch { throw RequestError("\(error)") }
        registry.withLock { $0[device.id] = Registered(config: device, source: source, session: session) }
        registerInStore(device)
        spawnSink.yield(.session(session))
        resumeOutbox(for: device.id)
        await session.republish()
        publishDiscovery(of: device)
        publishDevices()
        publishInfo()
    }

    // MARK: pair / unpair

    func pair(_ body: JSONObject, on: Bool) async throws(RequestError) -> JSONValue {
        for key in body.keys where key != "id" { throw RequestError("unknown key '\(key)' (expected id)") }
        guard let id = body["id"]?.stringValue else { throw RequestError("id: required (a device id)") }
        guard let r = registry.withLock({ $0[id] }) else { throw RequestError("id: no device '\(id)'") }
        guard let address = r.config.address else { throw RequestError("'\(id)' has no address (name_pattern only): it cannot be paired by request") }
        guard let adapter = central.adapterControl else { throw RequestError("this Bluetooth central cannot pair") }
        do {
            if on {
                let started = ContinuousClock.now
                try await adapter.pair(address: address, timeout: .seconds(30))
                output.metrics.device(id).pairDuration.record(ContinuousClock.now - started)
            } else {
                try await adapter.forget(address: address)
            }
        } catch {
            throw RequestError("\(on ? "pairing" : "unpairing") \(address) failed: \(error)")
        }
        try? store.markPaired(id, on)
        publishDevices()
        event(on ? "device_paired" : "device_unpaired", ["device": .string(id)])
        return ["id": .string(id), "paired": .bool(on)]
    }

    // MARK: config/reload

    /// `config/reload` without a request (SIGHUP): the outcome goes to the log and `bridge/event`.
    public func reloadConfiguration() {
        changeSink.yield {
            do throws(RequestError) {
                let result = try await self.reload()
                self.logger.info("configuration reloaded", metadata: ["result": "\(result.jsonText)"])
            } catch {
                self.logger.error("configuration not reloaded", metadata: ["error": "\(error.message)"])
                self.event("config_reload_failed", ["error": .string(error.message)])
            }
        }
    }

    /// Applies the configuration file again: its devices added, removed or changed (other devices'
    /// links untouched), its log level; settings that need a restart are reported.
    func reload() async throws(RequestError) -> JSONValue {
        guard let load = control.reloadConfiguration else { throw RequestError("this bridge has no configuration file to reload") }
        let new: Configuration
        do { new = try load() } catch {
            throw RequestError("\(control.configurationFile ?? "the configuration"): \(error); nothing changed")
        }
        let old = configuration
        var added: [String] = [], removed: [String] = [], changed: [String] = [], yielded: [String] = [], unchanged = 0
        let current = registry.withLock { $0 }
        let newIDs = Set(new.devices.map(\.id))
        // The file's devices that left it.
        for (id, r) in current where r.source == .file && !newIDs.contains(id) {
            await retire(r, failingQueuedWith: CommandError(.unknownDevice, "\(id) was removed from the configuration file"))
            try? store.removeDevice(id)
            removed.append(id)
        }
        // Runtime devices the file now defines (same id or address): the file wins.
        for (id, r) in current where r.source == .mqtt {
            if Self.clash(r.config, with: new.devices) != nil {
                // Its retained topics stay when the file's device takes the same id.
                await retire(r, failingQueuedWith: CommandError(.unknownDevice, "\(id) is now defined by the configuration file"),
                             clearingRetained: !newIDs.contains(id))
                try? store.removeRuntimeDevice(id: id)
                yielded.append(id)
            }
        }
        file.withLock { $0 = new }
        for device in new.devices {
            if let r = current[device.id], r.source == .file {
                if r.config == device { unchanged += 1; continue }
                try await replace(r, with: device)
                changed.append(device.id)
            } else {
                try await start(device, source: .file)
                added.append(device.id)
            }
        }
        if new.logLevel != old.logLevel {
            control.setLogLevel?(new.logLevel)
            logLevel.withLock { $0 = new.logLevel }
        }
        var restart: [String] = []
        if new.mqtt != old.mqtt { restart.append("mqtt") }
        if new.bluetooth != old.bluetooth { restart.append("bluetooth") }
        if new.database != old.database { restart.append("database") }
        if new.homeAssistant != old.homeAssistant { restart.append("homeassistant") }
        if new.nodeID != old.nodeID { restart.append("node_id") }
        if new.cluster != old.cluster { restart.append("cluster") }
        if new.limits != old.limits { restart.append("limits") }
        restartRequired.withLock { $0 = restart }
        recordDiscoveryTopics()
        publishDevices()
        publishInfo()
        event("config_reloaded", ["added": .array(added.map { .string($0) }), "removed": .array(removed.map { .string($0) }),
                                  "changed": .array(changed.map { .string($0) })])
        return ["added": .array(added.map { .string($0) }), "removed": .array(removed.sorted().map { .string($0) }),
                "changed": .array(changed.map { .string($0) }), "yielded": .array(yielded.sorted().map { .string($0) }),
                "unchanged": .int(Int64(unchanged)), "restart_required": .array(restart.map { .string($0) }),
                "log_level": .string(logLevel.withLock { $0 }.rawValue)]
    }

    // MARK: Retained topics and discovery of one device

    /// Takes a device out of the bridge: out of the registry (so no new command reaches it), its
    /// session stopped (queued commands ended with `error`, or left in the outbox when nil), its
    /// discovery withdrawn and, unless told otherwise, its retained topics emptied.
    func retire(_ r: Registered, failingQueuedWith error: CommandError?, clearingRetained: Bool = true) async {
        registry.withLock { $0[r.config.id] = nil }
        await r.session.stop(failingQueuedWith: error)
        withdrawDiscovery(of: r.config)
        if clearingRetained { clearRetained(r.config) }
    }

    func publishDiscovery(of device: DeviceConfig) {
        guard discovery != nil else { return }
        for m in discoveryMessages(for: device) { mqtt.send(m) }
        recordDiscoveryTopics()
    }

    func withdrawDiscovery(of device: DeviceConfig) {
        guard let discovery else { return }
        for m in discovery.messages(for: [device]) where !m.topic.contains("/\(HomeAssistantDiscovery.bridgeIdentifier)/") {
            mqtt.send(OutboundMessage(topic: m.topic, payload: [], qos: 1, retain: true))
        }
        recordDiscoveryTopics()
    }

    func recordDiscoveryTopics() {
        guard let discovery else { return }
        try? store.replaceDiscoveryTopics(Set(discovery.messages(for: deviceConfigs).map(\.topic)))
    }

    /// Empties the device's retained topics (state, availability, its mappings' topics), so a
    /// removed or renamed device leaves nothing behind on the broker.
    func clearRetained(_ device: DeviceConfig) {
        var retained = [topics.state(device.id), topics.availability(device.id)]
        retained += device.characteristics.map { topics.characteristic(device.id, $0.topic) }
        for t in retained { mqtt.send(OutboundMessage(topic: t, payload: [], qos: 1, retain: true)) }
    }
}

extension Date {
    /// ISO 8601 in UTC with seconds, e.g. `2026-11-25T04:00:00Z`.
    var iso8601: String {
        let c = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: self)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
    }
}
