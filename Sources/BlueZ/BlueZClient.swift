import DBus
import PacketSocket
import Reactor
import Synchronization

/// A typed async client of bluetoothd (`org.bluez`) over D-Bus, with an object cache fed by
/// `GetManagedObjects`, `InterfacesAdded/Removed` and `PropertiesChanged` (issue 4 §2;
/// spec/bluez.md "Objects a client sees").
///
/// The signal subscription is made before `GetManagedObjects`, so nothing between the two is
/// lost. The client runs on its connection's `Reactor.EventLoop`: its tasks prefer the loop and
/// AcquireNotify sockets are read by it (docs/bluez.md "On an event loop"). Object paths are
/// never kept across reconnects: characteristics are looked up by UUID under the device for
/// every operation.
public final class BlueZClient: Sendable {
    /// BlueZ's bus name.
    public static let busName = "org.bluez"
    package static let adapter1 = "org.bluez.Adapter1"
    package static let device1 = "org.bluez.Device1"
    package static let service1 = "org.bluez.GattService1"
    package static let char1 = "org.bluez.GattCharacteristic1"

    /// An object's interfaces and their properties, as cached.
    public typealias Interfaces = [String: [String: DBusValue]]

    /// A change of the cache, as listeners see it.
    package enum Event: Sendable {
        case added(DBusObjectPath, [String])
        case removed(DBusObjectPath, [String])
        case changed(DBusObjectPath, String, [String: DBusValue], [String])
        case timedOut
        case closed
    }

    struct Store {
        var objects: [DBusObjectPath: Interfaces] = [:]
        var listeners: [UInt64: AsyncStream<Event>.Continuation] = [:]
        var notify: [DBusObjectPath: [UInt64: AsyncStream<[UInt8]>.Continuation]] = [:]
        var echo: [DBusObjectPath: ReadEchoFilter] = [:]
        /// AcquireNotify sockets by subscription id, with their characteristic path.
        var acquired: [UInt64: (DBusObjectPath, PacketSocket)] = [:]
        /// Devices whose `Pair` call from this client is in flight (a count per path: two calls
        /// for one device may overlap, the second failing `InProgress`): the only devices the
        /// client's pairing agent says yes for (``registerPairingAgent(path:)``).
        var pairing: [DBusObjectPath: Int] = [:]
        var nextID: UInt64 = 1
        var pump: Task<Void, Never>?
        /// Follows `org.bluez`'s owner: bluetoothd restarting (spec/bluez.md, field reports).
        var ownerPump: Task<Void, Never>?
        var closed = false
        mutating func id() -> UInt64 {
            defer { nextID += 1 }
            return nextID
        }
    }

    /// The connection this client talks over.
    public let connection: DBusConnection
    let ownsConnection: Bool
    let store = Mutex(Store())
    /// Default timeout of BlueZ method calls.
    public let callTimeout: Duration

    /// The event loop the client runs on: its connection's.
    public var loop: EventLoop { connection.loop }

    /// Starts a task that prefers the client's loop.
    @discardableResult
    package func spawn(_ body: sending @escaping @isolated(any) () async -> Void) -> Task<Void, Never> {
        Task(executorPreference: loop, operation: body)
    }

    init(connection: DBusConnection, owns: Bool, callTimeout: Duration) {
        self.connection = connection
        self.ownsConnection = owns
        self.callTimeout = callTimeout
    }

    /// Opens a connection to `bus` (the system bus by default, honouring
    /// `DBUS_SYSTEM_BUS_ADDRESS`) and starts a client on it; ``close()`` closes both. The
    /// connection, the client's tasks and its AcquireNotify sockets run on `loop`
    /// (docs/bluez.md "On an event loop"; close the client before shutting the loop down).
    public static func connect(_ bus: DBusBus = .system, callTimeout: Duration = .seconds(30),
                               loop: EventLoop) async throws(BlueZError) -> BlueZClient
    {
        let c: DBusConnection
        do {
            c = try await DBusConnection.connect(bus, timeout: .seconds(10), loop: loop)
        } catch {
            throw BlueZError(error, context: "connecting to the bus")
        }
        do {
            return try await start(BlueZClient(connection: c, owns: true, callTimeout: callTimeout))
        } catch {
            c.close()
            throw error
        }
    }

