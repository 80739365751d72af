import DBus

extension BlueZSimulator {
    /// `/org/bluez` `org.bluez.AgentManager1`: registrations are accepted and remembered per caller
    /// (spec/bluez.md, "Objects a client sees").
    func agentManager() -> DBusInterface {
        DBusInterface("org.bluez.AgentManager1", methods: [
            DBusMethod("RegisterAgent", in: [DBusArgument("agent", .objectPath), DBusArgument("capability", .string)]) {
                [weak self] call in
                let path: DBusObjectPath = try call.decode(0)
                let capability: String = try call.decode(1)
                let known = ["", "DisplayOnly", "DisplayYesNo", "KeyboardOnly", "NoInputNoOutput", "KeyboardDisplay"]
                guard known.contains(capability) else { throw BlueZErrors.invalidArguments }
                try self?.state.withLock { (s) throws(DBusError) in
                    guard s.agents[call.sender ?? ""] == nil else {
                        throw DBusError.remote(name: "org.bluez.Error.AlreadyExists", message: "Already Exists")
                    }
                    s.agents[call.sender ?? ""] = path
                }
                return []
            },
            DBusMethod("RequestDefaultAgent", in: [DBusArgument("agent", .objectPath)]) { [weak self] call in
                let path: DBusObjectPath = try call.decode(0)
                guard self?.state.withLock({ $0.agents[call.sender ?? ""] == path }) == true else {
                    throw BlueZErrors.doesNotExist
                }
                return []
            },
            DBusMethod("UnregisterAgent", in: [DBusArgument("agent", .objectPath)]) { [weak self] call in
                let path: DBusObjectPath = try call.decode(0)
                try self?.state.withLock { (s) throws(DBusError) in
                    guard s.agents[call.sender ?? ""] == path else { throw BlueZErrors.doesNotExist }
                    s.agents[call.sender ?? ""] = nil
                }
                return []
            },
        ])
    }

    /// `/org/bluez/hci0` `org.bluez.Adapter1` (bluez doc/org.bluez.Adapter.rst): the properties
    /// bluetoothd 5.66 exports for an LE adapter (`Modalias` and `ExperimentalFeatures`, optional,
    /// are left out).
    func adapterInterface() -> DBusInterface {
        DBusInterface(
            Self.adapter1,
            methods: [
                DBusMethod("StartDiscovery") { [weak self] call in
                    try self?.startDiscovery(call.sender ?? "")
                    return []
                },
                DBusMethod("StopDiscovery") { [weak self] call in
                    try self?.stopDiscovery(call.sender ?? "")
                    return []
                },
                DBusMethod("SetDiscoveryFilter", in: [DBusArgument("filter", .properties)]) { [weak self] call in
                    let raw: [String: DBusValue] = try call.decode(0)
                    try self?.setFilter(call.sender ?? "", raw)
                    return []
                },
                DBusMethod("GetDiscoveryFilters", out: [DBusArgument("filters", .array(.string))]) { _ in
                    [.strings(["UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable", "Pattern"])]
                },
                DBusMethod("RemoveDevice", in: [DBusArgument("device", .objectPath)]) { [weak self] call in
                    let path: DBusObjectPath = try call.decode(0)
                    try await self?.removeDevice(path)
                    return []
                },
            ],
            properties: [
                DBusProperty("Address", .string(options.adapterAddress)),
                DBusProperty("AddressType", .string("public")),
                DBusProperty("Name", .string("gatt2mqtt-sim")),
                DBusProperty("Alias", .string("gatt2mqtt-sim"), access: .readwrite),
                DBusProperty("Powered", .boolean(true), access: .readwrite) { [weak self] v in
                    if let on = v.boolValue { self?.setAdapterPowered(on) }
                    return v
                },
                DBusProperty("Class", .uint32(0)),
                DBusProperty("Discoverable", .boolean(false), access: .readwrite),
                DBusProperty("DiscoverableTimeout", .uint32(180), access: .readwrite),
                DBusProperty("Pairable", .boolean(true), access: .readwrite),
                DBusProperty("PairableTimeout", .uint32(0), access: .readwrite),
                DBusProperty("Discovering", .boolean(false)),
                DBusProperty("UUIDs", .strings([])),
                // What an LE controller supports; clients pick an adapter by it (bleak needs "central").
                DBusProperty("Roles", .strings(["central", "peripheral"])),
            ])
    }

    /// Adapter1.SetDiscoveryFilter: the caller's filter (an empty one removes it, as in bluez
    /// doc/org.bluez.Adapter.rst); RSSI and Pathloss together are invalid (bluetoothd refuses them).
    /// While the caller discovers, the filter applies to its running session at once (5.66
    /// `set_discovery_filter` → `update_discovery_filter`): each client has one session and one
    /// filter. A powered-off adapter answers `NotReady`, as 5.66 does before parsing.
    func setFilter(_ sender: String, _ raw: [String: DBusValue]) throws(DBusError) {
        guard state.withLock({ $0.powered }) else { throw BlueZErrors.notReady }
        var f = Filter()
        f.isSet = !raw.isEmpty
        for (k, v) in raw {
            switch (k, v) {
            case let ("UUIDs", .array(.string, items)): f.uuids = items.compactMap(\.stringValue).map(SimUUID.full)
            case let ("RSSI", .int16(r)): f.rssi = r
            case let ("DuplicateData", .boolean(b)): f.duplicateData = b
            case ("Pathloss", .uint16), ("Discoverable", .boolean): break
            case let ("Transport", .string(t)):
                guard ["auto", "bredr", "le"].contains(t) else { throw BlueZErrors.invalidArguments }
            case let ("Pattern", .string(p)): f.pattern = p
            default: throw BlueZErrors.invalidArguments
            }
        }
        if f.rssi != nil, raw["Pathloss"] != nil { throw BlueZErrors.invalidArguments }
        state.withLock { s in
            s.filters[sender] = f
            if s.sessions[sender] != nil { s.sessions[sender] = f }
        }
    }

