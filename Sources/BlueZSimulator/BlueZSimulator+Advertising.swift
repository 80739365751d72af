import DBus

extension BlueZSimulator {
    /// bluetoothd reports an RSSI change only when it moved this many dBm from the last reported
    /// value, unless some client set a discovery filter (`RSSI_THRESHOLD` of 5.66 `src/device.c`;
    /// bluez doc/org.bluez.Adapter.rst, SetDiscoveryFilter `RSSI`).
    static let rssiDeltaThreshold: Int16 = 8

    /// Starts an adapter's advertiser when its discovery starts (behaviour 10): every
    /// ``Options/advertisingInterval`` each device it hears gets an advertisement
    /// (``advertise()``). One task per discovering adapter for all devices, only while
    /// discovering, on the connection's event loop (its timers).
    func startAdvertising(_ adapter: String) {
        guard let interval = options.advertisingInterval, interval > .zero else { return }
        let generation = state.withLock { s -> UInt64? in
            guard s.adapters[adapter]!.advertiser == nil, s.adapters[adapter]!.discovering else { return nil }
            s.advertiserGeneration += 1
            s.adapters[adapter]!.advertiser = s.advertiserGeneration
            return s.advertiserGeneration
        }
        guard let generation else { return }
        let loop = connection.loop
        let id = spawn { [weak self] in
            while !Task.isCancelled {
                try? await loop.sleep(for: interval)
                guard let self, !Task.isCancelled, self.advertise(adapter, generation: generation) else { return }
            }
        }
        let stale = state.withLock { s -> Task<Void, Never>? in
            guard s.adapters[adapter]!.advertiser == generation else { return s.tasks[id] }  // stopped meanwhile
            s.adapters[adapter]!.advertiserTask = id
            return nil
        }
        stale?.cancel()
    }

    /// Stops an adapter's advertiser (its discovery stopped or it went off); its task removes
    /// itself from `tasks` when it ends.
    func stopAdvertising(_ adapter: String) {
        let task = state.withLock { s -> Task<Void, Never>? in
            defer {
                s.adapters[adapter]!.advertiser = nil
                s.adapters[adapter]!.advertiserTask = nil
            }
            return s.adapters[adapter]!.advertiserTask.flatMap { s.tasks[$0] }
        }
        task?.cancel()
    }

    /// One advertisement from every device in range and not connected (a connected peripheral
    /// stops advertising, on every adapter), as bluetoothd reports it on each discovering
    /// adapter, in the adapters' order: a device whose advertisement the adapter's sessions'
    /// filters do not let through (``AdapterState/reports(_:rssi:)``: Pattern, UUIDs, RSSI) is
    /// ignored; a new one is exported (InterfacesAdded); an exported one gets one
    /// `PropertiesChanged(Device1)` with `RSSI` (every advertisement when some client set a
    /// filter, else when it moved ``rssiDeltaThreshold``), `ManufacturerData` and `ServiceData`
    /// when they changed (every time with `DuplicateData`). Nothing is reported on an adapter
    /// while it creates a connection (behaviour 13). This is one round now, for tests that
    /// set ``Options/advertisingInterval`` nil and advertise step by step; returns false when no
    /// adapter discovers.
    @discardableResult
    public func advertise() -> Bool {
        var any = false
        for adapter in options.adapters where advertise(adapter, generation: nil) { any = true }
        return any
    }

