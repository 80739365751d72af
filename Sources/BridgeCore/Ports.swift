import BinaryCoding

// The bridge core sees its transports only through these protocols (STYLE.md: "the bridge core
// depends on protocols"). The real adapters wrap the Mosquitto client and the BlueZ client;
// the core's tests use in-process fakes.

/// A message the bridge publishes.
public struct OutboundMessage: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: Int
    public var retain: Bool
    /// MQTT 5 correlation data, echoed on responses sent to a request's response topic.
    public var correlationData: [UInt8]?

    public init(topic: String, payload: [UInt8], qos: Int, retain: Bool, correlationData: [UInt8]? = nil) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.correlationData = correlationData
    }

    public init(topic: String, json: JSONValue, qos: Int, retain: Bool, correlationData: [UInt8]? = nil) {
        self.init(topic: topic, payload: json.jsonBytes, qos: qos, retain: retain, correlationData: correlationData)
    }

    public var text: String { String(decoding: payload, as: UTF8.self) }
}

/// A message the bridge received on one of its subscriptions.
public struct InboundMessage: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool
    public var responseTopic: String?
    public var correlationData: [UInt8]?
    /// The MQTT packet identifier of a QoS 1/2 message (``Redeliveries``); nil otherwise.
    public var packetID: Int?

    public init(topic: String, payload: [UInt8], retain: Bool = false, responseTopic: String? = nil, correlationData: [UInt8]? = nil,
                packetID: Int? = nil) {
        self.packetID = packetID
        self.topic = topic
        self.payload = payload
        self.retain = retain
        self.responseTopic = responseTopic
        self.correlationData = correlationData
    }
}

/// The MQTT side as the core needs it. `send` hands a message over and returns at once (the
/// client queues it and retries through reconnects); the core never waits for broker acks.
public protocol MQTTPort: Sendable {
    func send(_ message: OutboundMessage)
}

/// Identifies a characteristic on a device: its UUID as configured (`2A37`, 128-bit, `GP-0072`)
/// and optionally the service UUID.
public struct CharacteristicID: Sendable, Hashable, CustomStringConvertible {
    public var uuid: String
    public var service: String?
    public init(_ uuid: String, service: String? = nil) {
        self.uuid = uuid
        self.service = service
    }
    public var description: String { uuid }
}

/// A value notified by a device.
public struct GATTNotification: Sendable, Equatable {
    public var characteristic: CharacteristicID
    public var value: [UInt8]
    public init(characteristic: CharacteristicID, value: [UInt8]) {
        self.characteristic = characteristic
        self.value = value
    }
}

/// A Bluetooth failure as the core sees it; `name` is BlueZ's error name when there is one.
public struct BLEError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        case notConnected = "not_connected"
        case notFound = "not_found"
        case inProgress = "in_progress"
        case notPermitted = "not_permitted"
        case notSupported = "not_supported"
        case timeout
        case failed
    }
    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { "\(kind.rawValue): \(message)" }
}

/// The Bluetooth central (one adapter) as the core needs it.
public protocol BLECentral: Sendable {
    /// Connects to `address` (adopting a link BlueZ already has), waits for services to be
    /// resolved, and subscribes to `notify`. The link's `notifications` stream ends when the link
    /// is lost.
    func connect(address: String, notify: [CharacteristicID], timeout: Duration) async throws(BLEError) -> any BLELink
    /// The same, pairing (bonding, Just Works) first when `pair` is true and the device is not
    /// paired yet — for profiles whose characteristics are encryption-protected (GoPro, spec
    /// gopro.md §2). The link's `pairedOnConnect` says whether this connect paired it.
    func connect(address: String, notify: [CharacteristicID], pair: Bool, timeout: Duration) async throws(BLEError) -> any BLELink
    /// Whether the central serialises its connects itself (per adapter, ``AdapterSet``); if
    /// not, the bridge holds one gate around every connect (one adapter).
    var serialisesConnects: Bool { get }
}

extension BLECentral {
    public var serialisesConnects: Bool { false }

    /// Centrals that cannot pair connect as usual (the first encrypted access then fails).
    public func connect(address: String, notify: [CharacteristicID], pair: Bool, timeout: Duration) async throws(BLEError) -> any BLELink {
        try await connect(address: address, notify: notify, timeout: timeout)
    }
}

/// One connected device: an object (the session holds it while the link is up and reads it
/// after every event; a class existential is copied with one retain).
public protocol BLELink: AnyObject, Sendable {
    /// Notifications of the subscribed characteristics, in arrival order; finishes on link loss.
    var notifications: AsyncStream<GATTNotification> { get }
    /// The ATT MTU negotiated for this link (payload per write is MTU − 3).
    var mtu: Int { get }
    func write(_ value: [UInt8], to characteristic: CharacteristicID, withResponse: Bool) async throws(BLEError)
    func read(_ characteristic: CharacteristicID) async throws(BLEError) -> [UInt8]
    func disconnect() async
    /// True when this connect paired the device (its first pairing with this adapter, gopro.md §2).
    var pairedOnConnect: Bool { get }
    /// How long this connect's pairing took (nil: it did not pair), for the metrics.
    var pairDuration: Duration? { get }
    /// Hands every notification to `handler` in arrival order (the handler must not block);
    /// returns when the link is lost. Use either this or `notifications`, not both.
    func deliverNotifications(to handler: @escaping @Sendable (GATTNotification) -> Void) async
    /// Starts `writes`, one after the other, and hands the outcome to `completion` once (from
    /// any thread; it must not block): the first failure, or success after the last write.
    /// Returns false, calling nothing, when this link cannot work this way; the caller then
    /// awaits ``write(_:to:withResponse:)`` for each. A link that can answer from where the
    /// replies arrive (BlueZ: the D-Bus loop) saves the caller a task and a hand-off per write.
    func startWrites(_ writes: [DeviceRequest.Write], completion: @escaping @Sendable (Result<Void, BLEError>) -> Void) -> Bool
}

