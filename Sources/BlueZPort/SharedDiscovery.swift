import BlueZ
import BridgeCore
import DBus
import Synchronization

/// One client's discovery on one adapter, shared by every user of it: user scans (all devices)
/// and look-ups of devices BlueZ does not know yet (`connect`, `pair`).
///
/// bluetoothd keeps **one discovery session and one filter per D-Bus client** (5.66
/// `src/adapter.c`): a second `StartDiscovery` from the same sender fails `InProgress`
/// ("Operation already in progress"), and `SetDiscoveryFilter` while that sender discovers
/// replaces the filter of its running session. So a look-up that started its own
/// `Pattern=address` discovery during a user scan would either fail or narrow the user's scan to
/// one device. Here the demand is counted and one session follows it (docs/bluez.md "One
/// discovery per client"):
///
/// | demand | discovery |
/// | --- | --- |
/// | a user scan (any look-ups too) | LE, DuplicateData, no pattern: every device; a look-up just waits for its device |
/// | look-ups of one address only | LE, DuplicateData, `Pattern=<address>` |
/// | look-ups of several addresses | LE, DuplicateData, no pattern |
/// | nothing | stopped |
///
/// Changes go to BlueZ one at a time (`StartDiscovery` when it starts, `SetDiscoveryFilter` on
/// the running session when the demand changes — a filter never narrows a running user scan —
/// and `StopDiscovery` when the last user leaves), so ending a user scan during a look-up narrows
/// the session to the looked-up address instead of stopping it, and a look-up that ends leaves a
/// user scan alone. When the adapter is powered off or bluetoothd goes away, BlueZ drops the
/// session (5.66 `adapter_stop`); it is started again for the demand of the moment when the
/// adapter is back.
final class SharedDiscovery: Sendable {
    /// What the session is asked to report.
    enum Mode: Equatable, Sendable {
        case off
        /// Every device (no pattern).
        case all
        /// Devices whose address starts with this (upper case), or whose name does
        /// (spec/bluez.md behaviour 11).
        case address(String)

        var filter: DiscoveryFilter {
            if case let .address(a) = self { return DiscoveryFilter(pattern: a) }
            return DiscoveryFilter()
        }
    }

    struct State {
        /// Running user scans: their streams' continuations, by id.
        var scans: [UInt64: AsyncStream<Advertisement>.Continuation] = [:]
        /// Addresses being looked up (upper case) → how many look-ups wait for each.
        var lookups: [String: Int] = [:]
        var nextID: UInt64 = 0
        /// What BlueZ has from this client now.
        var applied = Mode.off
        var session: ScanSession?
        /// Follows the adapter while there is demand (powered off / gone → the session is lost;
        /// back → started again).
        var watcher: Task<Void, Never>?
        /// Counts sessions BlueZ dropped by itself (``lost()``), so a start that raced with the
        /// adapter going off is not taken for a running session.
        var losses: UInt64 = 0

        var wanted: Mode {
            if !scans.isEmpty { return .all }
            if lookups.count == 1, let a = lookups.keys.first { return .address(a) }
            return lookups.isEmpty ? .off : .all
        }
    }

    let client: BlueZClient
    let adapter: BlueZAdapter
    let state = Mutex(State())
    /// One change of the session at a time.
    let serial = SerialGate()

    init(client: BlueZClient, adapter: BlueZAdapter) {
        self.client = client
        self.adapter = adapter
    }

    // MARK: User scans

