import DBus
import PacketSocket

extension BlueZSimulator {
    /// Exports `serviceXXXX`/`charYYYY` objects under the device (XXXX, YYYY: attribute handles
    /// as bluetoothd names them), with GattService1 and GattCharacteristic1.
    func exportGATT(_ key: DeviceKey) {
        guard let d = state.withLock({ $0.devices[key] }) else { return }
        var handle: UInt16 = 0x000a
        var chars: [DBusObjectPath: CharState] = [:]
        var exports: [(DBusObjectPath, DBusInterface)] = []
        func hex(_ h: UInt16) -> String {
            let s = String(h, radix: 16)
            return String(repeating: "0", count: max(0, 4 - s.count)) + s
        }
        for service in d.device.services {
            let sp = d.path.appending("service" + hex(handle))
            handle += 1
            exports.append((sp, DBusInterface(Self.service1, properties: [
                DBusProperty("UUID", .string(service.uuid)),
                DBusProperty("Device", .objectPath(d.path)),
                DBusProperty("Primary", .boolean(service.primary)),
            ])))
            for c in service.characteristics {
                let cp = sp.appending("char" + hex(handle))
                handle += c.flags.contains("notify") || c.flags.contains("indicate") ? 3 : 2
                chars[cp] = CharState(uuid: c.uuid, flags: c.flags, value: c.value)
                exports.append((cp, characteristicInterface(key, cp, c, service: sp, mtu: d.device.mtu)))
            }
            handle += 1
        }
        state.withLock { s in
            s.devices[key]?.chars = chars
            s.devices[key]?.gattExported = true
        }
        for (p, i) in exports { try? connection.export(p, interfaces: [i]) }
    }

    func characteristicInterface(_ key: DeviceKey, _ path: DBusObjectPath, _ c: SimulatedCharacteristic,
                                 service: DBusObjectPath, mtu: Int) -> DBusInterface
    {
        DBusInterface(
            Self.char1,
            methods: [
                DBusMethod("ReadValue", in: [DBusArgument("options", .properties)], out: [DBusArgument("value", .array(.byte))]) {
                    [weak self] call in
                    guard let self else { return [.bytes([])] }
                    let opts: [String: DBusValue] = try call.decode(0)
                    return [.bytes(try await self.read(key, path, options: opts, sender: call.sender))]
                },
                DBusMethod("WriteValue", in: [DBusArgument("value", .array(.byte)), DBusArgument("options", .properties)]) {
                    [weak self] call in
                    let value: [UInt8] = try call.decode(0)
                    let opts: [String: DBusValue] = try call.decode(1)
                    try await self?.write(key, path, value, options: opts, sender: call.sender)
                    return []
                },
                DBusMethod("StartNotify") { [weak self] call in
                    try await self?.startNotify(key, path, sender: call.sender ?? "")
                    return []
                },
                DBusMethod("StopNotify") { [weak self] call in
                    try await self?.stopNotify(key, path, sender: call.sender ?? "")
                    return []
                },
                DBusMethod("AcquireWrite", in: [DBusArgument("options", .properties)],
                           out: [DBusArgument("fd", .unixFD), DBusArgument("mtu", .uint16)]) { [weak self] call in
                    guard let self else { throw BlueZErrors.doesNotExist }
                    return try await self.acquire(key, path, write: true, sender: call.sender ?? "")
                },
                DBusMethod("AcquireNotify", in: [DBusArgument("options", .properties)],
                           out: [DBusArgument("fd", .unixFD), DBusArgument("mtu", .uint16)]) { [weak self] call in
                    guard let self else { throw BlueZErrors.doesNotExist }
                    return try await self.acquire(key, path, write: false, sender: call.sender ?? "")
                },
            ],
            properties: characteristicProperties(c, service: service, mtu: mtu))
    }

    /// GattCharacteristic1 properties; `WriteAcquired` exists only with write-without-response
    /// and `NotifyAcquired` only with notify, as bluetoothd's `*_acquired_exists` decide.
    func characteristicProperties(_ c: SimulatedCharacteristic, service: DBusObjectPath, mtu: Int) -> [DBusProperty] {
        var props = [
            DBusProperty("UUID", .string(c.uuid)),
            DBusProperty("Service", .objectPath(service)),
            DBusProperty("Flags", .strings(c.flags)),
            DBusProperty("Value", .bytes(c.value)),
            DBusProperty("Notifying", .boolean(false)),
            DBusProperty("MTU", .uint16(UInt16(clamping: mtu))),
        ]
        if c.flags.contains("write-without-response") { props.append(DBusProperty("WriteAcquired", .boolean(false))) }
        if c.flags.contains("notify") { props.append(DBusProperty("NotifyAcquired", .boolean(false))) }
        return props
    }

