import DBus
import PacketSocket
import Reactor
import Synchronization

/// An emulated bluetoothd (5.66 by default) serving `org.bluez` on a D-Bus connection, with
/// simulated devices and fault injection (issue 4 §3; spec/bluez.md, "Objects a client sees" and
/// "bluetoothd behaviours").
///
/// ```swift
/// let sim = BlueZSimulator(connection: conn, options: .init(removalDelay: .milliseconds(200)))
/// try await sim.start()
/// let hr = GenericDevice.batteryHeartRate()
/// try sim.add(hr)
/// ```
/// Everything the emulator does is visible only over D-Bus; tests drive clients against it.
///
/// The emulator runs on its connection's `Reactor.EventLoop`: method handlers, the tasks it spawns, its timers and its acquired sockets (docs/bluez.md "On an
/// event loop"), so a `WriteValue` that a device answers with a notification through an
/// AcquireNotify socket never leaves the loop thread.
public final class BlueZSimulator: Sendable {
    /// Which bluetoothd to imitate where versions differ (spec/bluez.md behaviour 6).
    public enum Version: Sendable, Equatable {
        /// Concurrent Connect → `org.bluez.Error.Failed: Operation already in progress`.
        case v5_66
        /// Concurrent Connect → `org.bluez.Error.InProgress`.
        case v5_81
    }

    /// Timings and identity of the emulated adapters; the defaults are bluetoothd's, tests shorten them.
    public struct Options: Sendable {
        public var version: Version
        /// The first adapter's `Address`; the n-th adapter (counting from 0) gets this address
        /// with n added to its last byte (``address(ofAdapter:)``).
        public var adapterAddress: String
        /// The adapters one bluetoothd serves, each at `/org/bluez/<name>` (docs/bluez.md
        /// "Several adapters"); the first is the one the methods without an adapter act on.
        /// Names are D-Bus path elements (letters, digits, `_`), distinct, at least one.
        public var adapters: [String]
        /// Connect() returns after this (spec behaviour 1: before ServicesResolved).
        public var connectDelay: Duration
        /// ServicesResolved goes true this long after Connect() returned.
        public var resolveDelay: Duration
        /// Disconnect() of a connected device takes this long (spec behaviour 5: about 2 s).
        public var disconnectDelay: Duration
        /// Connect to an absent device fails after this (spec behaviour 6: 20–40 s).
        public var absentConnectTimeout: Duration
        /// Unpaired devices vanish this long after discovery stops or they disconnect (behaviour 4: ~30 s).
        public var removalDelay: Duration
        /// Export `org.gatt2mqtt.Simulator1` at ``BlueZSimulator/controlPath`` (fault injection over D-Bus).
        public var controlInterface: Bool
        /// While the adapter is discovering, every device in range and not connected advertises
        /// this often, and each advertisement reaches clients as `PropertiesChanged` on its Device1
        /// (behaviour 10; docs/bluez.md "While discovering"); nil: devices are announced once
        /// (InterfacesAdded) and stay silent. Nothing runs while nobody discovers.
        public var advertisingInterval: Duration?
        /// The RSSI of each advertisement is the device's advertised RSSI ± up to this many dBm
        /// (kept within bluetoothd's −127…20; negative counts as 0).
        public var rssiJitter: Int16
        /// Seed of the RSSI jitter: one seed gives one sequence of advertisements.
        public var jitterSeed: UInt64
        /// How often bluetoothd sends a request again while the link's security cannot be
        /// raised (a refused pairing; docs/bluez.md "Automatic security"): about 1.2 s on the
        /// real stack (bluez issue #21).
        public var securityRetryInterval: Duration

