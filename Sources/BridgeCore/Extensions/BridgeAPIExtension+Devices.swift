import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging
import Synchronization

// `device/add`, `device/remove`, `device/rename`, `device/options`, `pair`, `unpair`: the
// registry changes, run one at a time.

extension BridgeAPIExtension {
    // MARK: device/add

    func addDevice(_ body: JSONObject) async throws(RequestError) -> JSONValue {
        let passiveKeys = ["format", "bindkey", "bindkey_file", "min_interval"]  // a passive device's (docs/configuration.md)
        for key in body.keys where !(["id", "name", "address", "name_pattern", "profile", "options", "characteristics", "timeout"] + passiveKeys).contains(key) {
            throw RequestError("unknown key '\(key)' (expected id, address or name_pattern, profile, name, options, characteristics, timeout, or a passive device's format, bindkey, bindkey_file, min_interval)")
        }
        guard let id = body["id"]?.stringValue, !id.isEmpty else { throw RequestError("id: required (the device's topic name)") }
        try checkNewID(id)
        var json: JSONObject = ["id": .string(id)]
        for key in ["name", "address", "name_pattern", "characteristics"] + passiveKeys { if let v = body[key] { json[key] = v } }
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
        for (key, value) in guess.fields where json[key] == nil { json[key] = value }
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
        if let clash = Bridge.clash(device, with: deviceConfigs) { throw RequestError(clash) }
        let timeout: Duration
        switch body["timeout"] {
        case nil: timeout = .seconds(30)
        case let v?: timeout = try RequestError.seconds(v, key: "timeout", in: Bridge.addTimeouts)
        }
        let session: DeviceSession
        do { session = try bridge.makeSession(device, state: nil) } catch { throw RequestError("\(error)") }
        bridge.registry.withLock { $0[device.id] = Registered(config: device, source: .mqtt, session: session) }
        bridge.registerInStore(device)
        spawnSink.yield(.session(session))
        switch session.isPassive ? .up : await session.waitForLink(timeout: timeout) {  // a passive device has no link
        case .up:
            break
        case let outcome:
            bridge.registry.withLock { $0[device.id] = nil }
            await session.stop(failingQueuedWith: CommandError(.unknownDevice, "\(device.id) was not added"))
            try? store.removeRuntimeDevice(id: device.id)
            clearRetained(device)
            let reason: String
            if case let .timedOut(error?) = outcome { reason = ": \(error)" } else { reason = "" }
            throw RequestError("\(device.address ?? "no device named like '\(device.namePattern ?? "")'") was not connected within \(secondsText(timeout))\(reason); nothing was added")
        }
        do { try store.saveRuntimeDevice(id: device.id, config: device.json.jsonText) } catch { throw RequestError("the store: \(error)") }
        bridge.deviceStarted(device)
        bridge.publishDevices()
        bridge.publishInfo()
        event("device_added", ["device": .string(device.id), "profile": .string(guess.name)])
        return ["device": device.publicJSON, "source": "mqtt", "profile": .string(guess.name)]
    }

    /// A new id must be usable as a topic level and be free.
    func checkNewID(_ id: String) throws(RequestError) {
        guard id.allSatisfy({ ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") && $0.isASCII }) else {
            throw RequestError("id: '\(id)' may only contain letters, digits, '_' and '-'")
        }
        guard id != "bridge" else { throw RequestError("id: 'bridge' is reserved for the bridge's own topics") }
        if let existing = bridge.registry.withLock({ $0[id] }) {
            throw RequestError("id: a device '\(id)' exists already (\(existing.source == .file ? "in the configuration file" : "added over MQTT"))")
        }
    }

    // MARK: device/remove, device/rename, device/options

    /// The runtime device `id`, or an error naming why not (unknown, or the file's).
    func runtimeDevice(_ body: JSONObject, key: String = "id") throws(RequestError) -> Registered {
        guard let id = body[key]?.stringValue else { throw RequestError("\(key): required (a device id)") }
        guard let r = bridge.registry.withLock({ $0[id] }) else { throw RequestError("\(key): no device '\(id)'") }
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
        bridge.publishDevices()
        bridge.publishInfo()
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
        return ["device": changed.publicJSON]
    }

    /// Replaces a device's session with one for its new configuration: the link is closed and
    /// opened again; queued commands carry over.
    func replace(_ r: Registered, with device: DeviceConfig) async throws(RequestError) {
        bridge.registry.withLock { $0[r.config.id] = nil }
        await r.session.stop(failingQueuedWith: nil)
        bridge.deviceReplaced(r.config, with: device)
        try await start(device, source: r.source)
    }

    /// Starts a session for `device` (already in the store), hands it its queued commands and
    /// publishes its discovery and the bridge's lists.
    func start(_ device: DeviceConfig, source: DeviceSource) async throws(RequestError) {
        let session: DeviceSession
        do { session = try bridge.makeSession(device, state: ((try? store.states()) ?? [:])[device.id]) } catch { throw RequestError("\(error)") }
        bridge.registry.withLock { $0[device.id] = Registered(config: device, source: source, session: session) }
        bridge.registerInStore(device)
        spawnSink.yield(.session(session))
        bridge.resumeOutbox(for: device.id)
        await session.republish()
        bridge.deviceStarted(device)
        bridge.publishDevices()
        bridge.publishInfo()
    }

    // MARK: pair / unpair

    func pair(_ body: JSONObject, on: Bool) async throws(RequestError) -> JSONValue {
        for key in body.keys where key != "id" { throw RequestError("unknown key '\(key)' (expected id)") }
        guard let id = body["id"]?.stringValue else { throw RequestError("id: required (a device id)") }
        guard let r = bridge.registry.withLock({ $0[id] }) else { throw RequestError("id: no device '\(id)'") }
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
        bridge.publishDevices()
        event(on ? "device_paired" : "device_unpaired", ["device": .string(id)])
        return ["id": .string(id), "paired": .bool(on)]
    }
}
