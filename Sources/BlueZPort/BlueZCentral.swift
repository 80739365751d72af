import BlueZ
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
/// a short discovery (filtered by address) first — or, while a user scan runs (``scan()``), by
/// waiting for it in that scan: bluetoothd keeps one discovery per D-Bus client, which the
/// central shares (``SharedDiscovery``, docs/bluez.md "One discovery per client"). The bridge
/// serialises connects per adapter (its `ConnectGate`), so look-ups never overlap another
/// connect (behaviour 6).
///
/// Pairing (spec/bluez.md behaviour 9, gopro.md §2): when the profile asks for it (`pair: true`,
/// GoPro) and BlueZ says the device is not `Paired`, the central pairs right after the link is
/// up and *before* subscribing — Just Works through a `NoInputNoOutput` agent it registers once
/// (``BlueZClient/registerPairingAgent(path:)``: not the default agent, and it says yes only to
/// the device this client's `Pair` is pairing) — so no encrypted access ever fails with
/// "Insufficient authentication". Profiles that do not
/// ask are never paired (many devices refuse it).
public final class BlueZCentral: BLECentral {
    public let client: BlueZClient
    public let adapter: BlueZAdapter
    /// How links subscribe (``NotifyMethod/automatic``: AcquireNotify where offered).
    public let notifyMethod: NotifyMethod
    /// Whether the headless agent is registered (once per central).
    let agentRegistered = Mutex(false)
    /// Recovery from a link the kernel holds but bluetoothd does not track (``HalfOpenRecovery``).
    let halfOpen: Mutex<HalfOpenRecovery>
    /// Told (for the log) when the adapter is power-cycled to clear a half-open link.
    let onRecovery: @Sendable (String) -> Void
    /// The one discovery this client may run on the adapter, shared by user scans and look-ups.
    let discovery: SharedDiscovery

    public init(client: BlueZClient, adapter: BlueZAdapter, notifyMethod: NotifyMethod = .automatic,
                halfOpenRecovery: HalfOpenRecovery = HalfOpenRecovery(),
                onRecovery: @escaping @Sendable (String) -> Void = { _ in })
    {
        self.client = client
        self.adapter = adapter
        self.notifyMethod = notifyMethod
        halfOpen = Mutex(halfOpenRecovery)
        self.onRecovery = onRecovery
        discovery = SharedDiscovery(client: client, adapter: adapter)
    }

    /// `Connect`, and the one recovery for a half-open link: after
    /// ``HalfOpenRecovery/threshold`` such failures in a row the adapter is powered off and on
    /// (rate-limited), then `Connect` is tried once more within the same deadline.
    func connectRecovering(_ device: BlueZDevice, timeout: Duration) async throws(BlueZError) {
        let start = ContinuousClock.now
        do {
            try await client.connect(device, timeout: timeout)
            halfOpen.withLock { $0.succeeded(device.address) }
        } catch {
            guard HalfOpenRecovery.isHalfOpen(error),
                  halfOpen.withLock({ $0.failed(device.address, at: .now) })
            else { throw error }
            onRecovery("\(adapter.name): Connect to \(device.address) failed \(HalfOpenRecovery.threshold) times with "
                + "\"Input/output error\": the kernel holds a link to it that bluetoothd does not track "
                + "(bluetoothd logs \"Device or resource busy\"); powering \(adapter.name) off and on to clear it")
            try await client.setPowered(adapter, false)
            try await client.setPowered(adapter, true)
            try await client.connect(device, timeout: max(.milliseconds(1), timeout - (ContinuousClock.now - start)))
            halfOpen.withLock { $0.succeeded(device.address) }
        }
    }

    public func connect(address: String, notify: [CharacteristicID], timeout: Duration) async throws(BLEError) -> any BLELink {
        try await connect(address: address, notify: notify, pair: false, timeout: timeout)
    }

    /// Registers the pairing agent the first time pairing is needed. A failure is not fatal
    /// (already registered on this connection by another central, or the system's own agent
    /// answers): `Pair` itself then says whether pairing works.
    func ensureAgent() async {
        guard agentRegistered.withLock({ (done: inout Bool) -> Bool in defer { done = true }; return !done }) else { return }
        try? await client.registerPairingAgent()
    }

