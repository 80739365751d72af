import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging
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
    var until: BridgeInstant?
    /// The devices seen by the last scans, by address (kept for `device/add` without a profile):
    /// the ``capacity`` last heard (addresses can be random: a flood of them must not grow this).
    var seen = RecentMap<String, Advertisement>(capacity: ScanState.capacity)
    /// What was last published per address, and when (a sighting is published when it says
    /// something new, or once a second), for as many addresses.
    var published = RecentMap<String, (at: BridgeInstant, payload: JSONValue)>(capacity: ScanState.capacity)
    /// How many addresses a scan remembers.
    static let capacity = 1000
}

/// Settings changed that only a restart applies (`bridge/info`'s `restart_required`).
struct RestartRequired: Sendable {
    /// The sections the last `config/reload` saw changed (`mqtt`, `limits`…).
    var reload: [String] = []
    /// The options set since start that apply at the next (`limits.max_queued`…).
    var options: [String] = []
    var all: [String] { reload + options }
}

/// A request's answer: `{"status":"ok","data":…}` or `{"status":"error","data":{},"error":"…"}`
/// (zigbee2mqtt's shape: an error has an empty `data` too), with the request's `transaction`.
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
        var body = body
        if body["data"] == nil { body["data"] = .object([:]) }  // zigbee2mqtt's errors carry `"data":{}`
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

/// The bridge API (`<base>/bridge/request/<action>`, docs/bridge-api.md): the requests, their
/// answers, the scan, and the registry changes they make (run one at a time, in arrival order).
/// Always installed; `mqtt.api` says what it may do (`off`: it is not subscribed, and a request
/// that comes another way, from the web frontend, is refused).
final class BridgeAPIExtension: BridgeExtension {
    typealias Registered = Bridge.Registered
    unowned let bridge: Bridge
    /// The running scan and what it saw (for `device/add` without a profile).
    let scanning = Mutex(ScanState())
    /// Settings changed that only a restart applies: by `config/reload` (sections) and by
    /// `options` (keys).
    let restartRequired = Mutex(RestartRequired())
    /// Requests that change the registry, handled one at a time in arrival order.
    let changes: AsyncStream<@Sendable () async -> Void>
    let changeSink: AsyncStream<@Sendable () async -> Void>.Continuation

    init(bridge: Bridge) {
        self.bridge = bridge
        (changes, changeSink) = AsyncStream.makeStream(of: (@Sendable () async -> Void).self)
    }

    // The core's parts the requests use.
    var store: BridgeStore { bridge.store }
    var mqtt: any MQTTPort { bridge.mqtt }
    var topics: Topics { bridge.topics }
    var central: any BLECentral { bridge.central }
    var clock: BridgeClock { bridge.clock }
    var profiles: ProfileCatalog { bridge.profiles }
    var control: BridgeControl { bridge.control }
    var configuration: Configuration { bridge.configuration }
    var logger: Logger { bridge.logger }
    var output: SessionOutput { bridge.output }
    var deviceConfigs: [DeviceConfig] { bridge.deviceConfigs }
    var spawnSink: AsyncStream<Bridge.Spawn>.Continuation { bridge.spawnSink }
    var sleep: Sleep { bridge.sleep }

    // MARK: Hooks

    var subscriptions: [String] { bridge.api == .off ? [] : [topics.requestFilter] }

    func handle(_ message: InboundMessage) -> Bool {
        guard case let .bridgeRequest(action)? = topics.route(message.topic) else { return false }
        if !bridge.alreadyHandled(message, .bridgeRequest(operation: action)) { handleBridgeRequest(action, message) }
        return true
    }

    func start(in group: inout DiscardingTaskGroup) {
        group.addTask {
            // Registry changes, one at a time (device/add waits for its link meanwhile).
            for await change in self.changes { await change() }
        }
    }

    func stop() async { await stopScan() }

    func info(into o: inout JSONObject) {
        o["scanning"] = .bool(scanning.withLock { $0.scan != nil })
        o["restart_required"] = .array(restartRequired.withLock { $0.all }.map { .string($0) })
        o["config_schema"] = ConfigSchema.json(profiles: profiles.profiles.map(\.id))  // docs/config-schema.json
    }

    /// Every action, as the error for an unknown one lists them.
    static let actions = ["scan", "permit_join", "device/add", "device/remove", "device/rename", "device/options", "pair", "unpair",
                          "health_check", "restart", "config/reload", "options", "info", "devices", "backup"]

    // MARK: zigbee2mqtt's payloads that are not objects (docs/bridge-api.md "Payloads that are not objects")

    /// The actions that name one device by `id`: a JSON string (`"camera"`) or a bare word is that id.
    static let deviceActions: Set<String> = ["device/remove", "pair", "unpair"]
    /// The actions that take no parameter: any string (zigbee2mqtt sends `""`) or null is `{}`.
    static let plainActions: Set<String> = ["info", "devices", "health_check", "restart", "config/reload", "backup"]
    /// What a device id may hold (docs/configuration.md): letters, digits, `_` and `-`.
    static let idCharacters = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
    static let shorthandHint = " (or, as zigbee2mqtt takes them: a device id as a string for device/remove, pair and unpair; "
        + "true, false or a number of seconds for scan and permit_join; \"\" for the actions without parameters)"

