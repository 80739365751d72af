import Logging
import Synchronization

/// Several adapters in one bridge (`bluetooth.adapters`, docs/scale-out.md "Several adapters"):
/// one `BLECentral` over one per adapter. A device is connected through the adapter it is pinned
/// to (its `adapter` key), or else through the one that saw it strongest in the last scans; an
/// adapter whose connect to the device just failed goes last, one that holds its
/// `max_connections` links is skipped. Each adapter has its own connect gate (bluetoothd
/// serialises per adapter, spec/bluez.md behaviour 6), so two adapters connect at once. When an
/// adapter disappears or is powered off its links drop; the sessions reconnect and the next
/// adapter that sees the device takes them.
public final class AdapterSet: BLECentral, BLEAdapterControl, Sendable {
    public struct Member: Sendable {
        public var name: String
        public var central: any BLECentral
        public var maxConnections: Int

        public init(name: String, central: any BLECentral, maxConnections: Int) {
            self.name = name
            self.central = central
            self.maxConnections = maxConnections
        }
    }

    struct Entry: Sendable {
        let member: Member
        let index: Int
        let gate = ConnectGate()
        var name: String { member.name }
    }

    struct State {
        /// The addresses linked (or being connected) through each adapter.
        var links: [String: Set<String>] = [:]
        /// The last sighting of each address through each adapter (of the ``ScanState/capacity``
        /// addresses heard last: random addresses must not grow this).
        var sightings = RecentMap<String, [String: (rssi: Int, at: BridgeInstant)]>(capacity: ScanState.capacity)
        /// When a connect to an address through an adapter last failed.
        var failures: [String: [String: BridgeInstant]] = [:]
        /// When each address was last surveyed (``survey(_:within:)``).
        var surveyed: [String: BridgeInstant] = [:]
    }

    /// How long a sighting counts when choosing an adapter.
    public static let sightingLifetime: Duration = .seconds(60)
    /// How long an adapter whose connect failed goes last for that device.
    public static let failurePenalty: Duration = .seconds(30)

    let entries: [Entry]
    let pinned: Mutex<[String: String]>
    var pins: [String: String] { pinned.withLock { $0 } }
    let logger: Logger
    let state = Mutex(State())
    /// The bridge's one clock: sightings, failures and surveys are stamped with its `now`, and a
    /// survey waits with its `sleep` (the runtime's: the event loop's timers; the tests': a
    /// `ManualClock`).
    let clock: BridgeClock

    /// - Parameter pins: device address (upper case) → adapter name (the devices' `adapter` key).
    /// How long a connect may first listen on every adapter for the device (``survey(_:within:)``).
    public static let surveyTime: Duration = .seconds(2)

    public init(_ members: [Member], pins: [String: String] = [:], logger: Logger = Logger(label: "gatt2mqtt.adapters"),
                clock: BridgeClock = .continuous) {
        self.clock = clock
        entries = members.enumerated().map { Entry(member: $1, index: $0) }
        pinned = Mutex(Dictionary(pins.map { ($0.key.uppercased(), $0.value) }, uniquingKeysWith: { a, _ in a }))
        self.logger = logger
    }

    /// Pins a device to an adapter (nil: unpins it): a device added or changed at runtime.
    public func pin(_ address: String, to adapter: String?) {
        pinned.withLock { $0[address.uppercased()] = adapter }
    }

    /// The gate is per adapter, inside: sessions do not serialise connects across adapters.
    public var serialisesConnects: Bool { true }

    /// The links each adapter holds now, by adapter name (for health and the tests).
    public var linkCounts: [String: Int] {
        state.withLock { s in Dictionary(uniqueKeysWithValues: entries.map { ($0.name, s.links[$0.name]?.count ?? 0) }) }
    }

    /// The adapter of the link to `address`, if one is up (or being connected).
    public func adapter(of address: String) -> String? {
        let a = address.uppercased()
        return state.withLock { s in entries.first { s.links[$0.name]?.contains(a) == true }?.name }
    }

    /// The adapters to try for `address`, best first.
    func order(for address: String, at now: BridgeInstant) -> [Entry] {
        if let pin = pins[address] { return entries.filter { $0.name == pin } }
        return state.withLock { s in
            let seen = s.sightings[address] ?? [:]
            let failed = s.failures[address] ?? [:]
            func key(_ e: Entry) -> (Int, Int, Int, Int) {
                let recentFailure = failed[e.name].map { now - $0 < Self.failurePenalty } ?? false
                let rssi = seen[e.name].flatMap { now - $0.at <= Self.sightingLifetime ? $0.rssi : nil }
                return (recentFailure ? 1 : 0, -(rssi ?? -1_000), s.links[e.name]?.count ?? 0, e.index)
            }
            // An adapter at its link limit is skipped (unless it holds this very device).
            let open = entries.filter { e in
                let links = s.links[e.name] ?? []
                return links.contains(address) || links.count < e.member.maxConnections
            }
            return open.sorted { key($0) < key($1) }
        }
    }