    /// The state a GATT call needs; fails as bluetoothd 5.66 does before ServicesResolved
    /// (behaviour 1) or while disconnecting (behaviour 5: `NotConnected`); with the device's faults.
    func gattContext(_ key: DeviceKey, _ path: DBusObjectPath, disconnectingError: DBusError? = nil)
        throws(DBusError) -> (DeviceState, CharState, Faults)
    {
        try state.withLock { (s) throws(DBusError) -> (DeviceState, CharState, Faults) in
            guard s.adapters[key.adapter]!.powered else { throw BlueZErrors.notReady }
            guard let d = s.devices[key], let c = d.chars[path], let p = s.peripherals[key.address] else {
                throw BlueZErrors.doesNotExist
            }
            if d.disconnecting, let disconnectingError { throw disconnectingError }
            guard d.resolved, d.connected else { throw BlueZErrors.notConnectedFailed }
            return (d, c, p.faults)
        }
    }

    /// What a characteristic's flags ask of the link for some kinds of access (bluez
    /// doc/org.bluez.GattCharacteristic.rst `Flags`): `encrypt-<access>` an encrypted link,
    /// `encrypt-authenticated-<access>` and `secure-<access>` an authenticated one.
    enum LinkSecurity: Comparable {
        case none, encrypted, authenticated
    }

    static func security(_ flags: [String], for accesses: [String]) -> LinkSecurity {
        var needs = LinkSecurity.none
        for a in accesses {
            if flags.contains("encrypt-authenticated-" + a) || flags.contains("secure-" + a) { return .authenticated }
            if flags.contains("encrypt-" + a) { needs = .encrypted }
        }
        return needs
    }

    /// bluetoothd's automatic security (docs/bluez.md "Automatic security"; 5.66
    /// `src/shared/att.c` `change_security`, the security level `auto` every client link has):
    /// the device answers an access its link is not secure enough for with an ATT error; bluetoothd
    /// raises the link's security — the kernel pairs Just Works, asking no agent (a pairing the
    /// host starts is not confirmed) — and sends the request again. A pairing that succeeds makes
    /// the device `Paired` and `Bonded` (one PropertiesChanged, as after `Pair`) and the access
    /// goes ahead. One that fails (the device refuses it, ``Faults/refusePairing``; or the access
    /// needs an authenticated link, which Just Works never gives) is tried again with the request
    /// every ``Options/securityRetryInterval``, without end: the call gets no answer until the link
    /// drops (then `Failed: Operation failed`), as on the real stack (bluez issue #21). Every
    /// pairing attempt is recorded as a `SecurityPairing` ``Received``. A bonded device's link is
    /// encrypted without pairing again (the kernel uses the stored key).
    func raiseSecurity(_ key: DeviceKey, epoch: UInt64, needs: LinkSecurity, characteristic: String) async throws(DBusError) {
        guard needs != .none else { return }
        while true {
            let attempt = state.withLock { s -> (justPaired: Bool, path: DBusObjectPath)? in
                guard let d = s.devices[key], d.epoch == epoch, d.connected, let p = s.peripherals[key.address] else { return nil }
                if d.paired { return (false, d.path) }
                let accepted = !p.faults.refusePairing
                s.record(key.address, Received(method: "SecurityPairing", characteristic: characteristic, value: [],
                                               delivered: accepted, sender: nil))
                if accepted { s.devices[key]!.paired = true }
                return (accepted, d.path)
            }
            guard let attempt else { throw BlueZErrors.failed("Operation failed") }
            if attempt.justPaired {
                // 5.66 `new_long_term_key_callback`: device_set_bonded, then bonding_complete's
                // device_set_paired, in one main-loop turn: gdbus sends them as one signal.
                try? connection.setProperties(attempt.path, interface: Self.device1,
                                              ["Paired": .boolean(true), "Bonded": .boolean(true)])
            }
            let secure = state.withLock { $0.devices[key]?.paired ?? false }
            if secure, needs == .encrypted { return }
            if secure, !attempt.justPaired {
                // Encrypted but not authenticated: the kernel's pairing asking for MITM fails
                // (SMP Authentication Requirements) before the device is asked.
                state.withLock {
                    $0.record(key.address, Received(method: "SecurityPairing", characteristic: characteristic, value: [],
                                                    delivered: false, sender: nil))
                }
            }
            let changed = await wait(options.securityRetryInterval) {
                state.withLock { $0.devices[key]?.epoch != epoch || $0.stopped }
            }
            if changed || Task.isCancelled { throw BlueZErrors.failed("Operation failed") }
        }
    }

