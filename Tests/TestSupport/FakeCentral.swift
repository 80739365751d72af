import BridgeCore
import Synchronization

/// A scripted device behind a ``FakeCentral``: answers writes by notifying, can be away, can drop.
public final class FakeDevice: Sendable {
    public struct State: Sendable {
        public var present = true
        public var link: FakeLink?
        public var writes: [[UInt8]] = []
        public var answer = true
        public var connects = 0
        public var reads = 0
        /// Writes answer at once but BlueZ's return of the write is held until `releaseWrites()`.
        public var holdWrites = false
        public var held: [CheckedContinuation<Void, Never>] = []
        /// Its links take a GATT operation's writes by `startWrites` (with a completion, as
        /// BlueZ's do) instead of only by `write`; how many operations went that way.
        public var startsWrites = false
        public var startedWrites = 0
        /// A connect to it is under way (BlueZ shows such a device `Connected` while it resolves
        /// the services, before `Connect` returns).
        public var connecting = false
    }

    public let state = Mutex(State())
    /// Every write the device took, in order (to wait on).
    public let writeLog = WaitableLog<[UInt8]>()
    /// Every read the device answered (to wait on).
    public let readLog = WaitableLog<CharacteristicID>()

    public init() {}

    public var writes: [[UInt8]] { state.withLock { $0.writes } }
    public func setPresent(_ on: Bool) { state.withLock { $0.present = on } }
    public func setAnswering(_ on: Bool) { state.withLock { $0.answer = on } }
    public func setHoldingWrites(_ on: Bool) { state.withLock { $0.holdWrites = on } }
    public func setStartingWrites(_ on: Bool) { state.withLock { $0.startsWrites = on } }
    public var heldWrites: Int { state.withLock { $0.held.count } }

    /// Returns every held write (and stops holding new ones).
    public func releaseWrites() {
        let held = state.withLock { s in
            s.holdWrites = false
            defer { s.held = [] }
            return s.held
        }
        for c in held { c.resume() }
    }

    /// Drops the link now (as a link loss).
    public func dropLink() { state.withLock { s in s.link?.continuation.finish(); s.link = nil } }

    public func notify(_ value: [UInt8], on uuid: String = "FFF2") {
        let link = state.withLock { $0.link }
        link?.continuation.yield(GATTNotification(characteristic: CharacteristicID(uuid), value: value))
    }
}

/// The link to a ``FakeDevice``: writes `[1, x]` are answered by notifying `[1, x]` on FFF2;
/// reads give `[42]`.
public final class FakeLink: BLELink {
    public let notifications: AsyncStream<GATTNotification>
    let continuation: AsyncStream<GATTNotification>.Continuation
    public let device: FakeDevice
    public let mtu = 185

    init(device: FakeDevice) {
        self.device = device
        (notifications, continuation) = AsyncStream.makeStream(of: GATTNotification.self)
    }

    public func write(_ value: [UInt8], to characteristic: CharacteristicID, withResponse: Bool) async throws(BLEError) {
        let (connected, answer) = device.state.withLock { s in (s.link === self, s.answer) }
        guard connected else { throw BLEError(.notConnected, "Not connected") }
        device.state.withLock { $0.writes.append(value) }
        device.writeLog.append(value)
        // The scripted device: [1, x] → notifies [1, x] (the answer) on FFF2.
        if answer, value.first == 1, value.count == 2 { continuation.yield(GATTNotification(characteristic: CharacteristicID("FFF2"), value: value)) }
        if device.state.withLock({ $0.holdWrites }) {
            await withCheckedContinuation { c in device.state.withLock { $0.held.append(c) } }
        }
    }

    /// When the device ``FakeDevice/State/startsWrites``: the writes as `write` does them, in a
    /// task of their own, the outcome to `completion`.
    public func startWrites(_ writes: [DeviceRequest.Write], completion: @escaping @Sendable (Result<Void, BLEError>) -> Void) -> Bool {
        guard device.state.withLock({ s in
            if s.startsWrites { s.startedWrites += 1 }
            return s.startsWrites
        }) else { return false }
        Task {
            do throws(BLEError) {
                for w in writes { try await write(w.value, to: w.characteristic, withResponse: w.withResponse) }
                completion(.success(()))
            } catch {
                completion(.failure(error))
            }
        }
        return true
    }

    public func read(_ characteristic: CharacteristicID) async throws(BLEError) -> [UInt8] {
        device.state.withLock { $0.reads += 1 }
        device.readLog.append(characteristic)
        return [42]
    }

