import DBus

extension BlueZSimulator {
    /// Path of the control object (``controlInterface()``).
    public static let controlPath: DBusObjectPath = "/org/gatt2mqtt/Simulator"

    /// Notifies `value` from a device's characteristic as if the device sent it, on its link
    /// (through whichever adapter has it); returns whether it went out (connected, resolved,
    /// someone subscribed).
    @discardableResult
    public func notify(_ address: String, characteristic uuid: String, _ value: [UInt8]) -> Bool {
        let a = address.uppercased()
        let target = state.withLock { s -> (DeviceKey, UInt64)? in
            let key = DeviceKey(adapter: s.peripherals[a]?.link ?? firstAdapter, address: a)
            return s.devices[key].map { (key, $0.epoch) }
        }
        guard let (key, epoch) = target else { return false }
        return deviceNotified(key, epoch: epoch, uuid: SimUUID.full(uuid), value: value)
    }

    /// `org.gatt2mqtt.Simulator1`: the fault-injection API over D-Bus, for tests and demos that
    /// run the emulator in another process (`gatt2mqtt simulate`). `SetRSSI(address, rssi)` is
    /// ``setRSSI(_:_:adapter:)`` with 0 for nil (0 dBm is no realistic RSSI). `SetInRange`,
    /// `SetRSSI` and `SetAdapterPowered` act on the first adapter; their `…On` forms take the
    /// adapter's name first (`SetInRangeOn(s adapter, s address, b in_range)`,
    /// `SetRSSIOn(s adapter, s address, n rssi)`, `SetAdapterPoweredOn(s adapter, b powered)`).
    /// The others are about the device, whichever adapter sees it (`DropLink` drops its one
    /// link). `IncomingPairing(s address) → s` is ``incomingPairing(_:adapter:)`` on the first
    /// adapter: `accepted`, `rejected: <error name>` or `no agent`. Errors are
    /// `org.gatt2mqtt.Simulator.Error.UnknownDevice` / `.UnknownAdapter` /
    /// `.InvalidArguments`.
    func controlInterface() -> DBusInterface {
        @Sendable func device(_ call: DBusMethodCall, at index: Int = 0) throws -> String {
            let a: String = try call.decode(index)
            return a.uppercased()
        }
        @Sendable func mapped(_ e: BlueZSimulatorError) -> DBusError {
            switch e {
            case let .unknownDevice(a): return .remote(name: "org.gatt2mqtt.Simulator.Error.UnknownDevice", message: "no device \(a)")
            case let .unknownAdapter(n): return .remote(name: "org.gatt2mqtt.Simulator.Error.UnknownAdapter", message: "no adapter \(n)")
            default: return .remote(name: "org.gatt2mqtt.Simulator.Error.Failed", message: e.description)
            }
        }
        /// The RSSI argument at `index`, nil for 0; outside −127…20 is `InvalidArguments`.
        @Sendable func rssi(_ call: DBusMethodCall, at index: Int) throws -> Int16? {
            let rssi: Int16 = try call.decode(index)
            guard rssi == 0 || (-127...20).contains(rssi) else {
                throw DBusError.remote(name: "org.gatt2mqtt.Simulator.Error.InvalidArguments",
                                       message: "RSSI \(rssi) is not in -127…20 dBm (0: the device's own)")
            }
            return rssi == 0 ? nil : rssi
        }
        return DBusInterface("org.gatt2mqtt.Simulator1", methods: [
            DBusMethod("DropLink", in: [DBusArgument("address", .string)]) { [weak self] call in
                do { try self?.dropLink(try device(call)) } catch let e as BlueZSimulatorError { throw mapped(e) }
                return []
            },
            DBusMethod("SetInRange", in: [DBusArgument("address", .string), DBusArgument("in_range", .boolean)]) { [weak self] call in
                do { try self?.setInRange(try device(call), try call.decode(1)) } catch let e as BlueZSimulatorError { throw mapped(e) }
                return []
            },
            DBusMethod("SetInRangeOn", in: [DBusArgument("adapter", .string), DBusArgument("address", .string),
                                            DBusArgument("in_range", .boolean)]) { [weak self] call in
                do {
                    try self?.setInRange(try device(call, at: 1), try call.decode(2), adapter: try call.decode(0))
                } catch let e as BlueZSimulatorError { throw mapped(e) }
                return []
            },
            DBusMethod("SetRSSI", in: [DBusArgument("address", .string), DBusArgument("rssi", .int16)]) { [weak self] call in
                let dbm = try rssi(call, at: 1)
                do { try self?.setRSSI(try device(call), dbm) } catch let e as BlueZSimulatorError { throw mapped(e) }
                return []
            },
            DBusMethod("SetRSSIOn", in: [DBusArgument("adapter", .string), DBusArgument("address", .string),
                                         DBusArgument("rssi", .int16)]) { [weak self] call in
                let dbm = try rssi(call, at: 2)
                do {
                    try self?.setRSSI(try device(call, at: 1), dbm, adapter: try call.decode(0))
                } catch let e as BlueZSimulatorError { throw mapped(e) }
                return []
            },
            DBusMethod("SetFaults", in: [DBusArgument("address", .string), DBusArgument("faults", .properties)]) { [weak self] call in
                let raw: [String: DBusValue] = try call.decode(1)
                var change: [(inout Faults) -> Void] = []
                for (k, v) in raw {
                    switch (k, v) {
                    case let ("RefuseConnections", .boolean(b)): change.append { $0.refuseConnections = b }
                    case let ("RefusePairing", .boolean(b)): change.append { $0.refusePairing = b }
                    case let ("Silent", .boolean(b)): change.append { $0.silent = b }
                    case let ("DropLinkOnWrite", .uint32(n)): change.append { $0.dropLinkOnWrite = n == 0 ? nil : Int(n) }
                    case let ("ReplyDelayMs", .uint32(ms)): change.append { $0.replyDelay = .milliseconds(Int64(ms)) }
                    case let ("DropNotification", .uint32(n)): change.append { $0.dropNotification = n == 0 ? nil : Int(n) }
                    case let ("DuplicateNotification", .uint32(n)):
                        change.append { $0.duplicateNotification = n == 0 ? nil : Int(n) }
                    default:
                        throw DBusError.remote(name: "org.gatt2mqtt.Simulator.Error.InvalidArguments",
                                               message: "unknown fault \(k) of type \(v.signature)")
                    }
                }
                do {
                    try self?.updateFaults(try device(call)) { f in for c in change { c(&f) } }
                } catch let e as BlueZSimulatorError { throw mapped(e) }
                return []
            },
            DBusMethod("InjectError", in: [DBusArgument("address", .string), DBusArgument("method", .string),
                                           DBusArgument("name", .string), DBusArgument("message", .string)]) { [weak self] call in
                let method: String = try call.decode(1)
                let name: String = try call.decode(2)
                let message: String = try call.decode(3)
                do {
                    try self?.updateFaults(try device(call)) { f in
                        f.errors[method] = name.isEmpty ? nil : InjectedError(name: name, message: message)
                    }
                } catch let e as BlueZSimulatorError { throw mapped(e) }
                return []
            },
            DBusMethod("SetAdapterPowered", in: [DBusArgument("powered", .boolean)]) { [weak self] call in
                self?.setAdapterPowered(try call.decode(0))
                return []
            },
            DBusMethod("SetAdapterPoweredOn", in: [DBusArgument("adapter", .string), DBusArgument("powered", .boolean)]) {
                [weak self] call in
                do { try self?.setAdapterPowered(try call.decode(1), adapter: try call.decode(0)) } catch let e as BlueZSimulatorError {
                    throw mapped(e)
                }
                return []
            },
            DBusMethod("Notify", in: [DBusArgument("address", .string), DBusArgument("uuid", .string),
                                      DBusArgument("value", .array(.byte))], out: [DBusArgument("sent", .boolean)]) { [weak self] call in
                let sent = self?.notify(try device(call), characteristic: try call.decode(1), try call.decode(2)) ?? false
                return [.boolean(sent)]
            },
            DBusMethod("IncomingPairing", in: [DBusArgument("address", .string)], out: [DBusArgument("outcome", .string)]) {
                [weak self] call in
                guard let self else { return [.string("no agent")] }
                do {
                    switch try await self.incomingPairing(try device(call)) {
                    case .accepted: return [.string("accepted")]
                    case let .rejected(name): return [.string("rejected: " + name)]
                    case .noAgent: return [.string("no agent")]
                    }
                } catch let e as BlueZSimulatorError { throw mapped(e) }
            },
            DBusMethod("Received", in: [DBusArgument("address", .string)],
                       out: [DBusArgument("calls", .array(.properties))]) { [weak self] call in
                let records = self?.received(try device(call)) ?? []
                return [.array(element: .properties, records.map { r in
                    var d: [String: DBusValue] = ["Method": .string(r.method), "Value": .bytes(r.value), "Delivered": .boolean(r.delivered)]
                    if let c = r.characteristic { d["Characteristic"] = .string(c) }
                    if let t = r.writeType { d["Type"] = .string(t) }
                    if let s = r.sender { d["Sender"] = .string(s) }
                    return .properties(d)
                })]
            },
        ])
    }
}