    func startDiscovery(_ sender: String) throws(DBusError) {
        let (first, toExport, toRefresh) = try state.withLock { (s) throws(DBusError) -> (Bool, [String], [String]) in
            guard s.powered else { throw BlueZErrors.notReady }
            guard s.sessions[sender] == nil else { throw BlueZErrors.busy }
            let first = s.sessions.isEmpty
            let f = s.filters[sender] ?? Filter()
            s.sessions[sender] = f
            var export: [String] = [], refresh: [String] = []
            for (a, d) in s.devices where d.inRange && f.matches(d) && s.reports(d) {
                s.devices[a]!.removalGeneration += 1
                if d.exported {
                    refresh.append(a)
                    s.devices[a]!.reportedRSSI = d.rssi
                } else {
                    export.append(a)
                }
            }
            return (first, export, refresh)
        }
        if first {
            try connection.setProperty(adapterPath, interface: Self.adapter1, "Discovering", .boolean(true))
            startAdvertising()
        }
        for a in toExport.sorted() { try exportDevice(a, withRSSI: true) }
        for a in toRefresh.sorted() {
            let d = state.withLock { $0.devices[a] }
            if let d {
                try? connection.setProperty(d.path, interface: Self.device1, "RSSI", .int16(d.rssi),
                                            alwaysEmit: true)
            }
        }
    }

    func stopDiscovery(_ sender: String) throws(DBusError) {
        let last = try state.withLock { (s) throws(DBusError) -> Bool in
            guard s.powered else { throw BlueZErrors.notReady }
            guard s.sessions.removeValue(forKey: sender) != nil else { throw BlueZErrors.failed("No discovery started") }
            return s.sessions.isEmpty
        }
        if last { discoveryStopped() }
    }

    /// Discovering goes false, advertisements stop being reported, RSSI is invalidated on every
    /// exported device, and unpaired disconnected devices are scheduled to vanish (behaviour 4).
    func discoveryStopped() {
        stopAdvertising()
        try? connection.setProperty(adapterPath, interface: Self.adapter1, "Discovering", .boolean(false))
        let devices = state.withLock { s in
            for k in s.devices.keys { s.devices[k]!.reportedRSSI = nil }
            return s.devices.values.filter(\.exported)
        }
        for d in devices {
            // The DBus module cannot delete a stored property: RSSI is announced as invalidated
            // (as bluetoothd does) but stays readable through Get/GetAll.
            try? connection.emitSignal(
                path: d.path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                arguments: [.string(Self.device1), .dictionary(key: .string, value: .variant, []), .strings(["RSSI"])])
            if !d.connected, !d.paired { scheduleRemoval(d.device.address.uppercased()) }
        }
    }

    /// Adapter1.RemoveDevice, checks in 5.66's order (`remove_device`): an unknown device is
    /// `DoesNotExist`, then a powered-off adapter `NotReady`. A connected device is disconnected
    /// first, as `Device1.Disconnect` does it (bluetoothd's disconnect timer, `disconnectDelay`;
    /// then `ServicesResolved` and `Connected` go false), and only then are its objects removed,
    /// children first. Seen on the real stack (docs/bluez.md "The real stack"): RemoveDevice of a
    /// connected device answers after about two seconds; the emulator used to drop the link and the
    /// objects at once without a signal.
    func removeDevice(_ path: DBusObjectPath) async throws(DBusError) {
        let found = state.withLock { s -> (String, Bool, Bool)? in
            guard let a = s.byPath[path], let d = s.devices[a], d.exported else { return nil }
            return (a, d.connected, s.powered)
        }
        guard let (address, connected, powered) = found else { throw BlueZErrors.doesNotExist }
        guard powered else { throw BlueZErrors.notReady }
        if connected {
            state.withLock { $0.devices[address]?.disconnecting = true }
            try? await sleep(for: options.disconnectDelay)
            linkDown(address)
        }
        removeNow(address)
    }

    /// Removes a device's objects, children first (behaviour 4).
    func removeNow(_ address: String) {
        let path = state.withLock { s -> DBusObjectPath? in
            guard var d = s.devices[address], d.exported else { return nil }
            d.exported = false
            d.gattExported = false
            d.paired = false
            d.temporary = true
            d.chars = [:]
            d.removalGeneration += 1
            s.devices[address] = d
            return d.path
        }
        if let path { try? connection.unexportTree(path) }
    }

    func scheduleRemoval(_ address: String) {
        let generation = state.withLock { s -> UInt64 in
            s.devices[address]?.removalGeneration += 1
            return s.devices[address]?.removalGeneration ?? 0
        }
        let delay = options.removalDelay
        let loop = connection.loop
        spawn { [weak self] in
            try? await loop.sleep(for: delay)
            guard let self, !Task.isCancelled else { return }
            let still = self.state.withLock { s -> Bool in
                guard let d = s.devices[address] else { return false }
                let discoverable = d.inRange && s.reports(d)
                return d.removalGeneration == generation && d.temporary && !d.connected && d.connecting == nil && !d.paired
                    && !discoverable
            }
            if still { self.removeNow(address) }
        }
    }
}