    /// A silent device never answers: wait until the link changes, then fail as a lost link does.
    func silence(_ key: DeviceKey, epoch: UInt64) async throws(DBusError) {
        _ = await wait(.seconds(3600)) { state.withLock { $0.devices[key]?.epoch != epoch || $0.stopped } }
        throw BlueZErrors.failed("Operation failed")
    }

    func read(_ key: DeviceKey, _ path: DBusObjectPath, options: [String: DBusValue], sender: String?)
        async throws(DBusError) -> [UInt8]
    {
        let uuid = state.withLock { $0.devices[key]?.chars[path]?.uuid }
        try await gate(key, "ReadValue", sender: sender,
                       record: Received(method: "ReadValue", characteristic: uuid, value: [], delivered: true, sender: sender))
        let (d, c, faults) = try gattContext(key, path)
        if faults.silent { try await silence(key, epoch: d.epoch) }
        guard c.flags.contains("read") || Self.security(c.flags, for: ["read"]) != .none
        else { throw BlueZErrors.notPermitted("Read not permitted") }
        try await raiseSecurity(key, epoch: d.epoch, needs: Self.security(c.flags, for: ["read"]), characteristic: c.uuid)
        var value: [UInt8]
        do {
            value = try d.device.handleRead(c.uuid, current: c.value)
        } catch {
            throw BlueZErrors.att(error.code, read: true)
        }
        state.withLock { $0.devices[key]?.chars[path]?.value = value }
        // bluetoothd announces the value after every read, changed or not (behaviour 3).
        try? connection.setProperty(path, interface: Self.char1, "Value", .bytes(value), alwaysEmit: true)
        if let offset = options["offset"]?.integerValue {
            guard offset >= 0, offset <= value.count else { throw BlueZErrors.att(0x07, read: true) }
            value = Array(value[Int(offset)...])
        }
        return value
    }

    func write(_ key: DeviceKey, _ path: DBusObjectPath, _ value: [UInt8], options: [String: DBusValue], sender: String?)
        async throws(DBusError)
    {
        let c0 = state.withLock { $0.devices[key]?.chars[path] }
        let requested = options["type"]?.stringValue
        let type: String
        switch requested {
        case "command"?: type = "command"
        case "request"?, "reliable"?: type = "request"
        case nil: type = (c0?.flags.contains("write") ?? true) || !(c0?.flags.contains("write-without-response") ?? false) ? "request" : "command"
        default: throw BlueZErrors.invalidArguments
        }
        try await gate(key, "WriteValue", sender: sender)
        let (d, c, faults) = try gattContext(key, path)
        if faults.silent, type == "request" { try await silence(key, epoch: d.epoch) }
        func record(_ delivered: Bool) {
            state.withLock {
                $0.record(key.address, Received(method: "WriteValue", characteristic: c.uuid, value: value,
                                            writeType: type, delivered: delivered, sender: sender))
            }
        }
        if type == "command", value.count > d.device.mtu - 3 {
            record(false)
            throw BlueZErrors.failed("Failed to initiate write")
        }
        // The N-th write loses the link (behaviour 5).
        let drop = state.withLock { s -> Bool in
            s.peripherals[key.address]!.writeCount += 1
            return s.peripherals[key.address]!.faults.dropLinkOnWrite == s.peripherals[key.address]!.writeCount
        }
        if drop {
            record(false)
            let epoch = d.epoch
            let loop = connection.loop
            spawn { [weak self] in
                try? await loop.sleep(for: .milliseconds(30))
                guard let self, self.state.withLock({ $0.devices[key]?.epoch == epoch }) else { return }
                self.linkDown(key)
            }
            if type == "request" { throw BlueZErrors.failed("Operation failed") }
            return
        }
        if type == "command" {
            // Not checked against Flags; a device without write-without-response drops it (behaviour 7).
            let accepted = c.flags.contains("write-without-response") && !faults.silent
            record(accepted)
            if accepted { try? d.device.handleWrite(value, to: c.uuid, withResponse: false) }
            return
        }
        guard c.flags.contains("write") || Self.security(c.flags, for: ["write"]) != .none
        else {
            record(false)
            throw BlueZErrors.notPermitted("Write not permitted")
        }
        do {
            try await raiseSecurity(key, epoch: d.epoch, needs: Self.security(c.flags, for: ["write"]), characteristic: c.uuid)
        } catch {
            record(false)
            throw error
        }
        record(true)
        do {
            try d.device.handleWrite(value, to: c.uuid, withResponse: true)
        } catch {
            throw BlueZErrors.att(error.code, read: false)
        }
    }