    /// Starts a user scan: every sighting while it runs, until `stop` (which also ends the
    /// stream) or until the consumer stops iterating.
    func scan() async throws(BlueZError) -> BLEScan {
        let (stream, continuation) = AsyncStream<Advertisement>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            s.scans[s.nextID] = continuation
            return s.nextID
        }
        continuation.onTermination = { [weak self] _ in
            // The consumer went away without `stop`: leave the discovery as `stop` would.
            guard let self, self.state.withLock({ $0.scans.removeValue(forKey: id) }) != nil else { return }
            _ = self.client.spawn { [weak self] in try? await self?.reconcile() }
        }
        do {
            try await reconcile()
        } catch {
            state.withLock { _ = $0.scans.removeValue(forKey: id) }
            continuation.finish()
            try? await reconcile()
            throw error
        }
        return BLEScan(advertisements: stream, stop: { [weak self] in await self?.stopScan(id) })
    }

    /// Ends user scan `id` and brings the session to the demand left. Idempotent.
    func stopScan(_ id: UInt64) async {
        guard let continuation = state.withLock({ $0.scans.removeValue(forKey: id) }) else { return }
        continuation.finish()
        try? await reconcile()
    }

    // MARK: Look-ups

    /// The device with `address`: from the cache, else discovering (or joining the discovery
    /// that runs) until it is seen or `timeout` passes.
    func lookUp(_ address: String, timeout: Duration) async throws(BlueZError) -> BlueZDevice {
        let wanted = address.uppercased()
        if let d = client.device(wanted, adapter: adapter) { return d }
        let start = ContinuousClock.now
        state.withLock { $0.lookups[wanted, default: 0] += 1 }
        do {
            try await reconcile()
            let d = try await client.waitForDevice(wanted, adapter: adapter,
                                                   timeout: max(.milliseconds(1), timeout - (ContinuousClock.now - start)))
            await endLookUp(wanted)
            return d
        } catch {
            await endLookUp(wanted)
            throw error
        }
    }

    func endLookUp(_ address: String) async {
        state.withLock { s in
            if let n = s.lookups[address], n > 1 { s.lookups[address] = n - 1 } else { s.lookups[address] = nil }
        }
        try? await reconcile()
    }

    // MARK: The session

    /// Brings BlueZ's session to the demand of the moment, one change at a time. Throws what
    /// BlueZ answered when the change failed (the state keeps what BlueZ has).
    func reconcile() async throws(BlueZError) {
        await serial.acquire()
        defer { serial.release() }
        let (want, have, session, losses) = state.withLock { ($0.wanted, $0.applied, $0.session, $0.losses) }
        if want == .off {
            let watcher = state.withLock { s -> Task<Void, Never>? in
                defer { s.watcher = nil }
                return s.watcher
            }
            watcher?.cancel()
        } else {
            watchAdapter()
        }
        guard want != have else { return }
        switch (have, want) {
        case (.off, _):
            let s: ScanSession
            do {
                s = try await client.scan(adapter, filter: want.filter)
            } catch {
                // bluetoothd still has a session of this client (a StopDiscovery that failed or
                // timed out): end it and start again, once.
                guard case .inProgress = error else { throw error }
                _ = try? await client.call(adapter.path, BlueZClient.adapter1, "StopDiscovery")
                s = try await client.scan(adapter, filter: want.filter)
            }
            let kept = state.withLock { st -> Bool in
                guard st.losses == losses else { return false }  // the adapter went off meanwhile
                st.applied = want
                st.session = s
                return true
            }
            if kept { forward(s) } else { s.abandon() }
        case (_, .off):
            state.withLock {
                $0.applied = .off
                $0.session = nil
            }
            // A failure means bluetoothd no longer has it (NotReady, "No discovery started").
            try? await session?.stop()
        default:
            try await client.setDiscoveryFilter(adapter, want.filter)
            state.withLock { $0.applied = want }
        }
    }

    /// Hands every sighting of `session` to the user scans running at that moment; ends with it.
    func forward(_ session: ScanSession) {
        _ = client.spawn { [weak self] in
            for await d in session.devices {
                guard let self else { return }
                let ad = Advertisement(d)
                for c in self.state.withLock({ Array($0.scans.values) }) { c.yield(ad) }
            }
        }
    }

    /// Starts the adapter watcher unless it runs (called under ``serial``, like every start and
    /// stop of it): when the adapter goes off or away BlueZ has dropped the session; when it is
    /// back (powered) the session is started again.
    func watchAdapter() {
        guard state.withLock({ $0.watcher == nil }) else { return }
        let (events, _, remove) = client.listen()
        let path = adapter.path
        let watcher = client.spawn { [weak self] in
            defer { remove() }
            for await e in events {
                guard !Task.isCancelled, let self else { return }
                switch e {
                case let .changed(p, i, changed, _) where p == path && i == BlueZClient.adapter1:
                    guard let on = changed["Powered"]?.boolValue else { continue }
                    if on { try? await self.reconcile() } else { self.lost() }
                case let .removed(p, i) where p == path && i.contains(BlueZClient.adapter1):
                    self.lost()
                case let .added(p, i) where p == path && i.contains(BlueZClient.adapter1):
                    if self.client.isPowered(self.adapter) { try? await self.reconcile() }
                case .closed: return
                default: break
                }
            }
        }
        state.withLock { $0.watcher = watcher }
    }

    /// BlueZ ended the session by itself (adapter off, bluetoothd gone).
    func lost() {
        let session = state.withLock { s -> ScanSession? in
            defer {
                s.applied = .off
                s.session = nil
                s.losses += 1
            }
            return s.session
        }
        session?.abandon()
    }
}

extension Advertisement {
    /// A sighting as the bridge sees it: the address upper case, the rest as BlueZ gives it.
    init(_ d: DiscoveredDevice) {
        self.init(address: d.address.uppercased(), name: d.name, rssi: d.rssi.map(Int.init), serviceUUIDs: d.uuids,
                  manufacturerData: d.manufacturerData, serviceData: d.serviceData, connected: d.connected, paired: d.paired)
    }
}

/// A FIFO lock for async code: one holder at a time, waiters served in arrival order.
final class SerialGate: Sendable {
    private struct State {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func acquire() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                guard s.busy else {
                    s.busy = true
                    return true
                }
                s.waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    func release() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard !s.waiters.isEmpty else {
                s.busy = false
                return nil
            }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }
}
