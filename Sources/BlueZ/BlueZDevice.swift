import DBus

/// A device known to BlueZ (`org.bluez.Device1`, bluez doc/org.bluez.Device.rst). A value that
/// names the device; every operation reads the client's cache afresh.
public struct BlueZDevice: Sendable, Hashable {
    /// e.g. `/org/bluez/hci0/dev_C0_FF_EE_00_00_01`.
    public let path: DBusObjectPath
    /// Upper-case `C0:FF:EE:00:00:01` form.
    public let address: String
}

/// A device's link state (`Connected`, `ServicesResolved`).
public struct ConnectionState: Sendable, Equatable {
    /// `Device1.Connected`: the link is up (the only sign of a dropped link on 5.66, behaviour 8).
    public var connected: Bool
    /// `Device1.ServicesResolved`: GATT calls work only while this is true (behaviour 1).
    public var servicesResolved: Bool
    public init(connected: Bool, servicesResolved: Bool) {
        self.connected = connected
        self.servicesResolved = servicesResolved
    }
}

/// A characteristic found by UUID under a device (`org.bluez.GattCharacteristic1`). Its path is
/// valid for the current connection only (spec/bluez.md: re-resolve after every reconnect).
public struct BlueZCharacteristic: Sendable, Hashable {
    /// e.g. `…/dev_…/service000a/char000b`; valid until the link drops.
    public let path: DBusObjectPath
    public let uuid: BluetoothUUID
    /// BlueZ `Flags` ("read", "write", "write-without-response", "notify", …).
    public let flags: [String]
    /// The ATT MTU BlueZ reports (`MTU`), 23 when absent.
    public let mtu: Int
}

/// How to write (`WriteValue` option `type`).
public enum WriteType: String, Sendable {
    /// ATT Write Request: acknowledged, errors reported.
    case request
    /// ATT Write Command: unacknowledged; at most MTU − 3 bytes per command (behaviour 7).
    case command

    /// `WriteValue`'s options (`{"type": <raw value>}`), built once: a dictionary literal per
    /// write hashed, sorted and boxed its one entry every time.
    var options: DBusValue { self == .request ? Self.requestOptions : Self.commandOptions }
    private static let requestOptions = DBusValue.properties(["type": .string(WriteType.request.rawValue)])
    private static let commandOptions = DBusValue.properties(["type": .string(WriteType.command.rawValue)])
}

extension BlueZClient {
    /// The device with `address` under `adapter` (any adapter when nil), as cached now.
    public func device(_ address: String, adapter: BlueZAdapter? = nil) -> BlueZDevice? {
        devices(address).first { adapter == nil || $0.path.parent == adapter?.path }
    }

    /// The device with `address` under every adapter that knows it, as cached now (by path).
    public func devices(_ address: String) -> [BlueZDevice] {
        // Matched first, then sorted: the cache holds every service, characteristic and
        // descriptor too, and the cluster asks at every tick.
        let wanted = address.uppercased()
        return objects.compactMap { path, ifaces -> BlueZDevice? in
            guard let a = ifaces[Self.device1]?["Address"]?.stringValue, a.uppercased() == wanted else { return nil }
            return BlueZDevice(path: path, address: wanted)
        }.sorted { $0.path < $1.path }
    }

    /// Waits for a device to appear in the cache (e.g. while a scan runs).
    public func waitForDevice(_ address: String, adapter: BlueZAdapter? = nil, timeout: Duration) async throws(BlueZError)
        -> BlueZDevice
    {
        if let d = device(address, adapter: adapter) { return d }
        let wanted = address.uppercased()
        let adapterPath = adapter?.path
        return try await waitFor("device \(wanted) to appear", timeout: timeout) { objs in
            objs.sorted { $0.key < $1.key }.first { path, i in
                i[Self.device1]?["Address"]?.stringValue?.uppercased() == wanted && (adapterPath == nil || path.parent == adapterPath)
            }.map { BlueZDevice(path: $0.key, address: wanted) }
        }
    }

    /// The device's current link state from the cache.
    public func connectionState(_ device: BlueZDevice) -> ConnectionState {
        let p = object(device.path)?[Self.device1]
        return ConnectionState(connected: p?["Connected"]?.boolValue ?? false,
                               servicesResolved: p?["ServicesResolved"]?.boolValue ?? false)
    }