    func startNotify(_ key: DeviceKey, _ path: DBusObjectPath, sender: String) async throws(DBusError) {
        let uuid = state.withLock { $0.devices[key]?.chars[path]?.uuid }
        try await gate(key, "StartNotify", sender: sender,
                       record: Received(method: "StartNotify", characteristic: uuid, value: [], delivered: true, sender: sender))
        let (d, c, _) = try gattContext(key, path, disconnectingError: BlueZErrors.notConnected)
        if c.notifyIO != nil { throw BlueZErrors.notPermitted("Notify acquired") }
        guard c.flags.contains("notify") || c.flags.contains("indicate") else { throw BlueZErrors.notSupported }
        // The CCCD write that subscribes is an access like any other (5.66 `register_notify_cb`).
        try await raiseSecurity(key, epoch: d.epoch, needs: Self.security(c.flags, for: ["notify", "indicate"]),
                                characteristic: c.uuid)
        let first = state.withLock { s -> Bool in
            // A second StartNotify from the same connection is a no-op (behaviour 2).
            guard s.devices[key]?.chars[path]?.sessions.contains(sender) == false else { return false }
            s.devices[key]?.chars[path]?.sessions.insert(sender)
            return s.devices[key]?.chars[path]?.sessions.count == 1
        }
        if first { try? connection.setProperty(path, interface: Self.char1, "Notifying", .boolean(true)) }
    }

    func stopNotify(_ key: DeviceKey, _ path: DBusObjectPath, sender: String) async throws(DBusError) {
        let uuid = state.withLock { $0.devices[key]?.chars[path]?.uuid }
        try await gate(key, "StopNotify", sender: sender,
                       record: Received(method: "StopNotify", characteristic: uuid, value: [], delivered: true, sender: sender))
        // StopNotify on an acquired characteristic releases the socket (bluetoothd `destroy_sock`).
        if let io = state.withLock({ $0.devices[key]?.chars[path]?.notifyIO }) {
            io.shutdown()
            return
        }
        let last = try state.withLock { (s) throws(DBusError) -> Bool in
            guard s.devices[key]?.chars[path] != nil else { throw BlueZErrors.doesNotExist }
            guard s.devices[key]!.chars[path]!.sessions.remove(sender) != nil else {
                throw BlueZErrors.failed("No notify session started")
            }
            return s.devices[key]!.chars[path]!.sessions.isEmpty
        }
        if last { try? connection.setProperty(path, interface: Self.char1, "Notifying", .boolean(false)) }
    }

    /// A device notified: through the AcquireNotify socket when one is held, else
    /// `PropertiesChanged(Value)` on the characteristic when the link is the current one,
    /// services are resolved and someone has a notify session. The drop/duplicate faults apply
    /// to values that would reach a subscriber.
    func deviceNotified(_ key: DeviceKey, epoch: UInt64, uuid: String, value: [UInt8]) -> Bool {
        let target = state.withLock { s -> (DBusObjectPath, PacketSocket?, Int)? in
            guard let d = s.devices[key], d.epoch == epoch, d.resolved, let faults = s.peripherals[key.address]?.faults else {
                return nil
            }
            guard let (p, c) = d.chars.first(where: {
                $0.value.uuid == uuid && (!$0.value.sessions.isEmpty || $0.value.notifyIO != nil)
            }) else { return nil }
            s.devices[key]!.chars[p]!.value = value
            s.peripherals[key.address]!.notifyCount += 1
            let n = s.peripherals[key.address]!.notifyCount
            let copies = faults.dropNotification == n ? 0 : faults.duplicateNotification == n ? 2 : 1
            return (p, c.notifyIO, copies)
        }
        guard let (path, io, copies) = target else { return false }
        var sent = copies == 0
        for _ in 0..<copies {
            if let io {
                sent = io.trySend(value) == nil
            } else {
                do {
                    try connection.setProperty(path, interface: Self.char1, "Value", .bytes(value), alwaysEmit: true)
                    sent = true
                } catch {
                    sent = false
                }
            }
        }
        return sent
    }
}
