import DBus
import Synchronization

/// An adapter (`org.bluez.Adapter1`, bluez doc/org.bluez.Adapter.rst).
public struct BlueZAdapter: Sendable, Hashable {
    /// e.g. `/org/bluez/hci0`.
    public let path: DBusObjectPath
    /// The last path element, e.g. `hci0`.
    public var name: String { String(path.rawValue.split(separator: "/").last ?? "") }

    /// The adapter BlueZ calls `name` (`hci1` → `/org/bluez/hci1`), whether or not it is there
    /// now: calls on it fail until it appears.
    public init(name: String) { path = DBusObjectPath("/org/bluez/\(name)") }

    package init(path: DBusObjectPath) { self.path = path }
}

/// A device seen while scanning (`Device1` properties; spec/bluez.md "Objects a client sees").
public struct DiscoveredDevice: Sendable, Equatable {
    public var path: DBusObjectPath
    public var address: String
    public var name: String?
    /// Only while discovering (behaviour 4).
    public var rssi: Int16?
    public var uuids: [String]
    public var manufacturerData: [UInt16: [UInt8]]
    public var serviceData: [String: [UInt8]]
    public var connected: Bool
    public var paired: Bool

    init?(path: DBusObjectPath, _ props: [String: DBusValue]) {
        guard let address = props["Address"]?.stringValue else { return nil }
        self.path = path
        self.address = address
        name = props["Name"]?.stringValue ?? props["Alias"]?.stringValue.flatMap { $0 == address.replacingOccurrences(of: ":", with: "-") ? nil : $0 }
        if case let .int16(r)? = props["RSSI"]?.unwrapped { rssi = r } else { rssi = nil }
        uuids = (try? props["UUIDs"]?.decode(as: [String].self)) ?? []
        var md: [UInt16: [UInt8]] = [:]
        if case let .dictionary(_, _, entries)? = props["ManufacturerData"]?.unwrapped {
            for e in entries { if case let .uint16(k) = e.key, let v = e.value.bytesValue { md[k] = v } }
        }
        manufacturerData = md
        var sd: [String: [UInt8]] = [:]
        if case let .dictionary(_, _, entries)? = props["ServiceData"]?.unwrapped {
            for e in entries { if let k = e.key.stringValue, let v = e.value.bytesValue { sd[k] = v } }
        }
        serviceData = sd
        connected = props["Connected"]?.boolValue ?? false
        paired = props["Paired"]?.boolValue ?? false
    }
}

/// Discovery filter (`Adapter1.SetDiscoveryFilter`).
public struct DiscoveryFilter: Sendable, Equatable {
    public var uuids: [String]
    /// "le" by default (the bridge only speaks LE).
    public var transport: String
    public var duplicateData: Bool
    /// Address or name prefix (BlueZ ≥ 5.54).
    public var pattern: String?

    public init(uuids: [String] = [], transport: String = "le", duplicateData: Bool = true, pattern: String? = nil) {
        self.uuids = uuids
        self.transport = transport
        self.duplicateData = duplicateData
        self.pattern = pattern
    }

    var dbusValue: DBusValue {
        var d: [String: DBusValue] = ["Transport": .string(transport), "DuplicateData": .boolean(duplicateData)]
        if !uuids.isEmpty { d["UUIDs"] = .strings(uuids.map { BluetoothUUID($0)?.uuidString ?? $0 }) }
        if let pattern { d["Pattern"] = .string(pattern) }
        return .properties(d)
    }
}

/// A running discovery: devices seen (added or updated: RSSI, name, advertising data), until
/// ``stop()``. The discovery session belongs to this client's connection (behaviour 2).
public final class ScanSession: Sendable {
    /// Every sighting, in arrival order.
    public let devices: AsyncStream<DiscoveredDevice>
    let client: BlueZClient
    let adapter: BlueZAdapter
    let removeListener: @Sendable () -> Void
    let task: Task<Void, Never>
    let stopped = Mutex(false)

    package init(client: BlueZClient, adapter: BlueZAdapter) {
        self.client = client
        self.adapter = adapter
        let (events, _, remove) = client.listen()
        removeListener = remove
        let (stream, continuation) = AsyncStream<DiscoveredDevice>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        devices = stream
        let interesting: Set = ["RSSI", "Name", "Alias", "ManufacturerData", "ServiceData", "UUIDs"]
        task = client.spawn { [weak client] in
            for await e in events {
                var path: DBusObjectPath?
                switch e {
                case let .added(p, ifaces) where ifaces.contains(BlueZClient.device1): path = p
                case let .changed(p, i, changed, _) where i == BlueZClient.device1 && !interesting.isDisjoint(with: changed.keys):
                    path = p
                case .closed: continuation.finish()
                default: break
                }
                guard let path, path.parent == adapter.path,
                      let props = client?.object(path)?[BlueZClient.device1],
                      let d = DiscoveredDevice(path: path, props) else { continue }
                continuation.yield(d)
            }
            continuation.finish()
        }
    }

