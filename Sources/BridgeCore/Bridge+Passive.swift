import BinaryCoding
import BridgeConfig

// Passive devices (`profile: advertisement`): the bridge keeps one discovery running while at
// least one is registered (through `BLEAdapterControl.scan()`: LE, duplicates reported; BlueZPort
// shares it with `bridge/request/scan` and the connects' look-ups, docs/bluez.md "One discovery
// per client") and hands each sighting of a passive device's address, or of an address its
// pattern matches, to that device's session (DeviceSession+Passive.swift).

/// What the bridge needs for its passive devices besides their sessions.
enum PassiveDevices {
    /// The driver of a session that has no link: it takes no command.
    struct NoDriver: DeviceDriver {
        var notifyCharacteristics: [CharacteristicID] { [] }
        func encode(_ command: JSONObject, mtu: Int) throws(CommandError) -> DeviceRequest {
            throw CommandError(.unknownCommand, "a passive device (profile: advertisement) takes no commands")
        }
        func receive(_ notification: GATTNotification) -> [DriverOutput] { [] }
    }

    /// How long the bridge waits before it starts a discovery again that ended or failed.
    static let restartAfter: Duration = .seconds(1)
    static let retryAfterFailure: Duration = .seconds(5)
}

extension Bridge {
    /// Whether a passive device is registered.
    var hasPassiveDevices: Bool { registry.withLock { $0.values.contains { $0.session.isPassive } } }

    /// The passive device a sighting of `address` is (an exact address first, then a pattern).
    /// Runs for every advertisement heard: one pass, no array, the address upper-cased once
    /// (an exact `address` is kept upper case, as `DeviceConfig.matchesAddress` compares it).
    func passiveSession(for address: String) -> DeviceSession? {
        let upper = address.uppercased()
        return registry.withLock { r in
            var byPattern: DeviceSession?
            for d in r.values where d.session.isPassive {
                if !d.config.addressIsPattern {
                    if d.config.address == upper { return d.session }
                } else if byPattern == nil, d.config.matchesAddress(upper) {
                    byPattern = d.session
                }
            }
            return byPattern
        }
    }

    /// Runs until cancelled: a discovery while a passive device is registered, started again
    /// when it ends; none while there is no passive device.
    func listenForPassiveDevices() async {
        var warned = false
        var started = passiveStarts.makeAsyncIterator()
        while !Task.isCancelled {
            guard hasPassiveDevices else {
                // Woken when a passive device's session starts (no polling: an idle bridge sleeps).
                _ = await started.next()
                continue
            }
            guard let control = central.adapterControl else {
                if !warned { logger.error("passive devices are configured, but this Bluetooth central cannot scan") }
                warned = true
                try? await sleep(PassiveDevices.retryAfterFailure)
                continue
            }
            let scan: BLEScan
            do { scan = try await control.scan() } catch {
                logger.warning("the discovery for passive devices did not start", metadata: ["error": "\(error)"])
                try? await sleep(PassiveDevices.retryAfterFailure)
                continue
            }
            logger.debug("discovery for passive devices started")
            for await ad in scan.advertisements {
                guard hasPassiveDevices else { break }
                passiveSession(for: ad.address)?.heard(ad)
            }
            await scan.stop()
            if !Task.isCancelled { try? await sleep(PassiveDevices.restartAfter) }
        }
    }
}
