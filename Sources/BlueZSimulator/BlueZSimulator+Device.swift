import DBus

extension BlueZSimulator {
    /// Exports `org.bluez.Device1` for a device under an adapter (InterfacesAdded; bluez
    /// doc/org.bluez.Device.rst), with `RSSI` (``DeviceState/rssi`` unless `rssi` is given) when
    /// discovered.
    func exportDevice(_ key: DeviceKey, withRSSI: Bool, rssi: Int16? = nil) throws(DBusError) {
        let address = key.address
        let d = state.withLock { s -> DeviceState? in
            guard var d = s.devices[key], !d.exported else { return nil }
            let ad = d.device.advertisement
            d.exported = true
            d.reportedRSSI = withRSSI ? rssi ?? d.rssi : nil
            d.reportedManufacturerData = ad.manufacturerData
            d.reportedServiceData = ad.serviceData
            s.devices[key] = d
            return d
        }
        guard let d else { return }
        let ad = d.device.advertisement
        var props: [DBusProperty] = [
            DBusProperty("Address", .string(address)),
            DBusProperty("AddressType", .string("public")),
            DBusProperty("Alias", .string(ad.name ?? address.replacingOccurrences(of: ":", with: "-")), access: .readwrite),
            DBusProperty("Adapter", .objectPath(path(ofAdapter: key.adapter))),
            DBusProperty("UUIDs", .strings(ad.uuids)),
            DBusProperty("Connected", .boolean(d.connected)),
            DBusProperty("ServicesResolved", .boolean(d.resolved)),
            DBusProperty("Paired", .boolean(d.paired)),
            DBusProperty("Bonded", .boolean(d.paired)),
            DBusProperty("Trusted", .boolean(false), access: .readwrite),
            DBusProperty("Blocked", .boolean(false), access: .readwrite),
            DBusProperty("LegacyPairing", .boolean(false)),
        ]
        if let name = ad.name { props.insert(DBusProperty("Name", .string(name)), at: 2) }
        if withRSSI { props.append(DBusProperty("RSSI", .int16(rssi ?? d.rssi))) }
        if !ad.manufacturerData.isEmpty { props.append(DBusProperty("ManufacturerData", Self.manufacturerData(ad))) }
        if !ad.serviceData.isEmpty { props.append(DBusProperty("ServiceData", Self.serviceData(ad))) }
        let methods: [DBusMethod] = [
            DBusMethod("Connect") { [weak self] call in
                try await self?.connect(key, sender: call.sender)
                return []
            },
            DBusMethod("Disconnect") { [weak self] call in
                try await self?.disconnect(key, sender: call.sender)
                return []
            },
            DBusMethod("Pair") { [weak self] call in
                try await self?.pair(key, sender: call.sender)
                return []
            },
            DBusMethod("CancelPairing") { _ in throw BlueZErrors.doesNotExist },
        ]
        try connection.export(d.path, interfaces: [DBusInterface(Self.device1, methods: methods, properties: props)])
    }

    /// Injected error and reply delay for a device method; records the call.
    func gate(_ key: DeviceKey, _ method: String, sender: String?, record: Received? = nil) async throws(DBusError) {
        let faults = state.withLock { s -> Faults? in
            guard s.devices[key] != nil, let p = s.peripherals[key.address] else { return nil }
            if let record { s.record(key.address, record) }
            return p.faults
        }
        guard let faults else { throw BlueZErrors.doesNotExist }
        if faults.replyDelay > .zero { try? await sleep(for: faults.replyDelay) }
        if let e = faults.errors[method] { throw DBusError.remote(name: e.name, message: e.message) }
    }