    /// Starts a client on an existing connection (which the caller keeps owning); it runs on the
    /// connection's event loop.
    public static func start(on connection: DBusConnection, callTimeout: Duration = .seconds(30)) async throws(BlueZError)
        -> BlueZClient
    {
        try await start(BlueZClient(connection: connection, owns: false, callTimeout: callTimeout))
    }

    private static func start(_ client: BlueZClient) async throws(BlueZError) -> BlueZClient {
        let signals: DBusSignalStream
        let owners: DBusSignalStream
        let snapshot: [DBusObjectPath: Interfaces]
        do {
            owners = try await client.connection.signals(matching: .nameOwnerChanged(busName), bufferLimit: 64)
            // One rule for every signal from org.bluez keeps ObjectManager and Properties signals in order.
            signals = try await client.connection.signals(matching: DBusMatchRule(sender: busName), bufferLimit: 4096)
            let reply = try await client.connection.call(
                destination: busName, path: .root, interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects", timeout: client.callTimeout)
            snapshot = try reply.decode(0)
        } catch {
            throw BlueZError(error, context: "GetManagedObjects")
        }
        client.store.withLock { $0.objects = snapshot }
        let pump = client.spawn { [weak client] in
            do {
                for try await m in signals {
                    guard let client else { return }
                    client.apply(m)
                }
            } catch {}
            client?.shutDown()
        }
        let ownerPump = client.spawn { [weak client] in
            do {
                for try await m in owners {
                    let old: String = (try? m.decode(1)) ?? ""
                    let new: String = (try? m.decode(2)) ?? ""
                    if !old.isEmpty { client?.bluezVanished() }
                    if !new.isEmpty { await client?.resync() }
                }
            } catch {}
        }
        client.store.withLock {
            $0.pump = pump
            $0.ownerPump = ownerPump
        }
        return client
    }

    /// bluetoothd went away (it crashed or restarted): its objects are gone without
    /// InterfacesRemoved. Every connected device is reported disconnected, every notification
    /// stream ends and acquired sockets are closed, then every object is removed from the cache —
    /// so links end and sessions reconnect once it is back.
    func bluezVanished() {
        let (events, finished, released, listeners) = store.withLock { s in
            var events: [Event] = []
            for (path, interfaces) in s.objects.sorted(by: { $0.key.rawValue > $1.key.rawValue }) {
                if interfaces[Self.device1]?["Connected"]?.boolValue == true {
                    events.append(.changed(path, Self.device1, ["Connected": .boolean(false), "ServicesResolved": .boolean(false)], []))
                }
            }
            // Children first, as bluetoothd removes them.
            for (path, interfaces) in s.objects.sorted(by: { $0.key.rawValue > $1.key.rawValue }) {
                events.append(.removed(path, Array(interfaces.keys)))
            }
            let finished = s.notify.values.flatMap(\.values)
            let released = s.acquired.values.map(\.1)
            s.objects = [:]
            s.notify = [:]
            s.echo = [:]
            s.acquired = [:]
            return (events, finished, released, Array(s.listeners.values))
        }
        for c in finished { c.finish() }
        for socket in released { socket.shutdown() }
        for e in events { for l in listeners { l.yield(e) } }
    }

    /// bluetoothd is (back) on the bus: reads its objects again and announces them.
    func resync() async {
        guard let reply = try? await connection.call(
            destination: Self.busName, path: .root, interface: "org.freedesktop.DBus.ObjectManager",
            method: "GetManagedObjects", timeout: callTimeout),
            let snapshot: [DBusObjectPath: Interfaces] = try? reply.decode(0)
        else { return }
        let listeners = store.withLock { s in
            for (path, interfaces) in snapshot {
                for (i, props) in interfaces { s.objects[path, default: [:]][i] = props }
            }
            return Array(s.listeners.values)
        }
        for (path, interfaces) in snapshot.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            for l in listeners { l.yield(.added(path, Array(interfaces.keys))) }
        }
    }

