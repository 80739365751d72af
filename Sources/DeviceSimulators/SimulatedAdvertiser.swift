import BlueZSimulator
import Synchronization

/// A simulated passive sensor (issue 23): it never accepts a connection (``connectable`` false,
/// ADV_NONCONN_IND) and carries its readings in its advertisement, which changes at every
/// ``step()``: the readings drift as a ``SimulatedThermometer``'s do and the frame counter (a
/// BTHome packet id, an ATC frame counter, a Ruuvi measurement sequence) goes up by one.
/// How a frame is put into the advertisement is the ``AdvertiserPayload`` it was made with, so
/// a new format (an encrypted one included) is one payload, e.g. in a file of its own.
/// `gatt2mqtt simulate`/`peripherals` step it every `--advertise-interval` seconds
/// (``SimulatedPeripheral/advertising(_:every:clock:changed:)``).
public final class SimulatedAdvertiser: SimulatedDevice {
    /// What one advertisement carries: the readings and the frame counter.
    public struct Frame: Sendable, Equatable {
        /// Steps taken since the advertiser was made (0 first); a format takes the bits it has room for.
        public var counter: UInt32
        public var readings: SimulatedThermometer.Readings
        /// The advertiser's address, `C0:FF:EE:00:00:01` form, as 6 bytes in that order.
        public var address: [UInt8]

        public init(counter: UInt32, readings: SimulatedThermometer.Readings, address: [UInt8]) {
            self.counter = counter
            self.readings = readings
            self.address = address
        }

        /// The battery voltage the formats that carry one report: 2000 mV + 10 mV per percent
        /// (92 % → 2920 mV).
        public var batteryMillivolts: UInt16 { 2000 + 10 * UInt16(min(readings.battery, 100)) }
    }

    public let address: String
    public let mtu = 23
    public let services: [SimulatedService] = []
    public var connectable: Bool { false }
    /// The format: how each frame becomes the advertisement.
    public let payload: AdvertiserPayload
    let addressBytes: [UInt8]
    let rssi: Int16

    struct State {
        var frame: Frame
        var drift = ReadingsDrift()
    }

    let state: Mutex<State>

    public init(address: String, payload: AdvertiserPayload, rssi: Int16 = -70,
                readings: SimulatedThermometer.Readings = .init(centiCelsius: 2150, centiPercent: 4500, battery: 92)) {
        self.address = address.uppercased()
        self.payload = payload
        self.rssi = rssi
        addressBytes = self.address.split(separator: ":").map { UInt8($0, radix: 16) ?? 0 }
        state = Mutex(State(frame: Frame(counter: 0, readings: readings, address: addressBytes)))
    }

    /// The frame on the air now.
    public var frame: Frame { state.withLock { $0.frame } }

    /// The advertisement of the current frame (read at every advertisement by the emulator).
    public var advertisement: SimulatedAdvertisement {
        let f = frame
        let data = payload.encode(f)
        return SimulatedAdvertisement(name: payload.name(addressBytes), rssi: rssi, uuids: payload.uuids,
                                      manufacturerData: data.manufacturerData, serviceData: data.serviceData)
    }

    /// One broadcast interval: new readings (the drift) and the next counter. Returns the new frame.
    @discardableResult
    public func step() -> Frame {
        state.withLock { s in
            s.frame.readings = s.drift.next(s.frame.readings)
            s.frame.counter &+= 1
            return s.frame
        }
    }

    public func handleWrite(_ value: [UInt8], to characteristic: String, withResponse: Bool) throws(SimulatedATTError) {
        throw .writeNotPermitted
    }

    public func handleRead(_ characteristic: String, current: [UInt8]) throws(SimulatedATTError) -> [UInt8] {
        throw .readNotPermitted
    }

    public func linkChanged(_ link: SimulatedLink?) {}
}

/// How an advertiser's frames are put on the air: its name and advertised UUIDs, and the
/// manufacturer data and service data of each frame (an encoder written from the format's
/// specification, independent of the decoders in AdvertisementCodec).
public struct AdvertiserPayload: Sendable {
    /// The data of one advertisement: manufacturer data by company id, service data by UUID
    /// (16-bit forms are fine: ``SimulatedAdvertisement`` widens them).
    public struct Data: Sendable, Equatable {
        public var manufacturerData: [UInt16: [UInt8]]
        public var serviceData: [String: [UInt8]]
        public init(manufacturerData: [UInt16: [UInt8]] = [:], serviceData: [String: [UInt8]] = [:]) {
            self.manufacturerData = manufacturerData
            self.serviceData = serviceData
        }
    }

    /// The local name from the address bytes.
    public var name: @Sendable ([UInt8]) -> String?
    public var uuids: [String]
    public var encode: @Sendable (SimulatedAdvertiser.Frame) -> Data

    public init(name: @escaping @Sendable ([UInt8]) -> String?, uuids: [String] = [],
                encode: @escaping @Sendable (SimulatedAdvertiser.Frame) -> Data) {
        self.name = name
        self.uuids = uuids
        self.encode = encode
    }
}
