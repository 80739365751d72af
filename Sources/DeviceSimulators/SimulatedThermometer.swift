import BinaryCoding
import BlueZSimulator
import Synchronization

/// A simulated environmental sensor: the Environmental Sensing Service 0x181A with Temperature
/// 0x2A6E (read, notify; GSS: sint16, 0.01 °C) and Humidity 0x2A6F (read, notify; GSS: uint16,
/// 0.01 %), and the Battery Service 0x180F with Battery Level 0x2A19 (read, notify; uint8 %).
/// It advertises 0x181A under the name "Thermometer".
///
/// Its readings drift slowly: every ``step()`` moves the temperature by 0.05 °C between 19.00
/// and 24.00 °C and the humidity by 0.25 % between 40.00 and 55.00 % (back and forth), and
/// every 100th step the battery drops 1 % (down to 5 %). Each step notifies the changed values
/// on its link, like a sensor whose measurement interval ended; a read answers the current value.
/// `gatt2mqtt simulate`/`peripherals` step it every `--thermo-interval` seconds
/// (``SimulatedPeripheral/readings(_:every:)``).
public final class SimulatedThermometer: SimulatedDevice {
    /// Temperature 0x2A6E as 128-bit.
    public static let temperatureUUID = SimUUID.full("2A6E")
    /// Humidity 0x2A6F as 128-bit.
    public static let humidityUUID = SimUUID.full("2A6F")
    /// Battery Level 0x2A19 as 128-bit.
    public static let batteryUUID = SimUUID.full("2A19")

    /// One set of readings.
    public struct Readings: Sendable, Equatable {
        /// Hundredths of a degree Celsius (GSS Temperature: −273.15…327.67 °C).
        public var centiCelsius: Int16
        /// Hundredths of a percent (GSS Humidity: 0…100 %).
        public var centiPercent: UInt16
        /// Percent.
        public var battery: UInt8

        public init(centiCelsius: Int16, centiPercent: UInt16, battery: UInt8) {
            self.centiCelsius = centiCelsius
            self.centiPercent = centiPercent
            self.battery = battery
        }

        /// Temperature 0x2A6E value: sint16 little-endian.
        public var temperatureValue: [UInt8] {
            var w = ByteWriter()
            w.writeInteger(centiCelsius, endianness: .little)
            return w.bytes
        }

        /// Humidity 0x2A6F value: uint16 little-endian.
        public var humidityValue: [UInt8] {
            var w = ByteWriter()
            w.writeInteger(centiPercent, endianness: .little)
            return w.bytes
        }
    }

    struct State {
        var link: SimulatedLink?
        var readings: Readings
        var drift = ReadingsDrift()
    }

    public let address: String
    public let advertisement: SimulatedAdvertisement
    public let services: [SimulatedService]
    public let mtu = 23
    let state: Mutex<State>

    public init(address: String = "C0:FF:EE:00:00:04", name: String = "Thermometer",
                readings: Readings = Readings(centiCelsius: 2150, centiPercent: 4500, battery: 92))
    {
        self.address = address.uppercased()
        state = Mutex(State(readings: readings))
        advertisement = SimulatedAdvertisement(name: name, rssi: -62, uuids: ["181A"])
        services = [
            SimulatedService("181A", characteristics: [
                SimulatedCharacteristic("2A6E", flags: ["read", "notify"], value: readings.temperatureValue),
                SimulatedCharacteristic("2A6F", flags: ["read", "notify"], value: readings.humidityValue),
            ]),
            SimulatedService("180F", characteristics: [
                SimulatedCharacteristic("2A19", flags: ["read", "notify"], value: [readings.battery]),
            ]),
        ]
    }

    /// The readings now.
    public var readings: Readings { state.withLock { $0.readings } }

    /// Whether a central's link is up (services resolved).
    public var isLinked: Bool { state.withLock { $0.link != nil } }

    /// One measurement interval: the readings drift (see the type's description) and the changed
    /// values are notified on the link. Returns the new readings.
    @discardableResult
    public func step() -> Readings {
        let (before, after, link) = state.withLock { s -> (Readings, Readings, SimulatedLink?) in
            let before = s.readings
            s.readings = s.drift.next(before)
            return (before, s.readings, s.link)
        }
        if let link {
            if after.centiCelsius != before.centiCelsius { link.notify("2A6E", after.temperatureValue) }
            if after.centiPercent != before.centiPercent { link.notify("2A6F", after.humidityValue) }
            if after.battery != before.battery { link.notify("2A19", [after.battery]) }
        }
        return after
    }

    public func handleWrite(_ value: [UInt8], to characteristic: String, withResponse: Bool) throws(SimulatedATTError) {
        throw .writeNotPermitted
    }

    /// The current reading of the characteristic (the stored value for anything else).
    public func handleRead(_ characteristic: String, current: [UInt8]) throws(SimulatedATTError) -> [UInt8] {
        let r = readings
        switch characteristic {
        case Self.temperatureUUID: return r.temperatureValue
        case Self.humidityUUID: return r.humidityValue
        case Self.batteryUUID: return [r.battery]
        default: return current
        }
    }

    public func linkChanged(_ link: SimulatedLink?) { state.withLock { $0.link = link } }
}

/// The slow back-and-forth drift of a simulated sensor's readings (the thermometer's and the
/// advertisers'): each ``next(_:)`` moves the temperature by 0.05 °C between 19.00 and 24.00 °C
/// and the humidity by 0.25 % between 40.00 and 55.00 %, and every 100th call drops the battery
/// 1 % (down to 5 %).
struct ReadingsDrift: Sendable {
    var steps = 0
    var warming = true
    var drying = false

    mutating func next(_ readings: SimulatedThermometer.Readings) -> SimulatedThermometer.Readings {
        var r = readings
        if warming, r.centiCelsius >= 2400 { warming = false }
        if !warming, r.centiCelsius <= 1900 { warming = true }
        r.centiCelsius += warming ? 5 : -5
        if !drying, r.centiPercent >= 5500 { drying = true }
        if drying, r.centiPercent <= 4000 { drying = false }
        r.centiPercent = drying ? r.centiPercent - 25 : r.centiPercent + 25
        steps += 1
        if steps % 100 == 0, r.battery > 5 { r.battery -= 1 }
        return r
    }
}