    /// Stops the client: streams end, pending waits fail; closes the connection if the client opened it.
    public func close() {
        let (pump, ownerPump) = store.withLock { ($0.pump, $0.ownerPump) }
        pump?.cancel()
        ownerPump?.cancel()
        shutDown()
        if ownsConnection { connection.close() }
    }

    deinit {
        let (pump, ownerPump) = store.withLock { ($0.pump, $0.ownerPump) }
        pump?.cancel()
        ownerPump?.cancel()
    }

    func shutDown() {
        let (listeners, notifies, sockets) = store.withLock { s in
            s.closed = true
            defer {
                s.listeners = [:]
                s.notify = [:]
                s.acquired = [:]
            }
            return (Array(s.listeners.values), s.notify.values.flatMap(\.values), s.acquired.values.map(\.1))
        }
        for socket in sockets { socket.shutdown() }
        for l in listeners {
            l.yield(.closed)
            l.finish()
        }
        for n in notifies { n.finish() }
    }

    // MARK: Cache

    /// A copy of the cached object tree.
    public var objects: [DBusObjectPath: Interfaces] { store.withLock { $0.objects } }

    /// One object's cached interfaces.
    public func object(_ path: DBusObjectPath) -> Interfaces? { store.withLock { $0.objects[path] } }

    /// Applies one signal from org.bluez to the cache and fans it out (pump task).
    func apply(_ m: DBusMessage) {
        var event: Event?
        var deliveries: [(AsyncStream<[UInt8]>.Continuation, [UInt8])] = []
        var finished: [AsyncStream<[UInt8]>.Continuation] = []
        var released: [PacketSocket] = []
        let listeners = store.withLock { s -> [AsyncStream<Event>.Continuation] in
            switch (m.interface, m.member) {
            case ("org.freedesktop.DBus.ObjectManager", "InterfacesAdded"):
                guard let path: DBusObjectPath = try? m.decode(0), let added: Interfaces = try? m.decode(1) else { return [] }
                for (i, props) in added { s.objects[path, default: [:]][i] = props }
                event = .added(path, Array(added.keys))
            case ("org.freedesktop.DBus.ObjectManager", "InterfacesRemoved"):
                guard let path: DBusObjectPath = try? m.decode(0), let removed: [String] = try? m.decode(1) else { return [] }
                for i in removed { s.objects[path]?[i] = nil }
                if s.objects[path]?.isEmpty == true { s.objects[path] = nil }
                if removed.contains(Self.char1) {
                    finished += s.notify.removeValue(forKey: path).map { Array($0.values) } ?? []
                    s.echo[path] = nil
                    released += s.acquired.values.filter { $0.0 == path }.map(\.1)
                }
                event = .removed(path, removed)
            case ("org.freedesktop.DBus.Properties", "PropertiesChanged"):
                guard let path = m.path, let iface: String = try? m.decode(0),
                      let changed: [String: DBusValue] = try? m.decode(1) else { return [] }
                let invalidated: [String] = (try? m.decode(2)) ?? []
                if s.objects[path] != nil {
                    for (k, v) in changed { s.objects[path]![iface, default: [:]][k] = v }
                    for k in invalidated { s.objects[path]![iface]?[k] = nil }
                }
                if iface == Self.char1, let value = changed["Value"]?.bytesValue {
                    let out = s.echo[path, default: ReadEchoFilter()].signal(value)
                    for v in out { for c in (s.notify[path] ?? [:]).values { deliveries.append((c, v)) } }
                }
                if iface == Self.device1, changed["Connected"]?.boolValue == false {
                    // Link lost: notification streams under the device end (BLELink contract).
                    for p in s.notify.keys where p.isDescendant(of: path) {
                        finished += s.notify.removeValue(forKey: p).map { Array($0.values) } ?? []
                    }
                    for p in s.echo.keys where p.isDescendant(of: path) { s.echo[p]?.reset() }
                    released += s.acquired.values.filter { $0.0.isDescendant(of: path) }.map(\.1)
                }
                event = .changed(path, iface, changed, invalidated)
            default:
                return []
            }
            return Array(s.listeners.values)
        }
        for (c, v) in deliveries { c.yield(v) }
        for c in finished { c.finish() }
        for socket in released { socket.shutdown() }
        if let event { for l in listeners { l.yield(event) } }
    }