    /// The request a payload that is not an object stands for, or nil when it stands for none.
    static func shorthand(_ action: String, _ value: JSONValue) -> JSONObject? {
        if deviceActions.contains(action), let id = value.stringValue { return ["id": .string(id)] }
        if plainActions.contains(action), value.stringValue != nil || value.isNull { return [:] }
        guard action == "scan" || action == "permit_join" else { return nil }
        if let on = value.boolValue { return on ? [:] : ["seconds": 0] }
        if value.doubleValue != nil { return ["seconds": value] }
        return nil
    }

    /// zigbee2mqtt's `permit_join` (`{"time": 254}`, `{"value": false}`) as a `scan`: `time` is
    /// the seconds, `value: false` or `time: 0` stops it.
    static func permitJoin(_ body: JSONObject) -> JSONObject {
        var o = body
        if let time = o["time"] {
            o["time"] = nil
            if o["seconds"] == nil { o["seconds"] = time }
        }
        if let value = o["value"] {
            o["value"] = nil
            if value.boolValue == false { o["seconds"] = 0 }
        }
        o["device"] = nil  // zigbee2mqtt's "through this router": one adapter scans here
        return o
    }

    func handleBridgeRequest(_ action: String, _ m: InboundMessage) {
        var reply = Reply(bridge: bridge, action: action, message: m)
        var body = JSONObject()
        let text = String(decoding: m.payload, as: UTF8.self)
        if !text.allSatisfy(\.isWhitespace) {
            let value: JSONValue
            do { value = try JSONValue(parsing: text) } catch {
                // zigbee2mqtt also takes a device's name unquoted (`camera`) where a request names one device.
                let word = text.trimmingCharacters(in: .whitespacesAndNewlines)
                guard Self.deviceActions.contains(action), !word.isEmpty, word.unicodeScalars.allSatisfy(Self.idCharacters.contains) else {
                    return reply.error("invalid JSON: \(error)")
                }
                value = .string(word)
            }
            if let o = value.objectValue {
                body = o
            } else if let o = Self.shorthand(action, value) {
                body = o
            } else {
                return reply.error("expected a JSON object, e.g. {\"transaction\":\"t1\"}" + Self.shorthandHint)
            }
        }
        if action == "permit_join" { body = Self.permitJoin(body) }
        reply.transaction = body["transaction"]
        body["transaction"] = nil
        if let refusal = bridge.forbidden(action) { return reply.error(refusal, code: .forbidden) }
        dispatch(action, body, reply)
    }

    func dispatch(_ action: String, _ body: JSONObject, _ reply: Reply) {
        switch action {
        case "info":
            bridge.publishInfo()
            reply.ok(.object(bridge.info))
        case "devices":
            bridge.publishDevices()
            reply.ok(bridge.devicesJSON)
        case "health_check":
            spawnSink.yield(.job { reply.ok(.object(await self.healthCheck())) })
        case "options":
            setOptions(body, reply)
        case "restart":
            guard let restart = control.restart else { return reply.error("this bridge cannot restart itself (no process supervisor hook)") }
            reply.ok(["restarting": true])
            restart()
        case "scan", "permit_join":
            spawnSink.yield(.job { await self.scan(body, reply) })
        case "backup":
            spawnSink.yield(.job { self.backup(reply) })
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
        await bridge.extensions.health?.check() ?? ["healthy": true]
    }

    func setOptions(_ body: JSONObject, _ reply: Reply) {
        // `{"options":{…}}` (zigbee2mqtt's shape) or the options themselves; nested sections or dotted keys.
        var values = RuntimeOptions.flatten(body["options"]?.objectValue ?? body)
        for i in values.indices where values[i].key == "advanced.log_level" { values[i].key = "log_level" }  // zigbee2mqtt's key
        guard !values.isEmpty else { return reply.error("no option given (expected one of \(RuntimeOptions.keys))") }
        for (key, _) in values where RuntimeOptions.named(key) == nil {
            return reply.error("unknown option '\(key)' (expected one of \(RuntimeOptions.keys))")
        }
        if let v = values.first(where: { $0.key == "log_level" })?.value, v.stringValue.flatMap(LogLevel.init(rawValue:)) == nil {
            return reply.error("log_level: expected one of \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))", code: .invalidValue)
        }
        let parsed: Configuration
        do { parsed = try RuntimeOptions.parse(values) } catch {
            return reply.error("\(error.path): \(error.message)", code: .invalidValue)
        }
        if values.contains(where: { $0.key == "log_level" }) {
            guard let set = control.setLogLevel else { return reply.error("this bridge cannot change its log level at runtime") }
            set(parsed.logLevel)
            bridge.logLevel.withLock { $0 = parsed.logLevel }
            bridge.loadedConfiguration.withLock { $0.logLevel = parsed.logLevel }
        }
        do {
            for (key, value) in values { try store.setOption(key, value: value.jsonText) }
        } catch {
            return reply.error("options: not kept: \(error)")
        }
        let later = values.map(\.key).filter { RuntimeOptions.named($0)?.restartRequired == true }
        restartRequired.withLock { r in r.options = Array(Set(r.options + later)).sorted() }
        bridge.publishInfo()
        var applied = JSONObject()
        for (key, value) in values { applied[key] = value }
        reply.ok(["options": .object(applied), "restart_required": .bool(!later.isEmpty),
                  "log_level": .string(bridge.logLevel.withLock { $0 }.rawValue)])
    }
}