    public func connect(address: String, notify: [CharacteristicID], timeout: Duration) async throws(BLEError) -> any BLELink {
        try await connect(address: address, notify: notify, pair: false, timeout: timeout)
    }

    public func connect(address: String, notify: [CharacteristicID], pair: Bool, timeout: Duration) async throws(BLEError) -> any BLELink {
        let a = address.uppercased()
        var lastError: BLEError?
        // No recent sighting through the adapters that could take it: listen first, so the
        // choice is by signal (a cluster node's continuous scan keeps them fresh).
        if needsSurvey(a, at: clock.now()) { await survey(a, within: min(Self.surveyTime, timeout / 4)) }
        for e in order(for: a, at: clock.now()) {
            do throws(BLEError) {
                let link = try await e.gate.withPermit { () async throws(BLEError) -> any BLELink in
                    guard reserve(e, a) else {
                        throw BLEError(.inProgress, "\(e.name) holds its maximum of \(e.member.maxConnections) links")
                    }
                    do throws(BLEError) {
                        return try await e.member.central.connect(address: a, notify: notify, pair: pair, timeout: timeout)
                    } catch {
                        release(e.name, a)
                        throw error
                    }
                }
                state.withLock { $0.failures[a]?[e.name] = nil }
                return AdapterLink(inner: link, release: { [weak self] in self?.release(e.name, a) })
            } catch {
                state.withLock { $0.failures[a, default: [:]][e.name] = clock.now() }
                logger.debug("connect through an adapter failed", metadata: ["adapter": "\(e.name)", "device": "\(a)", "error": "\(error)"])
                lastError = error
            }
        }
        if let lastError { throw lastError }
        if let pin = pins[a], !entries.contains(where: { $0.name == pin }) {
            throw BLEError(.notFound, "\(a) is pinned to \(pin), which is not one of the bridge's adapters")
        }
        throw BLEError(.inProgress, "every adapter holds its maximum of links")
    }

    /// Whether a connect to `address` should survey first: not pinned, more than one adapter
    /// could take it, and some of them has no recent sighting of it.
    func needsSurvey(_ address: String, at now: BridgeInstant) -> Bool {
        guard pins[address] == nil else { return false }
        let open = order(for: address, at: now).filter { $0.member.central.adapterControl != nil }
        guard open.count > 1 else { return false }
        return state.withLock { s in
            if let last = s.surveyed[address], now - last < Self.sightingLifetime { return false }
            return open.contains { e in s.sightings[address]?[e.name].map { now - $0.at > Self.sightingLifetime } ?? true }
        }
    }

    /// Scans on every adapter until each has reported `address` or `within` passed; the
    /// sightings are recorded on the way (``record(_:on:)``).
    func survey(_ address: String, within: Duration) async {
        guard let scan = try? await scan() else { return }
        let stopped = Mutex(false)
        let stop: @Sendable () async -> Void = {
            guard stopped.withLock({ s in defer { s = true }; return !s }) else { return }
            await scan.stop()
        }
        let timer = Task { [clock] in
            try? await clock.sleep(within)
            await stop()
        }
        let started = clock.now()
        for await ad in scan.advertisements where ad.address.uppercased() == address {
            let now = clock.now()
            if !needsSurvey(address, at: now) { break }
            if now - started >= within { break }
        }
        timer.cancel()
        await stop()
        let surveyed = clock.now()
        state.withLock { $0.surveyed[address] = surveyed }
    }

    func reserve(_ e: Entry, _ address: String) -> Bool {
        state.withLock { s in
            var set = s.links[e.name] ?? []
            guard set.contains(address) || set.count < e.member.maxConnections else { return false }
            set.insert(address)
            s.links[e.name] = set
            return true
        }
    }

    func release(_ adapter: String, _ address: String) {
        state.withLock { _ = $0.links[adapter]?.remove(address) }
    }

    // MARK: The management side

    /// Discovery on every adapter that can, merged: each advertisement carries the strongest
    /// recent RSSI of that device over the adapters (and is recorded for the choice above).
    /// Fails only when no adapter can scan.
    public func scan() async throws(BLEError) -> BLEScan {
        var scans: [(String, BLEScan)] = []
        var lastError: BLEError?
        for e in entries {
            guard let control = e.member.central.adapterControl else { continue }
            do throws(BLEError) { scans.append((e.name, try await control.scan())) } catch {
                logger.warning("an adapter cannot scan", metadata: ["adapter": "\(e.name)", "error": "\(error)"])
                lastError = error
            }
        }
        guard !scans.isEmpty else { throw lastError ?? BLEError(.notSupported, "no adapter can scan") }
        let started = scans
        let (stream, sink) = AsyncStream.makeStream(of: Advertisement.self)
        let feeders = started.map { name, scan in
            Task {
                for await ad in scan.advertisements {
                    var merged = ad
                    merged.rssi = self.record(ad, on: name)
                    sink.yield(merged)
                }
            }
        }
        let done = Task {
            for f in feeders { await f.value }
            sink.finish()
        }
        return BLEScan(advertisements: stream, stop: {
            for (_, scan) in started { await scan.stop() }
            await done.value
        })
    }

