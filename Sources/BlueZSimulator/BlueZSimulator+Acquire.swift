import DBus
import PacketSocket

extension BlueZSimulator {
    /// `AcquireWrite` / `AcquireNotify` (bluez doc/org.bluez.GattCharacteristic.rst; checks in
    /// the order of bluetoothd 5.66 `characteristic_acquire_*`): not resolved → `Failed: Not
    /// connected`; already acquired → `NotPermitted: Write acquired` / `Notify acquired`; a
    /// StartNotify session on the characteristic → `InProgress` (AcquireNotify); flag missing
    /// (write-without-response / notify) → `NotSupported`. Answers `(h fd, q mtu)`: one end of a
    /// `SOCK_SEQPACKET` socketpair. While acquired, `WriteAcquired`/`NotifyAcquired` (and
    /// `Notifying`) are true; closing the client end releases, and link loss closes the socket.
    func acquire(_ key: DeviceKey, _ path: DBusObjectPath, write: Bool, sender: String) async throws(DBusError)
        -> [DBusValue]
    {
        let method = write ? "AcquireWrite" : "AcquireNotify"
        let uuid = state.withLock { $0.devices[key]?.chars[path]?.uuid }
        try await gate(key, method, sender: sender,
                       record: Received(method: method, characteristic: uuid, value: [], delivered: true, sender: sender))
        let (d, c, _) = try gattContext(key, path)
        if write {
            guard c.writeIO == nil else { throw BlueZErrors.notPermitted("Write acquired") }
            guard c.flags.contains("write-without-response") else { throw BlueZErrors.notSupported }
        } else {
            guard c.notifyIO == nil else { throw BlueZErrors.notPermitted("Notify acquired") }
            guard c.sessions.isEmpty else { throw BlueZErrors.inProgress }
            guard c.flags.contains("notify") else { throw BlueZErrors.notSupported }
            // bluetoothd answers once the CCCD write that subscribes went through (5.66
            // `register_notify_io_cb`): raising the link's security first if it must.
            try await raiseSecurity(key, epoch: d.epoch, needs: Self.security(c.flags, for: ["notify"]), characteristic: c.uuid)
        }
        guard let (io, theirs) = PacketSocket.pair() else { throw BlueZErrors.failed("socketpair failed") }
        // Our copy of the client's end closes when this value goes (the reply carries a dup).
        let clientEnd = DBusUnixFD(taking: theirs)
        let installed = state.withLock { s -> Bool in
            guard let now = s.devices[key], now.epoch == d.epoch, now.resolved, let cs = now.chars[path] else { return false }
            if write {
                guard cs.writeIO == nil else { return false }
                s.devices[key]!.chars[path]!.writeIO = io
            } else {
                guard cs.notifyIO == nil, cs.sessions.isEmpty else { return false }
                s.devices[key]!.chars[path]!.notifyIO = io
            }
            return true
        }
        guard installed else {
            io.shutdown()  // never read: closes it
            throw BlueZErrors.failed("Not connected")
        }
        if write {
            try? connection.setProperty(path, interface: Self.char1, "WriteAcquired", .boolean(true))
            // Packets are handed to the device in order, as command writes.
            let (packets, feed) = AsyncStream<[UInt8]>.makeStream()
            spawn { [weak self] in
                for await v in packets {
                    try? await self?.write(key, path, v, options: ["type": .string("command")], sender: "socket")
                }
            }
            read(io, onPacket: { feed.yield($0) }, onClose: { [weak self] in
                feed.finish()
                self?.released(key, path, io, write: true)
            })
        } else {
            try? connection.setProperties(path, interface: Self.char1, ["NotifyAcquired": .boolean(true), "Notifying": .boolean(true)])
            read(io, onPacket: { _ in }, onClose: { [weak self] in self?.released(key, path, io, write: false) })
        }
        return [.unixFD(clientEnd), .uint16(UInt16(clamping: d.device.mtu))]
    }

    /// Reads the emulator's end of an acquired socket on the emulator's loop.
    func read(_ io: PacketSocket, onPacket: @escaping @Sendable ([UInt8]) -> Void, onClose: @escaping @Sendable () -> Void) {
        io.read(on: connection.loop, onPacket: onPacket, onClose: onClose)
    }

    /// An acquired socket closed (client released it, StopNotify, link loss, emulator stopped).
    func released(_ key: DeviceKey, _ path: DBusObjectPath, _ io: PacketSocket, write: Bool) {
        let change = state.withLock { s -> Bool? in
            guard let c = s.devices[key]?.chars[path] else { return nil }
            if write {
                guard c.writeIO === io else { return nil }
                s.devices[key]!.chars[path]!.writeIO = nil
            } else {
                guard c.notifyIO === io else { return nil }
                s.devices[key]!.chars[path]!.notifyIO = nil
            }
            return !c.sessions.isEmpty
        }
        guard let stillNotifying = change, !state.withLock({ $0.stopped }) else { return }
        if write {
            try? connection.setProperty(path, interface: Self.char1, "WriteAcquired", .boolean(false))
        } else {
            try? connection.setProperties(path, interface: Self.char1,
                                          ["NotifyAcquired": .boolean(false), "Notifying": .boolean(stillNotifying)])
        }
    }

    /// Whether a characteristic's AcquireWrite / AcquireNotify socket is held now, under an
    /// adapter (nil: the first).
    public func isAcquired(_ address: String, characteristic uuid: String, write: Bool, adapter: String? = nil) -> Bool {
        let full = SimUUID.full(uuid)
        let key = DeviceKey(adapter: adapter ?? firstAdapter, address: address.uppercased())
        return state.withLock { s in
            guard let c = s.devices[key]?.chars.values.first(where: { $0.uuid == full }) else { return false }
            return (write ? c.writeIO : c.notifyIO) != nil
        }
    }
}