    /// ``advertise()`` on one adapter for its advertiser of `generation` (nil: a round of
    /// ``advertise()``): false when the adapter's discovery is over or another advertiser runs
    /// (this one ends).
    func advertise(_ adapter: String, generation: UInt64?) -> Bool {
        struct Update {
            var key: DeviceKey
            var path: DBusObjectPath
            var export = false
            var rssi: Int16
            var changed: [String: DBusValue] = [:]
        }
        let jitter = Int(max(0, options.rssiJitter))
        let updates = state.withLock { s -> [Update]? in
            let a = s.adapters[adapter]!
            guard a.discovering, a.powered, generation == nil || generation == a.advertiser else { return nil }
            // The kernel stops LE scanning while it creates a connection on this adapter and
            // bluetoothd starts it again once the link is up (behaviour 13): nothing is heard.
            let creating = s.devices.contains { k, d in
                k.adapter == adapter && d.connecting != nil && !d.connected && s.peripherals[k.address]?.link == adapter
            }
            if creating { return [] }
            let filtered = a.sessions.values.contains(where: \.isSet)
            let duplicates = a.sessions.values.contains(where: \.duplicateData)
            var updates: [Update] = []
            for k in s.devices.keys.filter({ $0.adapter == adapter }).sorted(by: { $0.address < $1.address }) {
                let d = s.devices[k]!
                guard s.hears(k), !d.connected, d.connecting == nil else { continue }
                let ad = d.device.advertisement
                let offset = jitter == 0 ? 0 : Int(s.random() % UInt64(2 * jitter + 1)) - jitter
                let rssi = Int16(max(-127, min(20, Int(d.rssi) + offset)))
                guard a.reports(d, rssi: rssi) else { continue }
                var u = Update(key: k, path: d.path, rssi: rssi)
                guard d.exported else {
                    u.export = true
                    updates.append(u)
                    continue
                }
                if filtered || d.reportedRSSI.map({ abs(Int($0) - Int(rssi)) >= Int(Self.rssiDeltaThreshold) }) ?? true {
                    u.changed["RSSI"] = .int16(rssi)
                    s.devices[k]!.reportedRSSI = rssi
                }
                if !ad.manufacturerData.isEmpty, duplicates || ad.manufacturerData != d.reportedManufacturerData {
                    u.changed["ManufacturerData"] = Self.manufacturerData(ad)
                    s.devices[k]!.reportedManufacturerData = ad.manufacturerData
                }
                if !ad.serviceData.isEmpty, duplicates || ad.serviceData != d.reportedServiceData {
                    u.changed["ServiceData"] = Self.serviceData(ad)
                    s.devices[k]!.reportedServiceData = ad.serviceData
                }
                if !u.changed.isEmpty { updates.append(u) }
            }
            return updates
        }
        guard let updates else { return false }
        for u in updates {
            if u.export {
                try? exportDevice(u.key, withRSSI: true, rssi: u.rssi)
            } else {
                emitDeviceChanged(u.path, u.changed)
            }
        }
        return true
    }

    /// One `PropertiesChanged(Device1, changed, [])` with every value in `changed`, even unchanged
    /// ones (bluetoothd emits per advertisement); values of properties the device was exported
    /// without (ManufacturerData first seen now) go out in a signal of their own.
    func emitDeviceChanged(_ path: DBusObjectPath, _ changed: [String: DBusValue]) {
        var stored: [String: DBusValue] = [:], extra: [DBusDictEntry] = []
        for (k, v) in changed.sorted(by: { $0.key < $1.key }) {
            if connection.property(path, interface: Self.device1, k) != nil { stored[k] = v } else {
                extra.append(DBusDictEntry(.string(k), .variant(v)))
            }
        }
        if !stored.isEmpty { try? connection.setProperties(path, interface: Self.device1, stored, alwaysEmit: true) }
        if !extra.isEmpty {
            try? connection.emitSignal(
                path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                arguments: [.string(Self.device1), .dictionary(key: .string, value: .variant, extra), .strings([])])
        }
    }

    /// Device1 `ManufacturerData` a{qv}.
    static func manufacturerData(_ ad: SimulatedAdvertisement) -> DBusValue {
        .dictionary(key: .uint16, value: .variant,
                    ad.manufacturerData.sorted { $0.key < $1.key }.map { DBusDictEntry(.uint16($0.key), .variant(.bytes($0.value))) })
    }

    /// Device1 `ServiceData` a{sv}.
    static func serviceData(_ ad: SimulatedAdvertisement) -> DBusValue {
        .dictionary(key: .string, value: .variant,
                    ad.serviceData.sorted { $0.key < $1.key }.map { DBusDictEntry(.string($0.key), .variant(.bytes($0.value))) })
    }
}