    /// Polls `condition` every 5 ms until it holds or `limit` passed; returns whether it held.
    func wait(_ limit: Duration, until condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if condition() { return true }
            if Task.isCancelled { return false }
            try? await sleep(for: .milliseconds(5))
        }
        return condition()
    }

    /// Device1.Connect (behaviours 1 and 6): returns before ServicesResolved; a second Connect while
    /// one is under way fails; an absent or silent device, or one linked through another adapter,
    /// fails after `absentConnectTimeout`.
    func connect(_ key: DeviceKey, sender: String?) async throws(DBusError) {
        try await gate(key, "Connect", sender: sender,
                       record: Received(method: "Connect", value: [], delivered: true, sender: sender))
        try await establishLink(key)
    }

    /// The link part of Connect (and of Pair on a disconnected device). A peripheral this
    /// adapter hears (in range, no link through another adapter) gets its link claimed for this
    /// adapter at once; one it does not hear is connected to in vain, as an absent one.
    func establishLink(_ key: DeviceKey) async throws(DBusError) {
        enum Plan { case already, refuse, absent(UInt64), link(UInt64) }
        let plan = try state.withLock { (s) throws(DBusError) -> Plan in
            guard s.adapters[key.adapter]!.powered else { throw BlueZErrors.notReady }
            guard var d = s.devices[key], d.exported, let p = s.peripherals[key.address] else { throw BlueZErrors.doesNotExist }
            // A device a client connects (or tries to) is no longer temporary (5.66 dev_connect).
            d.temporary = false
            s.devices[key] = d
            if d.connected, !d.disconnecting { return .already }
            if d.connecting != nil || d.disconnecting {
                throw options.version == .v5_66 ? BlueZErrors.failed("Operation already in progress") : BlueZErrors.inProgress
            }
            if p.faults.refuseConnections { return .refuse }
            let id = s.id()
            d.connecting = id
            d.cancelConnect = false
            d.removalGeneration += 1
            s.devices[key] = d
            // A non-connectable advertiser never answers the kernel's connection attempt.
            guard s.hears(key), !p.faults.silent, p.device.connectable else { return .absent(id) }
            s.peripherals[key.address]!.link = key.adapter
            return .link(id)
        }
        let id: UInt64
        switch plan {
        case .already: return
        case .refuse: throw BlueZErrors.failed("Software caused connection abort")
        case let .absent(i), let .link(i): id = i
        }
        func cancelled() -> Bool { state.withLock { $0.devices[key]?.cancelConnect ?? true } }
        func finish() { state.withLock { s in if s.devices[key]?.connecting == id { s.devices[key]?.connecting = nil } } }
        if case .absent = plan {
            let wasCancelled = await wait(options.absentConnectTimeout, until: cancelled)
            finish()
            if !state.withLock({ $0.devices[key]?.connected ?? false }) { scheduleIfIdle(key) }
            throw wasCancelled ? BlueZErrors.failed("br-connection-canceled") : BlueZErrors.failed("le-connection-abort-by-local")
        }
        if await wait(options.connectDelay, until: cancelled) {
            finish()
            releaseLink(key)
            throw BlueZErrors.failed("br-connection-canceled")
        }
        let (path, epoch) = state.withLock { s -> (DBusObjectPath, UInt64) in
            s.devices[key]!.connecting = nil
            s.devices[key]!.connected = true
            s.devices[key]!.epoch += 1
            return (s.devices[key]!.path, s.devices[key]!.epoch)
        }
        try? connection.setProperty(path, interface: Self.device1, "Connected", .boolean(true))
        resolveServices(key, epoch: epoch)
    }

    /// The peripheral's link through `key`'s adapter never came: it advertises again, and
    /// every adapter that hears it and discovers exports it if it had not.
    func releaseLink(_ key: DeviceKey) {
        if state.withLock({ $0.releaseLink(key) }) { try? exportWhereDiscovered(key.address) }
    }

    /// After `resolveDelay`: GATT objects exported (first time), ServicesResolved=true, the
    /// device gets its link. Notify sessions carry over (re-armed by bluetoothd, behaviour 2).
    func resolveServices(_ key: DeviceKey, epoch: UInt64) {
        let delay = options.resolveDelay
        let loop = connection.loop
        spawn { [weak self] in
            try? await loop.sleep(for: delay)
            guard let self, !Task.isCancelled else { return }
            let d = self.state.withLock { s -> DeviceState? in
                guard let d = s.devices[key], d.epoch == epoch, d.connected else { return nil }
                return d
            }
            guard let d else { return }
            if !d.gattExported { self.exportGATT(key) }
            let ok = self.state.withLock { s -> Bool in
                guard s.devices[key]?.epoch == epoch, s.devices[key]?.connected == true else { return false }
                s.devices[key]!.resolved = true
                return true
            }
            guard ok else { return }
            // As bluetoothd 5.66 (seen on the real stack): UUIDs become the GATT primary services
            // (GAP 1800 and GATT 1801 included, which every GATT server has) in the same signal as
            // ServicesResolved=true, and stay so while the object lives, scans included.
            try? self.connection.setProperties(d.path, interface: Self.device1,
                                               ["UUIDs": .strings(Self.resolvedUUIDs(d.device)), "ServicesResolved": .boolean(true)])
            d.device.linkChanged(SimulatedLink { [weak self] uuid, value in
                self?.deviceNotified(key, epoch: epoch, uuid: uuid, value: value) ?? false
            })
        }
    }

    /// `Device1.UUIDs` once services are resolved: the advertised UUIDs and the primary services,
    /// with GAP (1800) and GATT (1801), sorted as bluetoothd lists them.
    static func resolvedUUIDs(_ device: any SimulatedDevice) -> [String] {
        let primaries = device.services.filter(\.primary).map(\.uuid)
        return Set(device.advertisement.uuids + primaries + ["1800", "1801"].map(SimUUID.full)).sorted()
    }

    /// Device1.Disconnect: cancels a connection attempt, or takes `disconnectDelay` (behaviour 5).
    func disconnect(_ key: DeviceKey, sender: String?) async throws(DBusError) {
        try await gate(key, "Disconnect", sender: sender,
                       record: Received(method: "Disconnect", value: [], delivered: true, sender: sender))
        enum Plan { case cancel, disconnect, none }
        let plan = state.withLock { s -> Plan in
            guard let d = s.devices[key] else { return .none }
            if d.connecting != nil {
                s.devices[key]!.cancelConnect = true
                return .cancel
            }
            guard d.connected, !d.disconnecting else { return .none }
            s.devices[key]!.disconnecting = true
            return .disconnect
        }
        switch plan {
        case .none: throw BlueZErrors.notConnected
        case .cancel: return
        case .disconnect:
            try? await sleep(for: options.disconnectDelay)
            linkDown(key)
        }
    }

    /// Device1.Pair: Just Works; Paired and Bonded go true on this adapter's object (a bond is
    /// per adapter). A disconnected device is connected first, as bluetoothd does ("This method
    /// will connect to the remote device, initiate pairing and then retrieve all SDP records (or
    /// GATT primary services)", bluez doc/org.bluez.Device.rst); the link stays up and services
    /// resolve as after Connect. The pairing agent (``pairingAgent(for:)``: the caller's own,
    /// else the default) is asked `RequestAuthorization(device)`; a refusal fails the call with
    /// `AuthenticationRejected`. With no agent at all the pairing goes ahead (docs/bluez.md,
    /// "Pairing agent"). A device that refuses pairing (``Faults/refusePairing``) fails it with
    /// `AuthenticationFailed: Authentication Failed`.
    func pair(_ key: DeviceKey, sender: String?) async throws(DBusError) {
        try await gate(key, "Pair", sender: sender,
                       record: Received(method: "Pair", value: [], delivered: true, sender: sender))
        let needsLink = try state.withLock { (s) throws(DBusError) -> Bool in
            guard let d = s.devices[key], let p = s.peripherals[key.address] else { throw BlueZErrors.doesNotExist }
            guard !d.paired else { throw DBusError.remote(name: "org.bluez.Error.AlreadyExists", message: "Already Exists") }
            return !d.connected && s.hears(key) && !p.faults.silent
        }
        if needsLink { try await establishLink(key) }
        if let agent = pairingAgent(for: sender), let devicePath = state.withLock({ $0.devices[key]?.path }),
           let refused = await askAuthorization(agent, device: devicePath)
        {
            throw DBusError.remote(name: "org.bluez.Error.AuthenticationRejected",
                                   message: "Authentication Rejected (the agent answered \(refused))")
        }
        let path = try state.withLock { (s) throws(DBusError) -> DBusObjectPath in
            guard let d = s.devices[key], let p = s.peripherals[key.address] else { throw BlueZErrors.doesNotExist }
            guard !d.paired else { throw DBusError.remote(name: "org.bluez.Error.AlreadyExists", message: "Already Exists") }
            guard s.hears(key), !p.faults.silent else {
                throw DBusError.remote(name: "org.bluez.Error.AuthenticationTimeout", message: "Authentication Timeout")
            }
            // SMP Pairing Failed from the device: MGMT_STATUS_AUTH_FAILED (5.66 `new_authentication_return`).
            guard !p.faults.refusePairing else {
                throw DBusError.remote(name: "org.bluez.Error.AuthenticationFailed", message: "Authentication Failed")
            }
            s.devices[key]!.paired = true
            return d.path
        }
        try? connection.setProperties(path, interface: Self.device1, ["Paired": .boolean(true), "Bonded": .boolean(true)])
    }

    /// The link is gone: ServicesResolved=false then Connected=false (behaviours 5 and 8), the
    /// device loses its link and advertises again (exported where a discovery reports it,
    /// ``exportWhereDiscovered(_:)``), and an unpaired device is scheduled to vanish.
    func linkDown(_ key: DeviceKey, emit: Bool = true) {
        let d = state.withLock { s -> DeviceState? in
            guard var d = s.devices[key], d.connected else { return nil }
            d.epoch += 1
            d.connected = false
            d.resolved = false
            d.disconnecting = false
            s.devices[key] = d
            // Before Connected=false goes out: whoever sees it may connect through another adapter.
            _ = s.releaseLink(key)
            return d
        }
        guard let d else { return }
        // Acquired sockets end with the link (bluetoothd shuts its ios down on disconnect).
        for c in d.chars.values { c.writeIO?.shutdown(); c.notifyIO?.shutdown() }
        d.device.linkChanged(nil)
        if emit, d.exported {
            try? connection.setProperty(d.path, interface: Self.device1, "ServicesResolved", .boolean(false))
            try? connection.setProperty(d.path, interface: Self.device1, "Connected", .boolean(false))
        }
        try? exportWhereDiscovered(key.address)
        scheduleIfIdle(key)
    }

    /// Schedules removal of an unpaired, disconnected device when no discovery would keep it.
    func scheduleIfIdle(_ key: DeviceKey) {
        let idle = state.withLock { s -> Bool in
            guard let d = s.devices[key], d.exported, d.temporary, !d.paired, !d.connected else { return false }
            return !s.discovers(key)
        }
        if idle { scheduleRemoval(key) }
    }
}
