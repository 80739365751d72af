import BinaryCoding

/// What a command becomes on the device: writes, and how to recognise its answer.
public struct DeviceRequest: Sendable, Equatable {
    public struct Write: Sendable, Equatable {
        public var characteristic: CharacteristicID
        public var value: [UInt8]
        public var withResponse: Bool
        public init(_ characteristic: CharacteristicID, _ value: [UInt8], withResponse: Bool = true) {
            self.characteristic = characteristic
            self.value = value
            self.withResponse = withResponse
        }
    }

    public var writes: [Write]
    /// The key of the device's answer (the driver reports it with `.response`); nil: the
    /// command is done when the writes succeed.
    public var expect: String?
    /// For latest-wins queues: the attribute this command sets (e.g. `brightness`).
    public var attribute: String?
    /// A read whose decoded value is the command's `data` (for `get`).
    public var read: CharacteristicID?
    /// Passes the device's busy gate (GoPro: queries and shutter off).
    public var bypassesBusyGate: Bool
    /// How long to wait for the answer; nil: the device's command timeout.
    public var timeout: Duration?

    public init(writes: [Write], expect: String? = nil, attribute: String? = nil, read: CharacteristicID? = nil, bypassesBusyGate: Bool = false,
                timeout: Duration? = nil) {
        self.writes = writes
        self.expect = expect
        self.attribute = attribute
        self.read = read
        self.bypassesBusyGate = bypassesBusyGate
        self.timeout = timeout
    }
}

/// What the driver made of incoming bytes.
public enum DriverOutput: Sendable, Equatable {
    /// Named values to merge into the device state (`<base>/<device>`).
    case state(JSONObject)
    /// The answer to the request whose `expect` key matches; `.success` carries response data.
    case response(key: String, result: Result<JSONValue?, CommandError>)
    /// An event for `<base>/<device>/event` (e.g. a Rokid NOTIFY).
    case event(JSONValue)
    /// A decoded value for a characteristic topic `<base>/<device>/<topic>`.
    case characteristic(topic: String, value: JSONValue)
    /// Bytes the driver could not make sense of (garbage from the device): reported, not fatal.
    case malformed(String)
    /// The device cannot be used on this link (e.g. it refused authentication): a `device_error`
    /// event carrying the code and message. The driver itself fails the commands that follow.
    case deviceError(CommandError)
    /// An internal request to run next, before any queued command (the next step of a
    /// connect-time handshake, e.g. AUTH_REQ once 0x9301 has been read).
    case request(DeviceRequest)
}

/// The profile-specific part of a device (GoPro, Rokid, layout-described GATT device): pure
/// state and codecs, no I/O. A session owns one and calls it from one task at a time.
public protocol DeviceDriver: Sendable {
    /// Characteristics to subscribe to on connect.
    var notifyCharacteristics: [CharacteristicID] { get }
    /// Internal requests run after each connect before user commands (pairing finish, register
    /// for pushes, authentication), in order.
    mutating func startupRequests() throws(CommandError) -> [DeviceRequest]
    /// A periodic internal request (GoPro keep-alive) and its interval.
    var keepAlive: (interval: Duration, request: DeviceRequest)? { get }
    /// Periodic reads (configured `poll:`), each run on connect and then every interval.
    var polls: [(interval: Duration, request: DeviceRequest)] { get }
    /// Whether the device accepts commands that do not bypass the busy gate.
    var isBusy: Bool { get }
    /// Encodes one command (`/set` element, `/set/<attr>` shortcut already turned into an object).
    mutating func encode(_ command: JSONObject, mtu: Int) throws(CommandError) -> DeviceRequest
    /// Encodes a raw write to a mapped characteristic topic (`<device>/<topic>/write`).
    mutating func encodeWrite(topic: String, payload: [UInt8], mtu: Int) throws(CommandError) -> DeviceRequest
    /// Decodes a value read for a request's `read`.
    mutating func decodeRead(_ characteristic: CharacteristicID, _ value: [UInt8]) -> [DriverOutput]
    /// An internal request (start-up, keep-alive, poll, or one from `.request`) failed: its
    /// write or read failed, or its answer did not come within its timeout. Not called when
    /// the link went away (``linkLost()`` follows).
    mutating func internalRequestFailed(_ request: DeviceRequest, _ error: CommandError) -> [DriverOutput]
    /// Feeds a notification (in order, per characteristic reassembly inside).
    mutating func receive(_ notification: GATTNotification) -> [DriverOutput]
    /// Forgets per-link state (reassembly buffers, authentication) after a link loss.
    mutating func linkLost()
    /// Whether the device must be paired before use (encrypted characteristics, gopro.md §2):
    /// the central then pairs on connect when the device is not paired yet.
    var requiresPairing: Bool { get }
    /// Called on connect, before `startupRequests`, when that connect paired the device for the
    /// first time (GoPro: send Pairing Finish, gopro.md §2 step 5).
    mutating func didPair()
}

extension DeviceDriver {
    public var keepAlive: (interval: Duration, request: DeviceRequest)? { nil }
    public var polls: [(interval: Duration, request: DeviceRequest)] { [] }
    public var isBusy: Bool { false }
    public mutating func startupRequests() throws(CommandError) -> [DeviceRequest] { [] }
    public mutating func encodeWrite(topic: String, payload: [UInt8], mtu: Int) throws(CommandError) -> DeviceRequest {
        throw CommandError(.unknownCommand, "no characteristic topic '\(topic)' on this device")
    }
    public func decodeRead(_ characteristic: CharacteristicID, _ value: [UInt8]) -> [DriverOutput] { [] }
    public mutating func internalRequestFailed(_ request: DeviceRequest, _ error: CommandError) -> [DriverOutput] { [] }
    public mutating func linkLost() {}
    public var requiresPairing: Bool { false }
    public mutating func didPair() {}
}