    public func connect(address: String, notify: [CharacteristicID], pair: Bool, timeout: Duration) async throws(BLEError)
        -> any BLELink
    {
        let start = ContinuousClock.now
        func left() -> Duration { max(.milliseconds(1), timeout - (ContinuousClock.now - start)) }
        do throws(BlueZError) {
            let device = try await discovery.lookUp(address, timeout: left())
            try await connectRecovering(device, timeout: left())
            var pairedNow = false
            var pairing: Duration?
            if pair, !client.isPaired(device) {
                await ensureAgent()
                do {
                    let started = ContinuousClock.now
                    try await client.pair(device, timeout: left())
                    pairing = ContinuousClock.now - started
                    pairedNow = true
                } catch {
                    // Paired meanwhile (another client, or a bond BlueZ had not shown yet): fine.
                    guard case .alreadyExists = error else { throw error }
                }
            }
            let link = BlueZLink(client: client, device: device, notifyMethod: notifyMethod, pairedOnConnect: pairedNow, pairDuration: pairing)
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

/// A half-open link: the kernel holds an LE link (or a pending one) to a device that bluetoothd
/// shows disconnected, so every `Device1.Connect` fails at once with
/// `org.bluez.Error.Failed: Input/output error` while bluetoothd logs
/// `ATT bt_io_connect(…): Device or resource busy (16)`. Seen on the real stack (bluetoothd 5.66,
/// kernel 6.1) after a local disconnect, with a controller that reports a new connection with the
/// legacy LE Connection Complete although the kernel unmasked the enhanced event: the kernel
/// waits for the enhanced one in vain, cancels the connection it believes pending and from then
/// on ignores local disconnects of that link. It does not clear by itself while the peripheral
/// stays connected, and neither `Disconnect` nor `Connect` clears it. Powering the adapter off and
/// on does (the bond survives). This is the only case the bridge power-cycles the adapter: a
/// device that is merely away or off fails differently and is only retried (docs/bluez.md,
/// "The real stack").
public struct HalfOpenRecovery: Sendable {
    /// Half-open failures in a row for one device before the adapter is power-cycled.
    public static let threshold = 2
    /// The least time between two power cycles of the adapter.
    public var minimumInterval: Duration
    private var failures: [String: Int] = [:]
    private var lastCycle: ContinuousClock.Instant?

    public init(minimumInterval: Duration = .seconds(60)) { self.minimumInterval = minimumInterval }

    /// Whether `error` is a `Connect` refused because of a half-open link.
    public static func isHalfOpen(_ error: BlueZError) -> Bool {
        if case let .failed(name, message) = error {
            // The message carries the call's context: "Input/output error (Connect on /org/bluez/…)".
            return name == "org.bluez.Error.Failed" && message.hasPrefix("Input/output error")
        }
        return false
    }

    /// Counts a half-open failure for `address`; true when the adapter should be power-cycled now.
    public mutating func failed(_ address: String, at now: ContinuousClock.Instant) -> Bool {
        let n = failures[address, default: 0] + 1
        failures[address] = n
        guard n >= Self.threshold else { return false }
        if let lastCycle, now - lastCycle < minimumInterval { return false }
        lastCycle = now
        failures[address] = 0
        return true
    }

    public mutating func succeeded(_ address: String) { failures[address] = nil }
}

/// One connected device as BridgeCore's `BLELink`: characteristics are looked up by UUID under
/// the device (paths are not stable handles across reconnects, so each link — one connection —
/// resolves them afresh and keeps what it resolved); notifications end on link loss.
final class BlueZLink: BLELink {
    let client: BlueZClient
    let device: BlueZDevice
    private let stream: AsyncStream<GATTNotification>
    let continuation: AsyncStream<GATTNotification>.Continuation
    let tasks = TaskBag()
    let mtu: Int
    /// Characteristics resolved on this connection (a lookup walks the whole object cache).
    private let resolved = Mutex<[CharacteristicID: BlueZCharacteristic]>([:])
    let notifyMethod: NotifyMethod
    let pairedOnConnect: Bool
    let pairDuration: Duration?

    init(client: BlueZClient, device: BlueZDevice, notifyMethod: NotifyMethod = .automatic, pairedOnConnect: Bool = false,
         pairDuration: Duration? = nil) {
        self.client = client
        self.device = device
        self.notifyMethod = notifyMethod
        self.pairedOnConnect = pairedOnConnect
        self.pairDuration = pairDuration
        (stream, continuation) = AsyncStream<GATTNotification>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let mtus = client.objects.filter { $0.key.isDescendant(of: device.path) }
            .compactMap { $0.value["org.bluez.GattCharacteristic1"]?["MTU"]?.integerValue }
        mtu = mtus.first.map(Int.init) ?? 23
        let states = client.connectionStates(device)
        let watcher = client.spawn { [continuation] in
            for await s in states where !s.connected { break }
            continuation.finish()
        }
        tasks.add(watcher)
        continuation.onTermination = { [tasks] _ in tasks.cancelAll() }
    }

    /// Where notifications go. Until the bridge takes them (`deliverNotifications`, straight to
    /// its handler on the thread that read them) or someone reads `notifications`, they wait in
    /// `buffered`; the switch flushes them first, under the lock, so the order holds.
    private enum Delivery {
        case buffering([GATTNotification])
        case stream
        case handler(@Sendable (GATTNotification) -> Void)
    }
    private let delivery = Mutex(Delivery.buffering([]))

    /// Notifications as a stream (finishes on link loss); reading it switches delivery to it.
    var notifications: AsyncStream<GATTNotification> {
        delivery.withLock { d in
            if case let .buffering(items) = d {
                for n in items { continuation.yield(n) }
                d = .stream
            }
        }
        return stream
    }

    func emit(_ n: GATTNotification) {
        delivery.withLock { d in
            switch d {
            case var .buffering(items):
                items.append(n)
                d = .buffering(items)
            case .stream: continuation.yield(n)
            case let .handler(h): h(n)
            }
        }
    }

    func subscribe(_ ids: [CharacteristicID]) async throws(BlueZError) {
        for id in ids { try await subscribe(id) }
    }

    /// One characteristic's notify session, kept for the life of the link. A session that ends
    /// while the device is still connected is opened again: through an AcquireNotify socket a
    /// zero-length notification reads exactly like end-of-file (the socket is closed, bluetoothd
    /// releases it), and the link must not go deaf. If that fails, the link is finished, so the
    /// bridge reconnects (docs/bluez.md, "The real stack"). The zero-length value itself is lost.
    private func subscribe(_ id: CharacteristicID) async throws(BlueZError) {
        let c = try characteristic(id)
        // Values reach `emit` on the thread that read them (the AcquireNotify socket's reader
        // thread, or the client's event loop).
        let session = try await client.notifications(c, using: notifyMethod) { [weak self] v in
            self?.emit(GATTNotification(characteristic: id, value: v))
        }
        let t = client.spawn { [weak self] in
            for await _ in session {}  // keeps the session; ends with it
            guard !Task.isCancelled, let self, self.client.connectionState(self.device).connected else { return }
            do throws(BlueZError) {
                try await self.subscribe(id)
            } catch {
                // BlueZ releases a closed notify socket when it notices the hang-up; until then
                // AcquireNotify answers NotPermitted "Notify acquired". Wait for the release, once.
                guard case let .notPermitted(message) = error, message.contains("Notify acquired"),
                      await self.waitForNotifyRelease(id)
                else { return self.finish() }
                do { try await self.subscribe(id) } catch { self.finish() }
            }
        }
        tasks.add(t)
    }

    /// Waits (up to the client's call timeout) until BlueZ shows the characteristic's notify
    /// socket released (`NotifyAcquired` false); whether it did.
    private func waitForNotifyRelease(_ id: CharacteristicID) async -> Bool {
        guard let path = try? characteristic(id).path else { return false }
        let released = try? await client.waitFor("NotifyAcquired=false on \(path)", timeout: client.callTimeout) { objs in
            objs[path]?[BlueZClient.char1]?["NotifyAcquired"]?.boolValue == false ? true : nil
        }
        return released != nil
    }

    func deliverNotifications(to handler: @escaping @Sendable (GATTNotification) -> Void) async {
        delivery.withLock { d in
            if case let .buffering(items) = d { for n in items { handler(n) } }
            d = .handler(handler)
        }
        for await _ in stream {}  // carries nothing now; finishes when the link is lost
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

    /// Each write through `BlueZClient.write(…, completion:)`, the next one sent from the
    /// completion of the one before: no task waits, the outcome comes on the D-Bus loop.
    func startWrites(_ writes: [DeviceRequest.Write], completion: @escaping @Sendable (Result<Void, BLEError>) -> Void) -> Bool {
        var targets: [(BlueZCharacteristic, DeviceRequest.Write)] = []
        do throws(BlueZError) {
            for w in writes { targets.append((try characteristic(w.characteristic), w)) }
        } catch {
            completion(.failure(BLEError(error)))
            return true
        }
        write(targets[...], completion: completion)
        return true
    }

    private func write(_ targets: ArraySlice<(BlueZCharacteristic, DeviceRequest.Write)>,
                       completion: @escaping @Sendable (Result<Void, BLEError>) -> Void) {
        guard let (c, w) = targets.first else { return completion(.success(())) }
        client.write(w.value, to: c, type: w.withResponse ? .request : .command) { result in
            switch result {
            case .success: self.write(targets.dropFirst(), completion: completion)
            case let .failure(error): completion(.failure(BLEError(error)))
            }
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

extension BlueZClient {
    /// Whether BlueZ reports the device `Paired` (or `Bonded`), as cached now.
    public func isPaired(_ device: BlueZDevice) -> Bool {
        let props = objects[device.path]?[Self.device1]
        return props?["Paired"]?.boolValue == true || props?["Bonded"]?.boolValue == true
    }
}

extension BlueZError {
    /// A refusal that pairing would cure: NotPermitted "Insufficient authentication/encryption"
    /// or "Not paired" (spec/bluez.md behaviour 9; GoPro characteristics, gopro.md §2).
    public var needsPairing: Bool {
        guard case let .notPermitted(message) = self else { return false }
        let m = message.lowercased()
        return m.contains("authentication") || m.contains("encryption") || m.contains("not paired")
    }
}