        public init(version: Version = .v5_66, adapterAddress: String = "00:1A:7D:DA:71:13", adapters: [String] = ["hci0"],
                    connectDelay: Duration = .milliseconds(20), resolveDelay: Duration = .milliseconds(50),
                    disconnectDelay: Duration = .seconds(2), absentConnectTimeout: Duration = .seconds(20),
                    removalDelay: Duration = .seconds(30), controlInterface: Bool = true,
                    advertisingInterval: Duration? = BlueZSimulator.defaultAdvertisingInterval, rssiJitter: Int16 = 3,
                    jitterSeed: UInt64 = 0x6761_7474_326D_7174, securityRetryInterval: Duration = .milliseconds(1200))
        {
            self.securityRetryInterval = securityRetryInterval
            self.controlInterface = controlInterface
            self.advertisingInterval = advertisingInterval
            self.rssiJitter = rssiJitter
            self.jitterSeed = jitterSeed
            self.version = version
            self.adapterAddress = adapterAddress
            self.adapters = adapters
            self.connectDelay = connectDelay
            self.resolveDelay = resolveDelay
            self.disconnectDelay = disconnectDelay
            self.absentConnectTimeout = absentConnectTimeout
            self.removalDelay = removalDelay
        }

        /// The `Address` of the adapter at `index` in ``adapters``: ``adapterAddress`` with
        /// `index` added to its last byte (modulo 256).
        public func address(ofAdapter index: Int) -> String {
            var bytes = adapterAddress.split(separator: ":").map(String.init)
            guard let last = bytes.last.flatMap({ UInt8($0, radix: 16) }) else { return adapterAddress }
            let byte = String(UInt8(truncatingIfNeeded: Int(last) + index), radix: 16, uppercase: true)
            bytes[bytes.count - 1] = byte.count < 2 ? "0" + byte : byte
            return bytes.joined(separator: ":")
        }

