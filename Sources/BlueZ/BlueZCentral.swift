import BridgeCore
import DBus
import Synchronization

extension BLEError {
    /// The bridge's view of a BlueZ failure (BridgeCore `Ports.swift`): kind from the stable code,
    /// message from the BlueZ text.
    public init(_ error: BlueZError) {
        let kind: BLEError.Kind
        switch error {
        case .notConnected, .connectionFailed, .cancelled: kind = .notConnected
        case .notFound, .doesNotExist: kind = .notFound
        case .inProgress: kind = .inProgress
        case .notPermitted, .notAuthorized: kind = .notPermitted
        case .notSupported: kind = .notSupported
        case .timeout: kind = .timeout
        default: kind = .failed
        }
        self.init(kind, error.description)
    }
}

/// BridgeCore's `BLECentral` over the BlueZ client, for one adapter (issue 4 §2).
///
/// `connect` adopts a link BlueZ already has; a device BlueZ does not know yet is looked for with
/// a short discovery (filtered by address) first. The bridge serialises connects per adapter
/// (its `ConnectGate`), so this scan never overlaps another connect (behaviour 6).
public final class BlueZCentral: BLECentral {
    public let client: BlueZClient
    public let adapter: BlueZAdapter
    /// How links subscribe (``NotifyMethod/automatic``: AcquireNotify where offered).
    public let notifyMethod: NotifyMethod

    public init(client: BlueZClient, adapter: BlueZAdapter, notifyMethod: NotifyMethod = .automatic) {
        self.client = client
        self.adapter = adapter
        self.notifyMethod = notifyMethod
    }

    public func connect(address: String, notify: [CharacteristicID], timeout: Duration) async throws(BLEError) -> any BLELink {
        let start = ContinuousClock.now
        func left() -> Duration { max(.milliseconds(1), timeout - (ContinuousClock.now - start)) }
        do throws(BlueZError) {
            var device = client.device(address, adapter: adapter)
            if device == nil {
                let scan = try await client.scan(adapter, filter: DiscoveryFilter(pattern: address.uppercased()))
                do {
                    device = try await client.waitForDevice(address, adapter: adapter, timeout: left())
                    try await scan.stop()
                } catch {
                    try? await scan.stop()
                    throw error
                }
            }
            guard let device else { throw BlueZError.notFound("device \(address)") }
            try await client.connect(device, timeout: left())
            let link = BlueZLink(client: client, device: device, notifyMethod: notifyMethod)
            do {
                try await link.subscribe(notify)
            } catch {
                link.finish()
                throw error
            }
            return link
        } catch {
            throw BLEError(error)
        }
    }
}

/// One connected device as BridgeCore's `BLELink`: characteristics are looked up by UUID under
/// the device (paths are not stable handles across reconnects, so each link — one connection —
/// resolves them afresh and keeps what it resolved); notifications end on link loss.
final class BlueZLink: BLELink {
    let client: BlueZClient
    let device: BlueZDevice
    let notifications: AsyncStream<GATTNotification>
    let continuation: AsyncStream<GATTNotification>.Continuation
    let tasks = TaskBag()
    let mtu: Int
    /// Characteristics resolved on this connection (a lookup walks the whole object cache).
    private let resolved = Mutex<[CharacteristicID: BlueZCharacteristic]>([:])
    let notifyMethod: NotifyMethod

    init(client: BlueZClient, device: BlueZDevice, notifyMethod: NotifyMethod = .automatic) {
        self.client = client
        self.device = device
        self.notifyMethod = notifyMethod
        (notifications, continuation) = AsyncStream<GATTNotification>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let mtus = client.objects.filter { $0.key.isDescendant(of: device.path) }
            .compactMap { $0.value["org.bluez.GattCharacteristic1"]?["MTU"]?.integerValue }
        mtu = mtus.first.map(Int.init) ?? 23
        let states = client.connectionStates(device)
        let watcher = Task { [continuation] in
            for await s in states where !s.connected { break }
            continuation.finish()
        }
        tasks.add(watcher)
        continuation.onTermination = { [tasks] _ in tasks.cancelAll() }
    }

    func subscribe(_ ids: [CharacteristicID]) async throws(BlueZError) {
        for id in ids {
            let c = try characteristic(id)
            let stream = try await client.notifications(c, using: notifyMethod)
            let t = Task { [continuation] in
                for await v in stream { continuation.yield(GATTNotification(characteristic: id, value: v)) }
            }
            tasks.add(t)
        }
    }

    func finish() { continuation.finish() }

    /// The characteristic for `id` on this connection, resolved once.
    func characteristic(_ id: CharacteristicID) throws(BlueZError) -> BlueZCharacteristic {
        if let c = resolved.withLock({ $0[id] }) { return c }
        let c = try client.characteristic(id.uuid, service: id.service, on: device)
        resolved.withLock { $0[id] = c }
        return c
    }

    func write(_ value: [UInt8], to characteristic: CharacteristicID, withResponse: Bool) async throws(BLEError) {
        do throws(BlueZError) {
            let c = try self.characteristic(characteristic)
            try await client.write(value, to: c, type: withResponse ? .request : .command)
        } catch {
            throw BLEError(error)
        }
    }

    func read(_ characteristic: CharacteristicID) async throws(BLEError) -> [UInt8] {
        do throws(BlueZError) {
            let c = try self.characteristic(characteristic)
            return try await client.read(c)
        } catch {
            throw BLEError(error)
        }
    }

    func disconnect() async {
        try? await client.disconnect(device)
        continuation.finish()
    }
}

/// Tasks that forward into a link's stream, cancelled together when the stream ends.
final class TaskBag: Sendable {
    private let tasks = Mutex<[Task<Void, Never>]>([])
    func add(_ t: Task<Void, Never>) { tasks.withLock { $0.append(t) } }
    func cancelAll() {
        for t in tasks.withLock({ $0 }) { t.cancel() }
    }
}