    /// Stops discovery (StopDiscovery) and ends ``devices``. Idempotent.
    public func stop() async throws(BlueZError) {
        let already = stopped.withLock { s -> Bool in
            defer { s = true }
            return s
        }
        guard !already else { return }
        removeListener()
        try await client.call(adapter.path, BlueZClient.adapter1, "StopDiscovery")
    }

    /// Ends ``devices`` without `StopDiscovery`, for a session bluetoothd already ended (the
    /// adapter was powered off or bluetoothd went away: 5.66 `adapter_stop` drops every
    /// discovery client). Idempotent; ``stop()`` afterwards does nothing.
    package func abandon() {
        let already = stopped.withLock { s -> Bool in
            defer { s = true }
            return s
        }
        if !already { removeListener() }
    }

    deinit { removeListener() }
}

extension BlueZClient {
    /// Every adapter, by path.
    public var adapters: [BlueZAdapter] {
        objects.filter { $0.value[Self.adapter1] != nil }.keys.sorted().map(BlueZAdapter.init(path:))
    }

    /// The adapter called `name` (`hci0`), or the first one when `name` is nil.
    public func adapter(named name: String? = nil) throws(BlueZError) -> BlueZAdapter {
        let all = adapters
        if let name {
            guard let a = all.first(where: { $0.name == name }) else { throw .notFound("no Bluetooth adapter \(name)") }
            return a
        }
        guard let a = all.first else { throw .notFound("no Bluetooth adapter") }
        return a
    }

    /// The adapter's `Powered`.
    public func isPowered(_ adapter: BlueZAdapter) -> Bool {
        object(adapter.path)?[Self.adapter1]?["Powered"]?.boolValue ?? false
    }

    /// Sets `Powered` and waits until the cache shows it.
    public func setPowered(_ adapter: BlueZAdapter, _ on: Bool, timeout: Duration = .seconds(5)) async throws(BlueZError) {
        try await setProperty(adapter.path, Self.adapter1, "Powered", .boolean(on))
        let path = adapter.path
        _ = try await waitFor("Powered=\(on)", timeout: timeout) { objs in
            objs[path]?[Self.adapter1]?["Powered"]?.boolValue == on ? true : nil
        }
    }

    /// Sets the discovery filter and starts discovery; devices arrive on the session's stream.
    /// Overlapping scans and connects on one adapter cause InProgress (behaviour 6): callers
    /// serialise them. bluetoothd keeps **one** discovery session per D-Bus client: a second
    /// `scan` on this client while one runs fails `in_progress` (5.66 `start_discovery`:
    /// `InProgress` "Operation already in progress"); `BlueZCentral` shares one between its user
    /// scans and connects (docs/bluez.md "One discovery per client").
    public func scan(_ adapter: BlueZAdapter, filter: DiscoveryFilter = DiscoveryFilter()) async throws(BlueZError) -> ScanSession {
        try await call(adapter.path, Self.adapter1, "SetDiscoveryFilter", [filter.dbusValue])
        let session = ScanSession(client: self, adapter: adapter)
        do {
            try await call(adapter.path, Self.adapter1, "StartDiscovery")
        } catch {
            session.removeListener()
            throw error
        }
        return session
    }

    /// Replaces this client's discovery filter (`Adapter1.SetDiscoveryFilter`). While this
    /// client discovers, bluetoothd applies it to the running session at once (5.66
    /// `set_discovery_filter` → `update_discovery_filter`): it can widen or narrow what the
    /// client's ``ScanSession`` sees.
    public func setDiscoveryFilter(_ adapter: BlueZAdapter, _ filter: DiscoveryFilter) async throws(BlueZError) {
        try await call(adapter.path, Self.adapter1, "SetDiscoveryFilter", [filter.dbusValue])
    }

    /// Removes a device from BlueZ (`Adapter1.RemoveDevice`): unpairs and forgets it.
    public func remove(_ device: BlueZDevice) async throws(BlueZError) {
        try await call(device.path.parent ?? .root, Self.adapter1, "RemoveDevice", [.objectPath(device.path)])
    }
}