        /// Why ``adapters`` cannot be served (``BlueZSimulator/start()`` throws
        /// ``BlueZSimulatorError/invalidAdapters(_:)`` with it), nil when it can.
        public var adaptersProblem: String? {
            guard !adapters.isEmpty else { return "no adapter to serve" }
            for name in adapters {
                guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
                    return "adapter name \"\(name)\": expected letters, digits and _ (e.g. hci1)"
                }
            }
            guard Set(adapters).count == adapters.count else { return "adapter names repeat: \(adapters.joined(separator: ","))" }
            return nil
        }
    }

    /// A BlueZ error to answer a method with (fault injection).
    public struct InjectedError: Sendable, Equatable {
        /// Full D-Bus error name, e.g. `org.bluez.Error.Failed`.
        public var name: String
        public var message: String
        public init(name: String, message: String) {
            self.name = name
            self.message = message
        }
    }

    /// Faults of one device (issue 4 §3, "fault injection").
    public struct Faults: Sendable, Equatable {
        /// Connect() fails at once with `Failed: Software caused connection abort`.
        public var refuseConnections = false
        /// The link drops on the N-th write (counted from when this is set, 1-based; requests
        /// fail with `Failed: Operation failed`, behaviour 5).
        public var dropLinkOnWrite: Int?
        /// Method name (`Connect`, `ReadValue`, `WriteValue`, `StartNotify`, …) → error answered instead.
        public var errors: [String: InjectedError] = [:]
        /// Every device method waits this long before doing anything.
        public var replyDelay: Duration = .zero
        /// The device stops answering: Connect times out as for an absent device, GATT calls never
        /// answer until the link drops.
        public var silent = false
        /// The device refuses every pairing (SMP Pairing Failed): `Pair` fails
        /// `AuthenticationFailed`, and an access to an encrypted characteristic of an unpaired
        /// device gets no answer until the link drops (bluetoothd retries it, docs/bluez.md
        /// "Automatic security").
        public var refusePairing = false
        /// The N-th notification value the device sends from now on (1-based, counting values
        /// that reach a subscriber, through PropertiesChanged or an AcquireNotify socket) is lost.
        public var dropNotification: Int?
        /// The N-th notification value the device sends from now on (counted as for
        /// ``dropNotification``) is delivered twice.
        public var duplicateNotification: Int?
        public init() {}
    }

    /// One call a device received through the emulator, for assertions.
    public struct Received: Sendable, Equatable {
        /// `Connect`, `Disconnect`, `ReadValue`, `WriteValue`, `StartNotify`, `StopNotify`, `Pair`,
        /// `AcquireWrite`, `AcquireNotify`. A packet read from an AcquireWrite socket is recorded
        /// as a `WriteValue` of type `command` whose sender is `socket`. `SecurityPairing`: a
        /// pairing bluetoothd started by itself to raise the link's security for an access to
        /// `characteristic` (delivered: it paired; no sender).
        public var method: String
        /// Characteristic UUID (128-bit lowercase) for GATT calls.
        public var characteristic: String?
        public var value: [UInt8]
        /// `request` or `command` for writes.
        public var writeType: String?
        /// Whether it reached the device (a command without write-without-response is dropped).
        public var delivered: Bool
        /// The caller's unique bus name.
        public var sender: String?
    }

    struct CharState {
        var uuid: String
        var flags: [String]
        var value: [UInt8]
        var sessions: Set<String> = []
        /// The emulator's end of an AcquireWrite socket (`WriteAcquired` true while set).
        var writeIO: PacketSocket?
        /// The emulator's end of an AcquireNotify socket (`NotifyAcquired` true while set).
        var notifyIO: PacketSocket?
    }

    /// One device as one adapter sees it (one `Device1` object per adapter and device, as
    /// bluetoothd keeps them): the key of ``State/devices``.
    struct DeviceKey: Hashable, Sendable {
        /// The adapter's name (`hci0`).
        var adapter: String
        /// Upper case.
        var address: String
    }

    /// A device's object under one adapter: what that adapter's radio hears of it, and what
    /// bluetoothd keeps per adapter (link, services, bond).
    struct DeviceState {
        let device: any SimulatedDevice
        let path: DBusObjectPath
        /// In range of this adapter's radio.
        var inRange = true
        var exported = false
        var connected = false
        var connecting: UInt64?
        var cancelConnect = false
        var disconnecting = false
        var resolved = false
        var gattExported = false
        var paired = false
        /// Whether bluetoothd would forget it by itself (when discovery ends, or at disconnect):
        /// true until a client connects or pairs it (5.66 `dev_connect` and `Pair` call
        /// `btd_device_set_temporary(false)`, even when the attempt fails); then it stays, with
        /// its GATT services as UUIDs, until RemoveDevice.
        var temporary = true
        var epoch: UInt64 = 0
        var chars: [DBusObjectPath: CharState] = [:]
        var removalGeneration: UInt64 = 0
        /// What clients were last told (Device1 `RSSI`, nil: none since discovery started;
        /// `ManufacturerData`, `ServiceData`): advertisements are compared with it (behaviour 10).
        var reportedRSSI: Int16?
        /// ``BlueZSimulator/setRSSI(_:_:adapter:)``: the RSSI this adapter receives the device at,
        /// instead of its advertisement's.
        var rssiOverride: Int16?
        var reportedManufacturerData: [UInt16: [UInt8]] = [:]
        var reportedServiceData: [String: [UInt8]] = [:]

        /// The RSSI this adapter receives the device at (before jitter): the override, else the
        /// advertised one.
        var rssi: Int16 { rssiOverride ?? device.advertisement.rssi }
    }

    /// What belongs to the peripheral itself, whichever adapter sees it: its faults and their
    /// counts, and its one link.
    struct PeripheralState {
        let device: any SimulatedDevice
        var faults = Faults()
        var writeCount = 0
        var notifyCount = 0
        /// The adapter the peripheral has its link with (or is being connected to while in
        /// range); nil: none. A peripheral takes one link at a time: while it has one it does
        /// not advertise, so the other adapters neither see it nor reach it (docs/bluez.md
        /// "Several adapters").
        var link: String?
    }

    /// One adapter (`org.bluez.Adapter1`): power, and its discovery sessions and filters per
    /// client connection.
    struct AdapterState {
        let name: String
        let path: DBusObjectPath
        var powered = true
        var sessions: [String: Filter] = [:]
        var filters: [String: Filter] = [:]
        /// The running advertiser's generation (only while discovering, ``startAdvertising(_:)``)
        /// and its task's id.
        var advertiser: UInt64?
        var advertiserTask: UInt64?

        var discovering: Bool { !sessions.isEmpty }

        /// Whether bluetoothd 5.66 reports an advertisement of `d` (received at `rssi`, default
        /// ``DeviceState/rssi``) with the discovery sessions running now. Two separate checks of
        /// `src/adapter.c`:
        /// `device_is_discoverable` — as soon as **any** session has a `Pattern`, only devices
        /// that some session's pattern matches are reported, to every client (so one client's
        /// pattern hides the other devices from another client's unfiltered scan); and
        /// `is_filter_match` — some session's UUIDs and RSSI let it through.
        func reports(_ d: DeviceState, rssi: Int16? = nil) -> Bool {
            let patterns = sessions.values.compactMap(\.pattern)
            if !patterns.isEmpty, !patterns.contains(where: { Filter.pattern($0, matches: d.device) }) { return false }
            return sessions.values.contains { $0.passes(d, rssi: rssi) }
        }
    }

    /// How many received calls are kept per device (the oldest go first).
    static let receivedLimit = 10_000

    struct State {
        /// By name.
        var adapters: [String: AdapterState]
        /// By address (upper case).
        var peripherals: [String: PeripheralState] = [:]
        var devices: [DeviceKey: DeviceState] = [:]
        var byPath: [DBusObjectPath: DeviceKey] = [:]
        var nextID: UInt64 = 1
        /// Running tasks by id; a spawned task removes itself when it ends.
        var tasks: [UInt64: Task<Void, Never>] = [:]
        /// Spawned tasks that ended before they were recorded.
        var endedEarly: Set<UInt64> = []
        /// What each device received (by address), outside `DeviceState` so that appending never
        /// copies it (a `DeviceState` snapshot taken during a call would share the buffer).
        var received: [String: [Received]] = [:]
        var started = false
        var stopped = false
        /// Registered agents by the unique bus name of the client that registered them.
        var agents: [String: DBusObjectPath] = [:]
        /// bluetoothd 5.66's default-agent queue (`src/agent.c`), by client: every registered
        /// agent is in it — the first one registered while it is empty at the head, later ones at
        /// the tail (`agent_create`) — and `RequestDefaultAgent` moves one to the head. The head
        /// is the default agent; unregistering it makes the next one default.
        var defaultAgents: [String] = []
        /// The `AgentManager1` calls received, in order: (caller, method).
        var agentManagerCalls: [(String, String)] = []
        /// The last advertiser generation handed out (``AdapterState/advertiser``).
        var advertiserGeneration: UInt64 = 0
        /// SplitMix64 state of the RSSI jitter.
        var jitter: UInt64

        init(seed: UInt64, adapters: [String]) {
            jitter = seed
            self.adapters = Dictionary(adapters.map { ($0, AdapterState(name: $0, path: DBusObjectPath("/org/bluez").appending($0))) },
                                       uniquingKeysWith: { first, _ in first })
        }

        mutating func id() -> UInt64 {
            defer { nextID += 1 }
            return nextID
        }

        /// Whether the adapter of `key` hears the device now: in range of it, and not linked
        /// through another adapter (a linked peripheral stops advertising).
        func hears(_ key: DeviceKey) -> Bool {
            guard let d = devices[key], d.inRange else { return false }
            return (peripherals[key.address]?.link ?? key.adapter) == key.adapter
        }

        /// Whether the adapter of `key` hears the device and its discovery reports it.
        func discovers(_ key: DeviceKey) -> Bool {
            guard hears(key), let d = devices[key], let a = adapters[key.adapter] else { return false }
            return a.reports(d)
        }

        /// Ends the peripheral's link (or connection attempt) through `key`'s adapter; false when
        /// it had none there.
        mutating func releaseLink(_ key: DeviceKey) -> Bool {
            guard peripherals[key.address]?.link == key.adapter else { return false }
            peripherals[key.address]!.link = nil
            return true
        }

        /// The device's objects, one per adapter, in the adapters' order.
        func keys(of address: String, among adapters: [String]) -> [DeviceKey] {
            adapters.map { DeviceKey(adapter: $0, address: address) }.filter { devices[$0] != nil }
        }

        /// The next value of the jitter generator (SplitMix64).
        mutating func random() -> UInt64 {
            jitter &+= 0x9E37_79B9_7F4A_7C15
            var z = jitter
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }

        /// Records a call, keeping the newest `receivedLimit` per device.
        mutating func record(_ address: String, _ r: Received) {
            received[address, default: []].append(r)
            if received[address]!.count > BlueZSimulator.receivedLimit + 1000 {
                received[address]!.removeFirst(1000)
            }
        }
    }

    /// A discovery filter (Adapter1.SetDiscoveryFilter): UUIDs, Pattern and RSSI are applied,
    /// DuplicateData decides whether unchanged advertising data is reported again.
    struct Filter: Sendable {
        var uuids: [String] = []
        /// `Pattern`, nil when the client set none. As in bluetoothd 5.66 (`device_is_discoverable`),
        /// a prefix of the address string (upper case, compared as given) or of the name; an empty
        /// one matches every device.
        var pattern: String?
        /// Advertisements weaker than this are not reported.
        var rssi: Int16?
        var duplicateData = false
        /// The client set a filter (bluetoothd then drops its RSSI delta threshold).
        var isSet = false

        /// Whether an advertisement of `d` received at `rssi` (default: ``DeviceState/rssi``)
        /// passes this filter's UUIDs and RSSI (5.66 `is_filter_match`, one client).
        func passes(_ d: DeviceState, rssi received: Int16? = nil) -> Bool {
            if let rssi, (received ?? d.rssi) < rssi { return false }
            if !uuids.isEmpty, Set(uuids).isDisjoint(with: d.device.advertisement.uuids) { return false }
            return true
        }

        /// Whether `d` passes this filter alone: UUIDs, RSSI and its own pattern.
        func matches(_ d: DeviceState, rssi received: Int16? = nil) -> Bool {
            guard passes(d, rssi: received) else { return false }
            return pattern.map { Self.pattern($0, matches: d.device) } ?? true
        }

        static func pattern(_ p: String, matches d: any SimulatedDevice) -> Bool {
            p.isEmpty || d.address.hasPrefix(p) || (d.advertisement.name.map { $0.hasPrefix(p) } ?? false)
        }
    }

    /// The connection the emulator serves on.
    public let connection: DBusConnection
    public let options: Options
    /// The first adapter's path (`/org/bluez/hci0` by default): the adapter the methods
    /// without an adapter act on.
    public let adapterPath: DBusObjectPath
    /// The first adapter's name (`hci0` by default).
    let firstAdapter: String
    let state: Mutex<State>

    public static let busName = "org.bluez"
    static let device1 = "org.bluez.Device1"
    static let adapter1 = "org.bluez.Adapter1"
    static let char1 = "org.bluez.GattCharacteristic1"
    static let service1 = "org.bluez.GattService1"

    public init(connection: DBusConnection, options: Options = Options()) {
        self.connection = connection
        self.options = options
        firstAdapter = options.adapters.first ?? "hci0"
        adapterPath = DBusObjectPath("/org/bluez").appending(firstAdapter)
        state = Mutex(State(seed: options.jitterSeed, adapters: options.adapters))
    }

    /// How often a device advertises while discovering unless ``Options/advertisingInterval`` says
    /// otherwise: once a second.
    public static let defaultAdvertisingInterval: Duration = .seconds(1)

    /// Owns `org.bluez`, exports `/` (ObjectManager), `/org/bluez` (AgentManager1) and the
    /// adapters, and starts watching callers' connections (sessions end with them, behaviour 2).
    /// Throws ``BlueZSimulatorError/invalidAdapters(_:)`` for unusable ``Options/adapters``.
    public func start() async throws(BlueZSimulatorError) {
        if let problem = options.adaptersProblem { throw .invalidAdapters(problem) }
        do {
            // Watch first, so a caller that vanishes right after its call is not missed.
            let owners = try await connection.signals(matching: DBusMatchRule(
                sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged"))
            let watcher = Task(executorPreference: connection.loop) { [weak self] in
                do {
                    for try await m in owners {
                        guard case let .string(name)? = m.body.first, name.hasPrefix(":"),
                              m.body.count == 3, case let .string(new) = m.body[2], new.isEmpty else { continue }
                        self?.callerGone(name)
                    }
                } catch {}
            }
            state.withLock { s in s.tasks[s.id()] = watcher }
            try connection.addObjectManager(at: .root)
            try connection.export("/org/bluez", interfaces: [agentManager()])
            for (index, name) in options.adapters.enumerated() {
                try connection.export(path(ofAdapter: name),
                                      interfaces: [adapterInterface(name, address: options.address(ofAdapter: index))])
            }
            if options.controlInterface { try connection.export(Self.controlPath, interfaces: [controlInterface()]) }
            let reply = try await connection.requestName(Self.busName)
            guard reply == .primaryOwner || reply == .alreadyOwner else { throw BlueZSimulatorError.nameTaken(Self.busName) }
        } catch let e as BlueZSimulatorError {
            throw e
        } catch let e as DBusError {
            throw .dbus(e)
        } catch {
            throw .dbus(.invalidArgument("\(error)"))
        }
        state.withLock { $0.started = true }
    }

    /// Stops timers and watchers and removes the exported objects; the connection stays open
    /// (the caller owns it).
    public func stop() {
        let tasks = state.withLock { s -> [Task<Void, Never>] in
            s.stopped = true
            defer { s.tasks = [:] }
            return Array(s.tasks.values)
        }
        for t in tasks { t.cancel() }
        let sockets = state.withLock { s in
            s.devices.values.flatMap { d in d.chars.values.flatMap { [$0.writeIO, $0.notifyIO].compactMap(\.self) } }
        }
        for io in sockets { io.shutdown() }
        try? connection.unexportTree("/org/bluez")
        try? connection.unexport(Self.controlPath)
    }

    // MARK: Adapters

    /// `/org/bluez/<name>`.
    func path(ofAdapter name: String) -> DBusObjectPath { DBusObjectPath("/org/bluez").appending(name) }

    /// The adapter `name` names (nil: the first), checked.
    func adapter(_ name: String?) throws(BlueZSimulatorError) -> String {
        guard let name else { return firstAdapter }
        guard options.adapters.contains(name) else { throw .unknownAdapter(name) }
        return name
    }

    /// The key of `address` under `adapter` (nil: the first), checked.
    func key(_ address: String, adapter: String?) throws(BlueZSimulatorError) -> DeviceKey {
        let key = DeviceKey(adapter: try self.adapter(adapter), address: address.uppercased())
        guard state.withLock({ $0.peripherals[key.address] != nil }) else { throw .unknownDevice(address) }
        return key
    }

    // MARK: Devices (Swift API)

    /// Puts `device` in range of every adapter. It is exported under an adapter
    /// (InterfacesAdded) when a discovery session of that adapter whose filter it matches is
    /// running, or at once under the first adapter with `alreadyConnected` (a link BlueZ already
    /// has there: exported connected and resolved, without RSSI).
    public func add(_ device: any SimulatedDevice, alreadyConnected: Bool = false) throws(BlueZSimulatorError) {
        let address = device.address.uppercased()
        let export = try state.withLock { (s) throws(BlueZSimulatorError) -> [DeviceKey] in
            guard s.peripherals[address] == nil else { throw .duplicateDevice(address) }
            s.peripherals[address] = PeripheralState(device: device, link: alreadyConnected ? firstAdapter : nil)
            for name in options.adapters {
                let key = DeviceKey(adapter: name, address: address)
                var d = DeviceState(device: device, path: devicePath(address, under: name))
                if alreadyConnected, name == firstAdapter {
                    d.connected = true
                    d.epoch = 1
                    d.temporary = false
                }
                s.devices[key] = d
                s.byPath[d.path] = key
            }
            return s.keys(of: address, among: options.adapters).filter { s.devices[$0]!.connected || s.discovers($0) }
        }
        for key in export {
            try wrap { () throws(DBusError) in try exportDevice(key, withRSSI: !(alreadyConnected && key.adapter == firstAdapter)) }
        }
        if alreadyConnected { resolveServices(DeviceKey(adapter: firstAdapter, address: address), epoch: 1) }
    }

    /// Moves a device in or out of range of an adapter's radio (nil: the first adapter). Out of
    /// range: connects through that adapter fail as for an absent device, and a link there drops.
    public func setInRange(_ address: String, _ inRange: Bool, adapter: String? = nil) throws(BlueZSimulatorError) {
        let key = try key(address, adapter: adapter)
        let connected = state.withLock { s -> Bool in
            s.devices[key]!.inRange = inRange
            return s.devices[key]!.connected
        }
        if !inRange, connected { linkDown(key) }
        if inRange { try wrap { () throws(DBusError) in try exportWhereDiscovered(key.address) } }
    }

    /// Sets the RSSI at which an adapter (nil: the first) receives a device (another adapter,
    /// another emulator, may receive the same device at another RSSI), nil: back to its
    /// advertisement's own (``SimulatedAdvertisement/rssi``); kept within bluetoothd's −127…20 dBm.
    /// Wherever the emulator reports or filters on the device's RSSI it uses this one (jitter
    /// included); while discovering, a change is reported at the next advertisement like any RSSI
    /// change (``advertise()``).
    public func setRSSI(_ address: String, _ rssi: Int16?, adapter: String? = nil) throws(BlueZSimulatorError) {
        let key = try key(address, adapter: adapter)
        state.withLock { $0.devices[key]!.rssiOverride = rssi.map { max(-127, min(20, $0)) } }
    }

    /// Changes a device's faults (they apply through every adapter).
    public func updateFaults(_ address: String, _ change: (inout Faults) -> Void) throws(BlueZSimulatorError) {
        try state.withLock { (s) throws(BlueZSimulatorError) in
            guard s.peripherals[address.uppercased()] != nil else { throw .unknownDevice(address) }
            change(&s.peripherals[address.uppercased()]!.faults)
            s.peripherals[address.uppercased()]!.writeCount = 0
            s.peripherals[address.uppercased()]!.notifyCount = 0
        }
    }

    /// Drops the device's link now, through whichever adapter it has it (as if the device went
    /// out of range for a moment): pending calls fail, then `ServicesResolved=false` and
    /// `Connected=false` (behaviours 5, 8).
    public func dropLink(_ address: String) throws(BlueZSimulatorError) {
        let keys = try state.withLock { (s) throws(BlueZSimulatorError) -> [DeviceKey] in
            guard s.peripherals[address.uppercased()] != nil else { throw .unknownDevice(address) }
            return s.keys(of: address.uppercased(), among: options.adapters)
        }
        for key in keys { linkDown(key) }
    }

    /// Powers the first adapter on or off (``setAdapterPowered(_:adapter:)``).
    public func setAdapterPowered(_ on: Bool) { powerAdapter(firstAdapter, on) }

    /// Powers an adapter on or off (off: its discovery stops, its links drop, calls through it
    /// fail `NotReady`; the other adapters carry on).
    public func setAdapterPowered(_ on: Bool, adapter: String) throws(BlueZSimulatorError) {
        powerAdapter(try self.adapter(adapter), on)
    }

    func powerAdapter(_ name: String, _ on: Bool) {
        if !on { stopAdvertising(name) }
        let drop = state.withLock { s -> [DeviceKey] in
            s.adapters[name]!.powered = on
            guard !on else { return [] }
            // 5.66 `adapter_stop` → `remove_discovery_list`: sessions and pre-set filters go.
            s.adapters[name]!.sessions = [:]
            s.adapters[name]!.filters = [:]
            let keys = s.devices.keys.filter { $0.adapter == name }
            for k in keys { s.devices[k]!.reportedRSSI = nil }
            for k in keys where s.devices[k]!.connecting != nil { s.devices[k]!.cancelConnect = true }
            return keys.filter { s.devices[$0]!.connected }.sorted { $0.address < $1.address }
        }
        let path = path(ofAdapter: name)
        try? connection.setProperty(path, interface: Self.adapter1, "Powered", .boolean(on))
        if !on {
            try? connection.setProperty(path, interface: Self.adapter1, "Discovering", .boolean(false))
            for k in drop { linkDown(k) }
        }
    }

    /// Every call the device received, through any adapter, in order (the newest 10 000).
    public func received(_ address: String) -> [Received] {
        state.withLock { $0.received[address.uppercased()] ?? [] }
    }

    /// The object path of a device under an adapter (nil: the first), e.g.
    /// `/org/bluez/hci1/dev_C0_FF_EE_00_00_01`.
    public func devicePath(_ address: String, adapter: String? = nil) -> DBusObjectPath {
        devicePath(address, under: adapter ?? firstAdapter)
    }

    func devicePath(_ address: String, under adapter: String) -> DBusObjectPath {
        path(ofAdapter: adapter).appending("dev_" + address.uppercased().replacingOccurrences(of: ":", with: "_"))
    }

    /// Whether a device is exported under an adapter (nil: the first) now.
    public func isExported(_ address: String, adapter: String? = nil) -> Bool {
        state.withLock { $0.devices[DeviceKey(adapter: adapter ?? firstAdapter, address: address.uppercased())]?.exported ?? false }
    }

    /// The adapter the device has its link with, or is being connected through; nil: none.
    public func linkAdapter(_ address: String) -> String? {
        state.withLock { $0.peripherals[address.uppercased()]?.link }
    }

    /// The unique names holding a notify session on a device's characteristic under an adapter
    /// (nil: the first).
    public func notifySessions(_ address: String, characteristic uuid: String, adapter: String? = nil) -> Set<String> {
        let full = SimUUID.full(uuid)
        let key = DeviceKey(adapter: adapter ?? firstAdapter, address: address.uppercased())
        return state.withLock { s in
            s.devices[key]?.chars.values.first { $0.uuid == full }?.sessions ?? []
        }
    }

    /// The event loop the emulator runs on (its connection's).
    public var loop: EventLoop { connection.loop }

    /// Sleeps on the loop's timers (no timer thread involved).
    func sleep(for duration: Duration) async throws {
        try await connection.loop.sleep(for: duration)
    }

    func wrap(_ body: () throws(DBusError) -> Void) throws(BlueZSimulatorError) {
        do { try body() } catch { throw .dbus(error) }
    }

    /// Runs `body` in a task the emulator cancels when it stops; returns the task's id.
    @discardableResult
    func spawn(_ body: @escaping @Sendable () async -> Void) -> UInt64 {
        let id = state.withLock { $0.id() }
        let t = Task(executorPreference: connection.loop) { [weak self] in
            await body()
            self?.state.withLock { s in
                if s.tasks.removeValue(forKey: id) == nil { s.endedEarly.insert(id) }
            }
        }
        state.withLock { s in
            if s.stopped { t.cancel() } else if s.endedEarly.remove(id) == nil { s.tasks[id] = t }
        }
        return id
    }

    /// A caller's connection closed: its discovery sessions (on every adapter) and notify
    /// sessions end (behaviour 2).
    func callerGone(_ name: String) {
        let (stopped, notifying) = state.withLock { s -> ([String], [(DBusObjectPath, Bool)]) in
            var stopped: [String] = []
            for a in s.adapters.keys.sorted() {
                let had = s.adapters[a]!.sessions.removeValue(forKey: name) != nil
                s.adapters[a]!.filters[name] = nil
                if had, s.adapters[a]!.sessions.isEmpty { stopped.append(a) }
            }
            var changed: [(DBusObjectPath, Bool)] = []
            for k in s.devices.keys {
                for p in s.devices[k]!.chars.keys where s.devices[k]!.chars[p]!.sessions.contains(name) {
                    s.devices[k]!.chars[p]!.sessions.remove(name)
                    changed.append((p, !s.devices[k]!.chars[p]!.sessions.isEmpty))
                }
            }
            return (stopped, changed)
        }
        for (p, on) in notifying { try? connection.setProperty(p, interface: Self.char1, "Notifying", .boolean(on)) }
        for a in stopped { discoveryStopped(a) }
    }
}