extension BLELink {
    public var pairedOnConnect: Bool { false }
    public var pairDuration: Duration? { nil }

    /// Hands every notification to `handler`, in arrival order, and returns when the link is
    /// lost. This default iterates `notifications`; a link that can call the handler from
    /// where the values arrive (no hand-off between threads per notification) overrides it.
    public func deliverNotifications(to handler: @escaping @Sendable (GATTNotification) -> Void) async {
        for await n in notifications { handler(n) }
    }

    /// This default cannot: the caller awaits each write.
    public func startWrites(_ writes: [DeviceRequest.Write], completion: @escaping @Sendable (Result<Void, BLEError>) -> Void) -> Bool {
        false
    }
}

// MARK: - The adapter's management side (bridge/request/scan, pair, unpair, device/remove forget)

/// One advertisement (or an update of one) seen while scanning: BlueZ's `Device1` properties of
/// a device in range.
public struct Advertisement: Sendable, Equatable {
    /// `AA:BB:CC:DD:EE:FF`, upper case.
    public var address: String
    public var name: String?
    public var rssi: Int?
    /// Advertised service UUIDs as BlueZ gives them (128-bit, lower case).
    public var serviceUUIDs: [String]
    /// Company identifier → data.
    public var manufacturerData: [UInt16: [UInt8]]
    /// Service UUID (128-bit, lower case) → data.
    public var serviceData: [String: [UInt8]]
    public var connected: Bool
    public var paired: Bool

    public init(address: String, name: String? = nil, rssi: Int? = nil, serviceUUIDs: [String] = [],
                manufacturerData: [UInt16: [UInt8]] = [:], serviceData: [String: [UInt8]] = [:],
                connected: Bool = false, paired: Bool = false) {
        self.address = address
        self.name = name
        self.rssi = rssi
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.connected = connected
        self.paired = paired
    }
}

/// A running discovery: every sighting in arrival order, until `stop()` (which ends the stream).
public struct BLEScan: Sendable {
    public let advertisements: AsyncStream<Advertisement>
    public let stop: @Sendable () async -> Void
    public init(advertisements: AsyncStream<Advertisement>, stop: @escaping @Sendable () async -> Void) {
        self.advertisements = advertisements
        self.stop = stop
    }
}

/// What the bridge's requests need of the adapter besides links. A central that cannot do one
/// throws `notSupported` (the defaults below).
public protocol BLEAdapterControl: Sendable {
    /// Starts discovery (LE, duplicates reported). A connect to a device that is not known yet
    /// while this runs must still work (it waits for the device to be seen).
    func scan() async throws(BLEError) -> BLEScan
    /// Pairs (bonds, Just Works) with a device BlueZ knows; succeeds when it is already paired.
    func pair(address: String, timeout: Duration) async throws(BLEError)
    /// Removes the device from the adapter (`Adapter1.RemoveDevice`): the link drops and the bond
    /// is forgotten. Succeeds when BlueZ does not know the device.
    func forget(address: String) async throws(BLEError)
    /// Whether the adapter holds a link to `address` that none of this central's links uses: one
    /// a bridge that died left behind (bluetoothd keeps an LE link after the client that made it
    /// is gone, docs/bluez.md "The real stack"). Answers from what is cached, at once.
    func holdsUnusedLink(to address: String) -> Bool
    /// Closes such a link (`Device1.Disconnect`, waiting for `Connected=false`); the bond stays.
    /// Succeeds when there is none.
    func closeUnusedLink(to address: String) async throws(BLEError)
    /// This bridge now owns the device: closes the links to it that the same Bluetooth daemon
    /// holds through its other adapters, those not this central's nor in `keeping` (another
    /// bridge's on this host that died with its link up: bluetoothd keeps it). Returns the
    /// adapters whose link it closed.
    func takeOver(address: String, keeping adapters: Set<String>) async -> [String]
    /// Whether the same Bluetooth daemon holds a link to `address` through an adapter that is
    /// neither this central's nor in `keeping`: another bridge's on this host, or one a bridge that died left up. The
    /// device is then in reach of this host although it advertises to nobody (a connected
    /// peripheral stops advertising), so a cluster node that never heard it advertise can still
    /// report it and take it over when its owner dies. Answers from what is cached, at once.
    func linkedThroughAnotherAdapter(_ address: String, keeping adapters: Set<String>) -> Bool
}

extension BLEAdapterControl {
    /// A central that cannot tell never holds one.
    public func holdsUnusedLink(to address: String) -> Bool { false }
    public func closeUnusedLink(to address: String) async throws(BLEError) {}
    public func takeOver(address: String, keeping adapters: Set<String>) async -> [String] { [] }
    public func linkedThroughAnotherAdapter(_ address: String, keeping adapters: Set<String>) -> Bool { false }
}

extension BLECentral {
    /// The central's management side, when it has one.
    public var adapterControl: (any BLEAdapterControl)? { self as? any BLEAdapterControl }
}