    public func disconnect() async {
        device.state.withLock { s in if s.link === self { s.link = nil } }
        continuation.finish()
    }
}

/// The BLE side of the bridge over ``FakeDevice``s, by address.
public final class FakeCentral: BLECentral {
    public let devices: [String: FakeDevice]
    public let connectDelay: Duration
    /// Absent devices are searched for until the connect's `timeout`, as BlueZCentral's scan does.
    public let scanUntilTimeout: Bool
    /// (now, maximum) connects in progress at once.
    public let concurrency = Mutex((now: 0, max: 0))

    public init(_ devices: [String: FakeDevice], connectDelay: Duration = .zero, scanUntilTimeout: Bool = false) {
        self.devices = devices
        self.connectDelay = connectDelay
        self.scanUntilTimeout = scanUntilTimeout
    }

    public func connect(address: String, notify: [CharacteristicID], timeout: Duration) async throws(BLEError) -> any BLELink {
        concurrency.withLock { $0.now += 1; $0.max = max($0.max, $0.now) }
        defer { concurrency.withLock { $0.now -= 1 } }
        // The time a connect or a scan takes (the fake's behaviour, not a wait of the test).
        if connectDelay > .zero {
            devices[address]?.state.withLock { $0.connecting = true }
            try? await Task.sleep(for: connectDelay)
            devices[address]?.state.withLock { $0.connecting = false }
        }
        guard let d = devices[address], d.state.withLock({ $0.present }) else {
            try? await Task.sleep(for: scanUntilTimeout ? timeout : .milliseconds(20))
            throw BLEError(.notFound, "le-connection-abort-by-local")
        }
        let link = FakeLink(device: d)
        d.state.withLock { $0.link = link; $0.connects += 1 }
        return link
    }
}

/// A ``FakeCentral`` with the adapter's management side: a scripted scan; scans, pairs and
/// forgets recorded in ``log``.
public final class FakeAdapterCentral: BLECentral, BLEAdapterControl {
    public let inner: FakeCentral
    public let advertisements: [Advertisement]
    /// How often a scan hands the advertisements again (nil: once per scan).
    public let repeatInterval: Duration?
    public let log = CallLog()
    /// Answers ``holdsUnusedLink(to:)`` from the device (a link, or a connect under way) and
    /// closes it on ``closeUnusedLink(to:)`` (logged `close <address>`); false: neither, as a
    /// central that cannot tell.
    public let reportsLinks: Bool

    /// - Parameter repeatingEvery: hand the advertisements again at this interval while a scan
    ///   runs, as devices in range do. The cluster drops a sighting older than `lost_after`, and
    ///   the test process can stall for longer than that while the suite runs in parallel.
    public init(_ inner: FakeCentral, advertisements: [Advertisement] = [], repeatingEvery: Duration? = nil, reportsLinks: Bool = false) {
        self.inner = inner
        self.advertisements = advertisements
        repeatInterval = repeatingEvery
        self.reportsLinks = reportsLinks
    }

    public func holdsUnusedLink(to address: String) -> Bool {
        guard reportsLinks, let d = inner.devices[address] else { return false }
        return d.state.withLock { $0.link != nil || $0.connecting }
    }

    public func closeUnusedLink(to address: String) async throws(BLEError) {
        guard reportsLinks else { return }
        log.add("close \(address)")
        inner.devices[address]?.dropLink()
    }

    public func connect(address: String, notify: [CharacteristicID], timeout: Duration) async throws(BLEError) -> any BLELink {
        try await inner.connect(address: address, notify: notify, timeout: timeout)
    }

    public func scan() async throws(BLEError) -> BLEScan {
        log.add("scan")
        let (stream, continuation) = AsyncStream.makeStream(of: Advertisement.self)
        for ad in advertisements { continuation.yield(ad) }
        let again = repeatInterval.map { interval in
            Task { [advertisements] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    for ad in advertisements {
                        if case .terminated = continuation.yield(ad) { return }
                    }
                }
            }
        }
        return BLEScan(advertisements: stream, stop: { [log] in
            log.add("stop")
            again?.cancel()
            continuation.finish()
        })
    }

    public func pair(address: String, timeout: Duration) async throws(BLEError) { log.add("pair \(address)") }
    public func forget(address: String) async throws(BLEError) { log.add("forget \(address)") }
}

/// The calls a test double received, in order.
public final class CallLog: Sendable {
    private let storage = Mutex<[String]>([])
    public init() {}
    public func add(_ call: String) { storage.withLock { $0.append(call) } }
    public var calls: [String] { storage.withLock { $0 } }
}