    /// Registers a listener of cache events; call `remove` when done.
    package func listen() -> (AsyncStream<Event>, id: UInt64, remove: @Sendable () -> Void) {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(4096))
        let id = store.withLock { s -> UInt64? in
            guard !s.closed else { return nil }
            let id = s.id()
            s.listeners[id] = continuation
            return id
        }
        guard let id else {
            continuation.yield(.closed)
            continuation.finish()
            return (stream, 0, {})
        }
        let remove: @Sendable () -> Void = { [weak self] in
            let c = self?.store.withLock { $0.listeners.removeValue(forKey: id) }
            c?.finish()
        }
        return (stream, id, remove)
    }

    /// Waits until `check` finds what it needs in the cache (checked now and after every change),
    /// or throws ``BlueZError/timeout(_:)`` after `timeout`; `failure` may end the wait early.
    ///
    /// `listener` lets a caller register before it sends the call whose effects it waits for;
    /// `failed` sees every event after that.
    package func waitFor<T: Sendable>(
        _ what: String, timeout: Duration,
        listener: (AsyncStream<Event>, id: UInt64, remove: @Sendable () -> Void)? = nil,
        failure: @escaping @Sendable ([DBusObjectPath: Interfaces]) -> BlueZError? = { _ in nil },
        failed: @escaping @Sendable (Event) -> BlueZError? = { _ in nil },
        _ check: @escaping @Sendable ([DBusObjectPath: Interfaces]) -> T?
    ) async throws(BlueZError) -> T {
        let (events, id, remove) = listener ?? listen()
        defer { remove() }
        let loop = self.loop
        let timer = spawn { [weak self] in
            try? await loop.sleep(for: timeout)
            _ = self?.store.withLock { $0.listeners[id] }?.yield(.timedOut)
        }
        defer { timer.cancel() }
        func evaluate() throws(BlueZError) -> T? {
            let snapshot = objects
            if let found = check(snapshot) { return found }
            if let e = failure(snapshot) { throw e }
            return nil
        }
        if let found = try evaluate() { return found }
        for await e in events {
            switch e {
            case .timedOut: throw .timeout("\(what) within \(timeout)")
            case .closed: throw .bus(.disconnected)
            default:
                if let found = try evaluate() { return found }
                if let e = failed(e) { throw e }
            }
        }
        throw .bus(.disconnected)
    }

    /// Calls a BlueZ method, mapping failures to ``BlueZError``.
    @discardableResult
    package func call(_ path: DBusObjectPath, _ interface: String, _ method: String, _ args: [DBusValue] = [],
              timeout: Duration? = nil) async throws(BlueZError) -> DBusMessage
    {
        do {
            return try await connection.call(destination: Self.busName, path: path, interface: interface,
                                             method: method, arguments: args, timeout: timeout ?? callTimeout)
        } catch {
            throw BlueZError(error, context: "\(method) on \(path)")
        }
    }

    /// The same call, its outcome handed to `completion` (on the connection's loop thread, or at
    /// once when it cannot be sent), with no task waiting for it.
    package func call(_ path: DBusObjectPath, _ interface: String, _ method: String, _ args: [DBusValue] = [],
                      timeout: Duration? = nil, completion: @escaping @Sendable (Result<DBusMessage, BlueZError>) -> Void)
    {
        connection.call(destination: Self.busName, path: path, interface: interface, method: method, arguments: args,
                        timeout: timeout ?? callTimeout) { result in
            completion(result.mapError { BlueZError($0, context: "\(method) on \(path)") })
        }
    }

    /// Sets a property through `org.freedesktop.DBus.Properties.Set`.
    func setProperty(_ path: DBusObjectPath, _ interface: String, _ name: String, _ value: DBusValue) async throws(BlueZError) {
        try await call(path, "org.freedesktop.DBus.Properties", "Set", [.string(interface), .string(name), .variant(value)])
    }
}
