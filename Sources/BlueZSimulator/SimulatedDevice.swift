import Synchronization

/// A characteristic of a simulated GATT table (spec/bluez.md, "Objects a client sees":
/// `GattCharacteristic1` `UUID`, `Flags`, `Value`).
public struct SimulatedCharacteristic: Sendable, Equatable {
    /// The UUID as given (16-, 32- or 128-bit); exported in BlueZ's 128-bit lowercase form.
    public var uuid: String
    /// BlueZ flags: "read", "write", "write-without-response", "notify", "indicate",
    /// "encrypt-read", "encrypt-write", …
    public var flags: [String]
    /// The initial value.
    public var value: [UInt8]

    public init(_ uuid: String, flags: [String], value: [UInt8] = []) {
        self.uuid = SimUUID.full(uuid)
        self.flags = flags
        self.value = value
    }
}

/// A service of a simulated GATT table (`GattService1` `UUID`, `Primary`).
public struct SimulatedService: Sendable, Equatable {
    public var uuid: String
    public var primary: Bool
    public var characteristics: [SimulatedCharacteristic]

    public init(_ uuid: String, primary: Bool = true, characteristics: [SimulatedCharacteristic]) {
        self.uuid = SimUUID.full(uuid)
        self.primary = primary
        self.characteristics = characteristics
    }
}

/// What a simulated device advertises (`Device1` `Name`, `RSSI`, `UUIDs`, `ManufacturerData`
/// a{qv}, `ServiceData` a{sv}).
public struct SimulatedAdvertisement: Sendable, Equatable {
    public var name: String?
    public var rssi: Int16
    public var uuids: [String]
    public var manufacturerData: [UInt16: [UInt8]]
    public var serviceData: [String: [UInt8]]

    public init(name: String? = nil, rssi: Int16 = -60, uuids: [String] = [],
                manufacturerData: [UInt16: [UInt8]] = [:], serviceData: [String: [UInt8]] = [:])
    {
        self.name = name
        self.rssi = rssi
        self.uuids = uuids.map(SimUUID.full)
        self.manufacturerData = manufacturerData
        self.serviceData = Dictionary(serviceData.map { (SimUUID.full($0.key), $0.value) }, uniquingKeysWith: { a, _ in a })
    }
}

/// An ATT error a simulated device answers a read or write with (Core Specification Vol 3
/// Part F §3.4.1.1); the emulator maps it to BlueZ's D-Bus error as bluetoothd 5.66 does
/// (spec/bluez.md behaviour 7).
public struct SimulatedATTError: Error, Sendable, Equatable {
    public var code: UInt8
    public init(_ code: UInt8) { self.code = code }
    public static let readNotPermitted = SimulatedATTError(0x02)
    public static let writeNotPermitted = SimulatedATTError(0x03)
    public static let insufficientAuthentication = SimulatedATTError(0x05)
    public static let requestNotSupported = SimulatedATTError(0x06)
    public static let invalidOffset = SimulatedATTError(0x07)
    public static let insufficientAuthorization = SimulatedATTError(0x08)
    public static let invalidAttributeValueLength = SimulatedATTError(0x0D)
    public static let unlikelyError = SimulatedATTError(0x0E)
}

/// The emulator's side of a connected link, handed to a device so it can notify
/// (`PropertiesChanged(Value)` on the characteristic, spec/bluez.md "Objects a client sees").
public struct SimulatedLink: Sendable {
    let send: @Sendable (String, [UInt8]) -> Bool

    public init(send: @escaping @Sendable (String, [UInt8]) -> Bool) { self.send = send }

    /// Notifies `value` on the characteristic `uuid`; returns whether it went out (the link is up,
    /// services are resolved and some client has a notify session on it).
    @discardableResult
    public func notify(_ uuid: String, _ value: [UInt8]) -> Bool { send(SimUUID.full(uuid), value) }
}

/// A simulated peripheral the emulator can put in range. GoPro/Rokid simulations implement this
/// protocol (or wrap ``GenericDevice``): they get every write delivered over the air and can
/// notify through the link they are given while connected.
public protocol SimulatedDevice: AnyObject, Sendable {
    /// The Bluetooth address, `C0:FF:EE:00:00:01` form.
    var address: String { get }
    /// Read at every advertisement while discovering: a device may change it over time (changed
    /// ManufacturerData/ServiceData and RSSI reach clients, docs/bluez.md "While discovering").
    var advertisement: SimulatedAdvertisement { get }
    /// The GATT table served after connection.
    var services: [SimulatedService] { get }
    /// The ATT MTU negotiated on connection (exported as `MTU`; commands may carry MTU − 3 bytes).
    var mtu: Int { get }
    /// A write that reached the device; throw to answer a write request with an ATT error.
    func handleWrite(_ value: [UInt8], to characteristic: String, withResponse: Bool) throws(SimulatedATTError)
    /// A read; `current` is the stored value. Returns the value to answer with.
    func handleRead(_ characteristic: String, current: [UInt8]) throws(SimulatedATTError) -> [UInt8]
    /// Called with the link when services are resolved and with `nil` when the link goes down.
    func linkChanged(_ link: SimulatedLink?)
    /// Whether it accepts connections (false: an advertiser, ADV_NONCONN_IND; a Connect to it
    /// times out as for an absent device, docs/bluez.md behaviour 13). Default true.
    var connectable: Bool { get }
}