    /// Records a sighting through `adapter`; returns the strongest recent RSSI of the device.
    func record(_ ad: Advertisement, on adapter: String) -> Int? {
        let a = ad.address.uppercased()
        let now = clock.now()
        return state.withLock { s in
            if let r = ad.rssi {
                var through = s.sightings[a] ?? [:]
                through[adapter] = (r, now)
                s.sightings[a] = through
            }
            return s.sightings[a]?.values.filter { now - $0.at <= Self.sightingLifetime }.map(\.rssi).max() ?? ad.rssi
        }
    }

    /// Pairs through the adapter that holds the device's link, else the one it would connect through.
    public func pair(address: String, timeout: Duration) async throws(BLEError) {
        let a = address.uppercased()
        let name = adapter(of: a) ?? order(for: a, at: clock.now()).first?.name
        guard let e = entries.first(where: { $0.name == name }), let control = e.member.central.adapterControl else {
            throw BLEError(.notSupported, "no adapter can pair \(a)")
        }
        try await control.pair(address: a, timeout: timeout)
    }

    /// Whether an adapter that holds none of this set's links to `address` holds one all the same.
    public func holdsUnusedLink(to address: String) -> Bool {
        unusedLinkHolders(address).contains { $0.holdsUnusedLink(to: address) }
    }

    /// Closes the links to `address` that adapters hold without one of this set's links.
    public func closeUnusedLink(to address: String) async throws(BLEError) {
        for control in unusedLinkHolders(address) where control.holdsUnusedLink(to: address) {
            try await control.closeUnusedLink(to: address)
        }
    }

    /// One member is enough: they share the Bluetooth daemon and see all its adapters; every
    /// adapter of the set is kept.
    public func takeOver(address: String, keeping adapters: Set<String>) async -> [String] {
        let mine = Set(entries.map(\.name))
        return await entries.first?.member.central.adapterControl?.takeOver(address: address, keeping: adapters.union(mine)) ?? []
    }

    /// The same as ``takeOver(address:keeping:)``: one member answers for the daemon, every
    /// adapter of the set kept out.
    public func linkedThroughAnotherAdapter(_ address: String, keeping adapters: Set<String>) -> Bool {
        let mine = Set(entries.map(\.name))
        return entries.first?.member.central.adapterControl?.linkedThroughAnotherAdapter(address, keeping: adapters.union(mine)) ?? false
    }

    /// The management sides of the adapters through which this set has no link to `address`.
    func unusedLinkHolders(_ address: String) -> [any BLEAdapterControl] {
        let a = address.uppercased()
        let mine = state.withLock { s in Set(entries.filter { s.links[$0.name]?.contains(a) == true }.map(\.name)) }
        return entries.filter { !mine.contains($0.name) }.compactMap { $0.member.central.adapterControl }
    }

    /// Forgets the device on every adapter (each keeps its own bond).
    public func forget(address: String) async throws(BLEError) {
        var lastError: BLEError?
        var done = false
        for e in entries {
            guard let control = e.member.central.adapterControl else { continue }
            do throws(BLEError) {
                try await control.forget(address: address)
                done = true
            } catch { lastError = error }
        }
        if !done, let lastError { throw lastError }
    }
}

/// A link through one of an ``AdapterSet``'s adapters: counts against that adapter until it
/// is lost or closed.
final class AdapterLink: BLELink {
    let inner: any BLELink
    let onRelease: Mutex<(@Sendable () -> Void)?>

    init(inner: any BLELink, release: @escaping @Sendable () -> Void) {
        self.inner = inner
        onRelease = Mutex(release)
    }

    func release() { onRelease.withLock { r in defer { r = nil }; return r }?() }

    var notifications: AsyncStream<GATTNotification> { inner.notifications }
    var mtu: Int { inner.mtu }
    var pairedOnConnect: Bool { inner.pairedOnConnect }
    var pairDuration: Duration? { inner.pairDuration }

    func write(_ value: [UInt8], to characteristic: CharacteristicID, withResponse: Bool) async throws(BLEError) {
        try await inner.write(value, to: characteristic, withResponse: withResponse)
    }

    func read(_ characteristic: CharacteristicID) async throws(BLEError) -> [UInt8] { try await inner.read(characteristic) }

    func startWrites(_ writes: [DeviceRequest.Write], completion: @escaping @Sendable (Result<Void, BLEError>) -> Void) -> Bool {
        inner.startWrites(writes, completion: completion)
    }

    func disconnect() async {
        await inner.disconnect()
        release()
    }

    func deliverNotifications(to handler: @escaping @Sendable (GATTNotification) -> Void) async {
        await inner.deliverNotifications(to: handler)
        release()
    }
}
