import DBus

extension BlueZSimulator {
    /// `/org/bluez` `org.bluez.AgentManager1`: registrations are accepted and remembered per caller
    /// (spec/bluez.md, "Objects a client sees"), in bluetoothd 5.66's default-agent queue
    /// (``State/defaultAgents``: the first agent registered becomes the default by itself,
    /// `RequestDefaultAgent` makes the caller's the default). Who answers a pairing:
    /// docs/bluez.md, "Pairing agent".
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
                    s.agentManagerCalls.append((call.sender ?? "", "RegisterAgent"))
                    if s.defaultAgents.isEmpty { s.defaultAgents = [call.sender ?? ""] } else { s.defaultAgents.append(call.sender ?? "") }
                }
                return []
            },
            DBusMethod("RequestDefaultAgent", in: [DBusArgument("agent", .objectPath)]) { [weak self] call in
                let path: DBusObjectPath = try call.decode(0)
                let sender = call.sender ?? ""
                try self?.state.withLock { (s) throws(DBusError) in
                    s.agentManagerCalls.append((sender, "RequestDefaultAgent"))
                    guard s.agents[sender] == path else { throw BlueZErrors.doesNotExist }
                    s.defaultAgents.removeAll { $0 == sender }
                    s.defaultAgents.insert(sender, at: 0)
                }
                return []
            },
            DBusMethod("UnregisterAgent", in: [DBusArgument("agent", .objectPath)]) { [weak self] call in
                let path: DBusObjectPath = try call.decode(0)
                try self?.state.withLock { (s) throws(DBusError) in
                    s.agentManagerCalls.append((call.sender ?? "", "UnregisterAgent"))
                    guard s.agents[call.sender ?? ""] == path else { throw BlueZErrors.doesNotExist }
                    s.agents[call.sender ?? ""] = nil
                    s.defaultAgents.removeAll { $0 == call.sender ?? "" }
                }
                return []
            },
        ])
    }

    /// `/org/bluez/<name>` `org.bluez.Adapter1` (bluez doc/org.bluez.Adapter.rst): the
    /// properties bluetoothd 5.66 exports for an LE adapter (`Modalias` and
    /// `ExperimentalFeatures`, optional, are left out).
    func adapterInterface(_ name: String, address: String) -> DBusInterface {
        DBusInterface(
            Self.adapter1,
            methods: [
                DBusMethod("StartDiscovery") { [weak self] call in
                    try self?.startDiscovery(name, call.sender ?? "")
                    return []
                },
                DBusMethod("StopDiscovery") { [weak self] call in
                    try self?.stopDiscovery(name, call.sender ?? "")
                    return []
                },
                DBusMethod("SetDiscoveryFilter", in: [DBusArgument("filter", .properties)]) { [weak self] call in
                    let raw: [String: DBusValue] = try call.decode(0)
                    try self?.setFilter(name, call.sender ?? "", raw)
                    return []
                },
                DBusMethod("GetDiscoveryFilters", out: [DBusArgument("filters", .array(.string))]) { _ in
                    [.strings(["UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable", "Pattern"])]
                },
                DBusMethod("RemoveDevice", in: [DBusArgument("device", .objectPath)]) { [weak self] call in
                    let path: DBusObjectPath = try call.decode(0)
                    try await self?.removeDevice(name, path)
                    return []
                },
            ],
            properties: [
                DBusProperty("Address", .string(address)),
                DBusProperty("AddressType", .string("public")),
                DBusProperty("Name", .string("gatt2mqtt-sim")),
                DBusProperty("Alias", .string("gatt2mqtt-sim"), access: .readwrite),
                DBusProperty("Powered", .boolean(true), access: .readwrite) { [weak self] v in
                    if let on = v.boolValue { self?.powerAdapter(name, on) }
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
    /// filter per adapter. A powered-off adapter answers `NotReady`, as 5.66 does before parsing.
    func setFilter(_ adapter: String, _ sender: String, _ raw: [String: DBusValue]) throws(DBusError) {
        guard state.withLock({ $0.adapters[adapter]!.powered }) else { throw BlueZErrors.notReady }
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
            s.adapters[adapter]!.filters[sender] = f
            if s.adapters[adapter]!.sessions[sender] != nil { s.adapters[adapter]!.sessions[sender] = f }
        }
    }

    func startDiscovery(_ adapter: String, _ sender: String) throws(DBusError) {
        let (first, toExport, toRefresh) = try state.withLock { (s) throws(DBusError) -> (Bool, [DeviceKey], [DeviceKey]) in
            guard s.adapters[adapter]!.powered else { throw BlueZErrors.notReady }
            guard s.adapters[adapter]!.sessions[sender] == nil else { throw BlueZErrors.busy }
            let first = s.adapters[adapter]!.sessions.isEmpty
            let f = s.adapters[adapter]!.filters[sender] ?? Filter()
            s.adapters[adapter]!.sessions[sender] = f
            var export: [DeviceKey] = [], refresh: [DeviceKey] = []
            for (k, d) in s.devices where k.adapter == adapter && f.matches(d) && s.discovers(k) {
                s.devices[k]!.removalGeneration += 1
                if d.exported {
                    refresh.append(k)
                    s.devices[k]!.reportedRSSI = d.rssi
                } else {
                    export.append(k)
                }
            }
            return (first, export, refresh)
        }
        if first {
            try connection.setProperty(path(ofAdapter: adapter), interface: Self.adapter1, "Discovering", .boolean(true))
            startAdvertising(adapter)
        }
        for k in toExport.sorted(by: { $0.address < $1.address }) { try exportDevice(k, withRSSI: true) }
        for k in toRefresh.sorted(by: { $0.address < $1.address }) {
            let d = state.withLock { $0.devices[k] }
            if let d {
                try? connection.setProperty(d.path, interface: Self.device1, "RSSI", .int16(d.rssi),
                                            alwaysEmit: true)
            }
        }
    }

    func stopDiscovery(_ adapter: String, _ sender: String) throws(DBusError) {
        let last = try state.withLock { (s) throws(DBusError) -> Bool in
            guard s.adapters[adapter]!.powered else { throw BlueZErrors.notReady }
            guard s.adapters[adapter]!.sessions.removeValue(forKey: sender) != nil else {
                throw BlueZErrors.failed("No discovery started")
            }
            return s.adapters[adapter]!.sessions.isEmpty
        }
        if last { discoveryStopped(adapter) }
    }

    /// The adapter's Discovering goes false, advertisements stop being reported there, RSSI is
    /// invalidated on every device exported under it, and unpaired disconnected ones are
    /// scheduled to vanish (behaviour 4).
    func discoveryStopped(_ adapter: String) {
        stopAdvertising(adapter)
        try? connection.setProperty(path(ofAdapter: adapter), interface: Self.adapter1, "Discovering", .boolean(false))
        let devices = state.withLock { s -> [(DeviceKey, DeviceState)] in
            let keys = s.devices.keys.filter { $0.adapter == adapter }.sorted { $0.address < $1.address }
            for k in keys { s.devices[k]!.reportedRSSI = nil }
            return keys.filter { s.devices[$0]!.exported }.map { ($0, s.devices[$0]!) }
        }
        for (k, d) in devices {
            // The DBus module cannot delete a stored property: RSSI is announced as invalidated
            // (as bluetoothd does) but stays readable through Get/GetAll.
            try? connection.emitSignal(
                path: d.path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                arguments: [.string(Self.device1), .dictionary(key: .string, value: .variant, []), .strings(["RSSI"])])
            if !d.connected, !d.paired { scheduleRemoval(k) }
        }
    }

    /// Exports the device under every adapter that hears it, whose discovery reports it and
    /// under which it is not exported yet: it came in range, or its link through another adapter
    /// went and it advertises again.
    func exportWhereDiscovered(_ address: String) throws(DBusError) {
        let keys = state.withLock { s in
            s.keys(of: address, among: options.adapters).filter { !s.devices[$0]!.exported && s.discovers($0) }
        }
        for k in keys { try exportDevice(k, withRSSI: true) }
    }

    /// Adapter1.RemoveDevice, checks in 5.66's order (`remove_device`): an unknown device (or one
    /// of another adapter) is `DoesNotExist`, then a powered-off adapter `NotReady`. A connected
    /// device is disconnected first, as `Device1.Disconnect` does it (bluetoothd's disconnect
    /// timer, `disconnectDelay`; then `ServicesResolved` and `Connected` go false), and only then
    /// are its objects removed, children first. Seen on the real stack (docs/bluez.md "The real
    /// stack"): RemoveDevice of a connected device answers after about two seconds; the emulator
    /// used to drop the link and the objects at once without a signal.
    func removeDevice(_ adapter: String, _ path: DBusObjectPath) async throws(DBusError) {
        let found = state.withLock { s -> (DeviceKey, Bool, Bool)? in
            guard let k = s.byPath[path], k.adapter == adapter, let d = s.devices[k], d.exported else { return nil }
            return (k, d.connected, s.adapters[adapter]!.powered)
        }
        guard let (key, connected, powered) = found else { throw BlueZErrors.doesNotExist }
        guard powered else { throw BlueZErrors.notReady }
        if connected {
            state.withLock { $0.devices[key]?.disconnecting = true }
            try? await sleep(for: options.disconnectDelay)
            linkDown(key)
        }
        removeNow(key)
    }

    /// Removes a device's objects under one adapter, children first (behaviour 4).
    func removeNow(_ key: DeviceKey) {
        let path = state.withLock { s -> DBusObjectPath? in
            guard var d = s.devices[key], d.exported else { return nil }
            d.exported = false
            d.gattExported = false
            d.paired = false
            d.temporary = true
            d.chars = [:]
            d.removalGeneration += 1
            s.devices[key] = d
            return d.path
        }
        if let path { try? connection.unexportTree(path) }
    }

    func scheduleRemoval(_ key: DeviceKey) {
        let generation = state.withLock { s -> UInt64 in
            s.devices[key]?.removalGeneration += 1
            return s.devices[key]?.removalGeneration ?? 0
        }
        let delay = options.removalDelay
        let loop = connection.loop
        spawn { [weak self] in
            try? await loop.sleep(for: delay)
            guard let self, !Task.isCancelled else { return }
            let still = self.state.withLock { s -> Bool in
                guard let d = s.devices[key] else { return false }
                return d.removalGeneration == generation && d.temporary && !d.connected && d.connecting == nil && !d.paired
                    && !s.discovers(key)
            }
            if still { self.removeNow(key) }
        }
    }
}
