import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging
import Synchronization

// `config/reload` (and SIGHUP): the file's devices added, removed or changed; what a removed or
// renamed device leaves behind.

extension BridgeAPIExtension {
    // MARK: config/reload

    /// `config/reload` without a request (SIGHUP): the outcome goes to the log and `bridge/event`.
    func reloadConfiguration() {
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
        do { new = RuntimeOptions.applyingStored(store, to: try load(), logger: logger) } catch {
            throw RequestError("\(control.configurationFile ?? "the configuration"): \(error); nothing changed")
        }
        let old = configuration
        var added: [String] = [], removed: [String] = [], changed: [String] = [], yielded: [String] = [], unchanged = 0
        let current = bridge.registry.withLock { $0 }
        let newIDs = Set(new.devices.map(\.id))
        // The file's devices that left it.
        for (id, r) in current where r.source == .file && !newIDs.contains(id) {
            await retire(r, failingQueuedWith: CommandError(.unknownDevice, "\(id) was removed from the configuration file"))
            try? store.removeDevice(id)
            removed.append(id)
        }
        // Runtime devices the file now defines (same id or address): the file wins.
        for (id, r) in current where r.source == .mqtt {
            if Bridge.clash(r.config, with: new.devices) != nil {
                // Its retained topics stay when the file's device takes the same id.
                await retire(r, failingQueuedWith: CommandError(.unknownDevice, "\(id) is now defined by the configuration file"),
                             clearingRetained: !newIDs.contains(id))
                try? store.removeRuntimeDevice(id: id)
                yielded.append(id)
            }
        }
        bridge.loadedConfiguration.withLock { $0 = new }
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
            bridge.logLevel.withLock { $0 = new.logLevel }
        }
        var restart: [String] = []
        if new.mqtt != old.mqtt { restart.append("mqtt") }
        if new.bluetooth != old.bluetooth { restart.append("bluetooth") }
        if new.database != old.database { restart.append("database") }
        if new.homeAssistant != old.homeAssistant { restart.append("homeassistant") }
        if new.nodeID != old.nodeID { restart.append("node_id") }
        if new.cluster != old.cluster { restart.append("cluster") }
        if new.limits != old.limits { restart.append("limits") }
        // Home Assistant's entities of a format's declared fields are those of the start.
        if new.advertisementFormats != old.advertisementFormats { restart.append("advertisement_formats") }
        restartRequired.withLock { $0.reload = restart }
        bridge.devicesChanged()
        bridge.publishDevices()
        bridge.publishInfo()
        event("config_reloaded", ["added": .array(added.map { .string($0) }), "removed": .array(removed.map { .string($0) }),
                                  "changed": .array(changed.map { .string($0) })])
        return ["added": .array(added.map { .string($0) }), "removed": .array(removed.sorted().map { .string($0) }),
                "changed": .array(changed.map { .string($0) }), "yielded": .array(yielded.sorted().map { .string($0) }),
                "unchanged": .int(Int64(unchanged)), "restart_required": .array(restart.map { .string($0) }),
                "log_level": .string(bridge.logLevel.withLock { $0 }.rawValue)]
    }

    // MARK: Retained topics and discovery of one device

    /// Takes a device out of the bridge: out of the registry (so no new command reaches it), its
    /// session stopped (queued commands ended with `error`, or left in the outbox when nil), its
    /// discovery withdrawn and, unless told otherwise, its retained topics emptied.
    func retire(_ r: Registered, failingQueuedWith error: CommandError?, clearingRetained: Bool = true) async {
        bridge.registry.withLock { $0[r.config.id] = nil }
        await r.session.stop(failingQueuedWith: error)
        bridge.deviceRetired(r.config)
        if clearingRetained { clearRetained(r.config) }
    }

    /// Empties the device's retained topics (state, availability, its mappings' topics), so a
    /// removed or renamed device leaves nothing behind on the broker.
    func clearRetained(_ device: DeviceConfig) {
        var retained = [topics.state(device.id), topics.availability(device.id)]
        retained += device.characteristics.map { topics.characteristic(device.id, $0.topic) }
        for t in retained { mqtt.send(OutboundMessage(topic: t, payload: [], qos: 1, retain: true)) }
    }
}