    /// The link state now and after every change, until the device is removed or the client closes.
    public func connectionStates(_ device: BlueZDevice) -> AsyncStream<ConnectionState> {
        let (events, _, remove) = listen()
        let (stream, continuation) = AsyncStream<ConnectionState>.makeStream(bufferingPolicy: .bufferingNewest(64))
        continuation.yield(connectionState(device))
        let task = spawn { [weak self] in
            for await e in events {
                switch e {
                case let .changed(p, i, changed, _) where p == device.path && i == Self.device1:
                    if changed["Connected"] != nil || changed["ServicesResolved"] != nil, let self {
                        continuation.yield(self.connectionState(device))
                    }
                case let .removed(p, i) where p == device.path && i.contains(Self.device1):
                    continuation.finish()
                case .closed: continuation.finish()
                default: break
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in
            task.cancel()
            remove()
        }
        return stream
    }

    /// Connects (or adopts a link BlueZ already has) and waits for `ServicesResolved=true`
    /// (behaviour 1: Connect() returns before it). Fails with ``BlueZError/connectionFailed(_:)``
    /// if the link drops meanwhile, ``BlueZError/timeout(_:)`` after `timeout`.
    public func connect(_ device: BlueZDevice, timeout: Duration = .seconds(30)) async throws(BlueZError) {
        let start = ContinuousClock.now
        let state = connectionState(device)
        if state.connected, state.servicesResolved { return }
        // Listen before Connect so a Connected=false after it is never missed.
        let listener = listen()
        if !state.connected {
            do {
                try await call(device.path, Self.device1, "Connect", timeout: timeout)
            } catch {
                listener.remove()
                throw error
            }
        }
        let remaining = max(.milliseconds(1), timeout - (ContinuousClock.now - start))
        let path = device.path
        _ = try await waitFor("ServicesResolved on \(device.address)", timeout: remaining, listener: listener, failure: { objs in
            objs[path]?[Self.device1] == nil ? .doesNotExist("device \(device.address) was removed") : nil
        }, failed: { event in
            if case let .changed(p, i, changed, _) = event, p == path, i == Self.device1, changed["Connected"]?.boolValue == false {
                return .connectionFailed("link to \(device.address) lost while resolving services")
            }
            return nil
        }) { objs in
            objs[path]?[Self.device1]?["ServicesResolved"]?.boolValue == true ? true : nil
        }
    }

    /// Disconnects and waits until `Connected=false` is seen.
    public func disconnect(_ device: BlueZDevice, timeout: Duration = .seconds(10)) async throws(BlueZError) {
        do {
            try await call(device.path, Self.device1, "Disconnect", timeout: timeout)
        } catch .notConnected {
            return
        }
        let path = device.path
        _ = try await waitFor("Connected=false on \(device.address)", timeout: timeout) { objs in
            objs[path]?[Self.device1]?["Connected"]?.boolValue == true ? nil : true
        }
    }

    /// Pairs (`Device1.Pair`). While the call is in flight the device is one this client is
    /// pairing (``isPairing(_:)``), the only kind of device its pairing agent accepts
    /// (``registerPairingAgent(path:)``); bluetoothd hands the requests of a `Pair` to the agent
    /// of the client that called it (docs/bluez.md, "Pairing agent").
    public func pair(_ device: BlueZDevice, timeout: Duration = .seconds(60)) async throws(BlueZError) {
        store.withLock { $0.pairing[device.path, default: 0] += 1 }
        defer {
            store.withLock { s in
                let n = (s.pairing[device.path] ?? 1) - 1
                s.pairing[device.path] = n > 0 ? n : nil
            }
        }
        try await call(device.path, Self.device1, "Pair", timeout: timeout)
    }

    /// Whether a `Pair` call of this client for the device at `path` is in flight now.
    public func isPairing(_ path: DBusObjectPath) -> Bool {
        store.withLock { $0.pairing[path] != nil }
    }

    /// Sets `Trusted`.
    public func setTrusted(_ device: BlueZDevice, _ trusted: Bool) async throws(BlueZError) {
        try await setProperty(device.path, Self.device1, "Trusted", .boolean(trusted))
    }

    /// Registers an agent object path with `AgentManager1` (`RegisterAgent`) for this client's
    /// own pairings. It does not ask to be the default agent (`RequestDefaultAgent`): bluetoothd
    /// gives the requests of a `Pair` to the caller's agent, default or not, and the default
    /// agent is the one that answers pairings other devices start (docs/bluez.md, "Pairing
    /// agent"). The agent object itself must be exported by the caller.
    public func registerAgent(path: DBusObjectPath, capability: String = "NoInputNoOutput") async throws(BlueZError) {
        try await call("/org/bluez", "org.bluez.AgentManager1", "RegisterAgent", [.objectPath(path), .string(capability)])
    }

    /// The D-Bus error the pairing agent answers with for a device this client is not pairing.
    public static let agentRejected = "org.bluez.Error.Rejected"

    /// Exports an `org.bluez.Agent1` at `path` on this client's connection and registers it
    /// (not as the default) with capability `NoInputNoOutput` — what a headless client needs to
    /// pair (spec/bluez.md behaviour 9). It says yes only for a device whose ``pair(_:timeout:)``
    /// from this client is in flight: `RequestConfirmation` and `RequestAuthorization` succeed,
    /// `RequestPinCode` answers "0000", `RequestPasskey` 0, `DisplayPinCode`/`DisplayPasskey`
    /// succeed, and `AuthorizeService` succeeds. Every one of these for any other device —
    /// a pairing or a service connection another device starts — fails with
    /// `org.bluez.Error.Rejected` (``agentRejected``). `Release` and `Cancel` succeed.
    public func registerPairingAgent(path: DBusObjectPath = "/gatt2mqtt/agent") async throws(BlueZError) {
        let ok: @Sendable (DBusMethodCall) async throws -> [DBusValue] = { _ in [] }
        // The answer for a request about the device in argument 0, or Rejected.
        let answer: @Sendable (DBusMethodCall, [DBusValue]) throws -> [DBusValue] = { [weak self] call, reply in
            let device: DBusObjectPath = try call.decode(0)
            guard let self, self.isPairing(device) else {
                throw DBusError.remote(name: BlueZClient.agentRejected,
                                       message: "Rejected: \(device) is not being paired by this client")
            }
            return reply
        }
        let agent = DBusInterface("org.bluez.Agent1", methods: [
            DBusMethod("Release", handler: ok),
            DBusMethod("RequestPinCode", in: [DBusArgument("device", .objectPath)], out: [DBusArgument("pincode", .string)]) { call in
                try answer(call, [.string("0000")])
            },
            DBusMethod("DisplayPinCode", in: [DBusArgument("device", .objectPath), DBusArgument("pincode", .string)]) { call in
                try answer(call, [])
            },
            DBusMethod("RequestPasskey", in: [DBusArgument("device", .objectPath)], out: [DBusArgument("passkey", .uint32)]) { call in
                try answer(call, [.uint32(0)])
            },
            DBusMethod("DisplayPasskey", in: [DBusArgument("device", .objectPath), DBusArgument("passkey", .uint32),
                                              DBusArgument("entered", .uint16)]) { call in
                try answer(call, [])
            },
            DBusMethod("RequestConfirmation", in: [DBusArgument("device", .objectPath), DBusArgument("passkey", .uint32)]) { call in
                try answer(call, [])
            },
            DBusMethod("RequestAuthorization", in: [DBusArgument("device", .objectPath)]) { call in
                try answer(call, [])
            },
            DBusMethod("AuthorizeService", in: [DBusArgument("device", .objectPath), DBusArgument("uuid", .string)]) { call in
                try answer(call, [])
            },
            DBusMethod("Cancel", handler: ok),
        ])
        do {
            try connection.export(path, interfaces: [agent])
        } catch {
            throw BlueZError(error, context: "exporting the agent at \(path)")
        }
        try await registerAgent(path: path, capability: "NoInputNoOutput")
    }

    // MARK: GATT

    /// Finds a characteristic by UUID (`2A37`, 32/128-bit, `GP-0072`) under the device, optionally
    /// within a service UUID. Fails with ``BlueZError/notConnected(_:)`` before ServicesResolved
    /// and ``BlueZError/notFound(_:)`` when absent.
    public func characteristic(_ uuid: String, service: String? = nil, on device: BlueZDevice) throws(BlueZError)
        -> BlueZCharacteristic
    {
        guard let wanted = BluetoothUUID(uuid) else { throw .invalidArguments("\"\(uuid)\" is not a UUID") }
        var wantedService: BluetoothUUID?
        if let service {
            guard let s = BluetoothUUID(service) else { throw .invalidArguments("\"\(service)\" is not a UUID") }
            wantedService = s
        }
        let objs = objects
        guard objs[device.path]?[Self.device1]?["ServicesResolved"]?.boolValue == true else {
            throw .notConnected("services of \(device.address) are not resolved")
        }
        let found = objs.sorted { $0.key < $1.key }.first { path, ifaces in
            guard path.isDescendant(of: device.path), let c = ifaces[Self.char1],
                  c["UUID"]?.stringValue?.lowercased() == wanted.uuidString else { return false }
            guard let wantedService else { return true }
            let sp = c["Service"]?.stringValue.map { DBusObjectPath($0) } ?? path.parent
            return sp.flatMap { objs[$0]?[Self.service1]?["UUID"]?.stringValue?.lowercased() } == wantedService.uuidString
        }
        guard let (path, ifaces) = found, let c = ifaces[Self.char1] else {
            throw .notFound("no characteristic \(uuid) on \(device.address)")
        }
        return BlueZCharacteristic(path: path, uuid: wanted, flags: (try? c["Flags"]?.decode(as: [String].self)) ?? [],
                                   mtu: c["MTU"]?.integerValue.map(Int.init) ?? 23)
    }

    /// Reads a value (`ReadValue`); the `PropertiesChanged` echo it causes never reaches
    /// notification streams (behaviour 3).
    public func read(_ characteristic: BlueZCharacteristic, timeout: Duration? = nil) async throws(BlueZError) -> [UInt8] {
        let path = characteristic.path
        store.withLock { $0.echo[path, default: ReadEchoFilter()].beginRead() }
        var result: [UInt8]?
        defer {
            let (released, targets) = store.withLock { s -> ([[UInt8]], [AsyncStream<[UInt8]>.Continuation]) in
                (s.echo[path, default: ReadEchoFilter()].endRead(result), Array((s.notify[path] ?? [:]).values))
            }
            for v in released { for t in targets { t.yield(v) } }
        }
        let reply = try await call(path, Self.char1, "ReadValue", [.properties([:])], timeout: timeout)
        guard let bytes = reply.body.first?.bytesValue else {
            throw .failed(name: "org.bluez.Error.Failed", message: "ReadValue answered \(reply.signature)")
        }
        result = bytes
        return bytes
    }

    /// Writes a value. Commands longer than MTU − 3 are split into MTU − 3 chunks when `split` is
    /// true (else BlueZ refuses them, behaviour 7); requests go as one (BlueZ uses long writes).
    public func write(_ value: [UInt8], to characteristic: BlueZCharacteristic, type: WriteType = .request,
                      split: Bool = true, timeout: Duration? = nil) async throws(BlueZError)
    {
        let chunk = max(1, characteristic.mtu - 3)
        if type == .command, split, value.count > chunk {
            var offset = 0
            while offset < value.count {
                let part = Array(value[offset..<min(value.count, offset + chunk)])
                try await call(characteristic.path, Self.char1, "WriteValue",
                               [.bytes(part), WriteType.command.options], timeout: timeout)
                offset += chunk
            }
            return
        }
        try await call(characteristic.path, Self.char1, "WriteValue",
                       [.bytes(value), type.options], timeout: timeout)
    }

    /// ``write(_:to:type:split:timeout:)`` with its outcome handed to `completion` (once, on the
    /// connection's loop thread, or at once when the call cannot be sent) instead of awaited: a
    /// write without commands split into chunks (the bridge's GATT operations, whose caller runs on
    /// that loop) costs no task and no continuation. The chunks of a split command go one after
    /// the other, each sent from the completion of the one before.
    public func write(_ value: [UInt8], to characteristic: BlueZCharacteristic, type: WriteType = .request,
                      split: Bool = true, timeout: Duration? = nil,
                      completion: @escaping @Sendable (Result<Void, BlueZError>) -> Void)
    {
        let chunk = max(1, characteristic.mtu - 3)
        var parts: [[UInt8]] = [value]
        if type == .command, split, value.count > chunk {
            parts = stride(from: 0, to: value.count, by: chunk).map { Array(value[$0..<min(value.count, $0 + chunk)]) }
        }
        writeParts(parts[...], to: characteristic.path, type: type, timeout: timeout, completion: completion)
    }

    private func writeParts(_ parts: ArraySlice<[UInt8]>, to path: DBusObjectPath, type: WriteType, timeout: Duration?,
                            completion: @escaping @Sendable (Result<Void, BlueZError>) -> Void)
    {
        guard let part = parts.first else { return completion(.success(())) }
        call(path, Self.char1, "WriteValue", [.bytes(part), type.options], timeout: timeout) { result in
            switch result {
            case .success: self.writeParts(parts.dropFirst(), to: path, type: type, timeout: timeout, completion: completion)
            case let .failure(error): completion(.failure(error))
            }
        }
    }

    /// Subscribes to notifications: the stream yields device notifications only and finishes when
    /// the link drops, the characteristic goes away or the client closes.
    ///
    /// With `.automatic` (the default) it uses `AcquireNotify` where the characteristic offers it
    /// (values read from the socket, see ``acquireNotify(_:timeout:)``), else `StartNotify`
    /// (values from `PropertiesChanged(Value)`, read echoes filtered, behaviour 3; the local
    /// subscription exists before StartNotify is sent). `.startNotify` forces the latter.
    public func notifications(_ characteristic: BlueZCharacteristic, using method: NotifyMethod = .automatic)
        async throws(BlueZError) -> AsyncStream<[UInt8]>
    {
        try await notifications(characteristic, using: method, onValue: nil)
    }

    /// The same, with each value handed to `onValue` as it arrives instead of through the stream
    /// (which then only finishes when the session ends; keep it referenced, dropping it ends the
    /// session). Through an AcquireNotify socket `onValue` runs on the client's loop thread
    /// (which reads the socket), with no hand-off; through StartNotify a task forwards the values.
    public func notifications(_ characteristic: BlueZCharacteristic, using method: NotifyMethod = .automatic,
                              onValue: (@Sendable ([UInt8]) -> Void)?) async throws(BlueZError) -> AsyncStream<[UInt8]>
    {
        if method == .acquireNotify || (method == .automatic && offersAcquireNotify(characteristic)) {
            do {
                return try await acquireNotify(characteristic, onValue: onValue).values
            } catch {
                // Someone holds a StartNotify session: join it the classic way.
                guard method == .automatic, case .inProgress = error else { throw error }
            }
        }
        let path = characteristic.path
        let (stream, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let id = store.withLock { s -> UInt64? in
            guard !s.closed else { return nil }
            let id = s.id()
            s.notify[path, default: [:]][id] = continuation
            return id
        }
        guard let id else { throw .bus(.disconnected) }
        continuation.onTermination = { [weak self] _ in
            _ = self?.store.withLock { $0.notify[path]?.removeValue(forKey: id) }
        }
        do {
            try await call(path, Self.char1, "StartNotify")
        } catch {
            continuation.finish()
            throw error
        }
        guard let onValue else { return stream }
        let (ended, endedContinuation) = AsyncStream<[UInt8]>.makeStream()
        let forwarder = spawn {
            for await v in stream { onValue(v) }
            endedContinuation.finish()
        }
        endedContinuation.onTermination = { _ in forwarder.cancel() }
        return ended
    }

    /// Ends this connection's notify session and finishes local streams of it: an acquired
    /// socket is closed (that is the release), otherwise `StopNotify` is sent.
    public func stopNotifications(_ characteristic: BlueZCharacteristic) async throws(BlueZError) {
        let (streams, sockets) = store.withLock { s in
            (s.notify.removeValue(forKey: characteristic.path).map { Array($0.values) } ?? [],
             s.acquired.values.filter { $0.0 == characteristic.path }.map(\.1))
        }
        for c in streams { c.finish() }
        for socket in sockets { socket.shutdown() }
        if !sockets.isEmpty, streams.isEmpty { return }
        try await call(characteristic.path, Self.char1, "StopNotify")
    }
}