extension SimulatedDevice {
    public var connectable: Bool { true }
}

/// A write a ``GenericDevice`` received.
public struct SimulatedWrite: Sendable, Equatable {
    public var characteristic: String
    public var value: [UInt8]
    public var withResponse: Bool
}

/// A device whose GATT table is given as data, with an optional write handler and ``notify(_:_:)``.
public final class GenericDevice: SimulatedDevice {
    public let address: String
    public let advertisement: SimulatedAdvertisement
    public let services: [SimulatedService]
    public let mtu: Int

    /// Called for every delivered write (after it was recorded); may call ``notify(_:_:)``.
    public typealias WriteHandler = @Sendable (SimulatedWrite, GenericDevice) throws(SimulatedATTError) -> Void

    private struct State {
        var link: SimulatedLink?
        var writes: [SimulatedWrite] = []
    }
    private let state = Mutex(State())
    private let onWrite: WriteHandler?

    public init(address: String, advertisement: SimulatedAdvertisement, services: [SimulatedService], mtu: Int = 247,
                onWrite: WriteHandler? = nil)
    {
        self.address = address.uppercased()
        self.advertisement = advertisement
        self.services = services
        self.mtu = mtu
        self.onWrite = onWrite
    }

    /// Every write delivered to this device, in order.
    public var writes: [SimulatedWrite] { state.withLock { $0.writes } }

    /// Whether a client link is up (services resolved).
    public var isLinked: Bool { state.withLock { $0.link != nil } }

    /// Notifies `value` on `uuid`; returns `false` when nobody could receive it.
    @discardableResult
    public func notify(_ uuid: String, _ value: [UInt8]) -> Bool {
        guard let link = state.withLock({ $0.link }) else { return false }
        return link.notify(uuid, value)
    }

    public func handleWrite(_ value: [UInt8], to characteristic: String, withResponse: Bool) throws(SimulatedATTError) {
        let w = SimulatedWrite(characteristic: characteristic, value: value, withResponse: withResponse)
        state.withLock { $0.writes.append(w) }
        try onWrite?(w, self)
    }

    public func handleRead(_ characteristic: String, current: [UInt8]) throws(SimulatedATTError) -> [UInt8] { current }

    public func linkChanged(_ link: SimulatedLink?) { state.withLock { $0.link = link } }

    /// A ready-made sensor: Battery Service 0x180F (Battery Level 0x2A19: read, notify) and
    /// Heart Rate 0x180D (Measurement 0x2A37: notify; Control Point 0x2A39: write — writing `01`
    /// notifies a measurement of 0 bpm, as "reset energy expended").
    public static func batteryHeartRate(address: String = "C0:FF:EE:00:00:01", name: String = "Sim HR",
                                        batteryLevel: UInt8 = 85) -> GenericDevice
    {
        GenericDevice(
            address: address,
            advertisement: SimulatedAdvertisement(name: name, rssi: -55, uuids: ["180D", "180F"],
                                                  manufacturerData: [0xFFFF: [0x01, 0x02]],
                                                  serviceData: ["180F": [batteryLevel]]),
            services: [
                SimulatedService("180F", characteristics: [
                    SimulatedCharacteristic("2A19", flags: ["read", "notify"], value: [batteryLevel]),
                ]),
                SimulatedService("180D", characteristics: [
                    SimulatedCharacteristic("2A37", flags: ["notify"], value: [0x00, 60]),
                    SimulatedCharacteristic("2A39", flags: ["write"], value: []),
                ]),
            ],
            onWrite: { (w: SimulatedWrite, device: GenericDevice) throws(SimulatedATTError) in
                guard w.characteristic == SimUUID.full("2A39") else { return }
                guard w.value == [0x01] else { throw SimulatedATTError(0x80) }  // HRS: control point not supported
                device.notify("2A37", [0x08, 0, 0, 0])
            })
    }
}

/// UUID normalisation: 16/32-bit to the Bluetooth Base UUID (Core Specification Vol 3 Part B
/// §2.5.1), lowercase, as BlueZ exports them; other text is lowercased.
public enum SimUUID {
    public static func full(_ s: String) -> String {
        let t = s.lowercased()
        let hex = t.allSatisfy(\.isHexDigit)
        if hex, t.count == 4 { return "0000\(t)-0000-1000-8000-00805f9b34fb" }
        if hex, t.count == 8 { return "\(t)-0000-1000-8000-00805f9b34fb" }
        return t
    }
}
