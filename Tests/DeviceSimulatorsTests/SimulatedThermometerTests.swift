import BinaryCoding
import BlueZSimulator
import GattLayout
import Synchronization
import TestSupport
import Testing
@testable import DeviceSimulators

/// The simulated thermometer without a bus: its values are what the built-in layouts of the
/// Environmental Sensing characteristics decode (GSS Temperature 0x2A6E, Humidity 0x2A6F, Battery
/// Level 0x2A19), they drift slowly within their bounds, and each step notifies what changed.
@Suite struct SimulatedThermometerTests {
    /// Decodes `value` with the built-in layout `b` and returns its one field.
    func decoded(_ b: BuiltinLayout, _ value: [UInt8]) throws -> JSONValue? {
        try b.layout().decode(value)[b == .batteryLevel ? "battery_level" : b.rawValue]
    }

    @Test func tableAdvertisementAndInitialValues() throws {
        let t = SimulatedThermometer(address: "c0:ff:ee:00:00:04")
        #expect(t.address == "C0:FF:EE:00:00:04")
        #expect(t.advertisement.name == "Thermometer")
        #expect(t.advertisement.uuids == ["0000181a-0000-1000-8000-00805f9b34fb"])
        #expect(t.services.map(\.uuid) == ["0000181a-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb"])
        let chars = t.services.flatMap(\.characteristics)
        #expect(chars.map(\.uuid) == [SimulatedThermometer.temperatureUUID, SimulatedThermometer.humidityUUID,
                                      SimulatedThermometer.batteryUUID])
        #expect(chars.allSatisfy { $0.flags == ["read", "notify"] })
        // The initial values as stored in the table: 21.50 °C, 45.00 %, 92 %.
        #expect(chars.map(\.value) == [[0x66, 0x08], [0x94, 0x11], [92]])
        #expect(try decoded(.temperature, chars[0].value) == 21.5)
        #expect(try decoded(.humidity, chars[1].value) == 45)
        #expect(try decoded(.batteryLevel, chars[2].value) == 92)
    }

    @Test func negativeTemperatureEncodesAsTheLayoutDecodes() throws {
        let r = SimulatedThermometer.Readings(centiCelsius: -1234, centiPercent: 10000, battery: 5)
        #expect(r.temperatureValue == [0x2E, 0xFB])
        #expect(try decoded(.temperature, r.temperatureValue) == -12.34)
        #expect(try decoded(.humidity, r.humidityValue) == 100)
        #expect(try BuiltinLayout.temperature.layout().encode(["temperature": -12.34]) == r.temperatureValue)
    }

    @Test func readingsDriftSlowlyWithinBoundsAndNotifyWhatChanged() throws {
        let t = SimulatedThermometer()
        let notified = Mutex<[(String, [UInt8])]>([])
        t.linkChanged(SimulatedLink { uuid, value in
            notified.withLock { $0.append((uuid, value)) }
            return true
        })
        var previous = t.readings
        var temperatures: Set<Int16> = [], humidities: Set<UInt16> = []
        for n in 1...400 {
            let r = t.step()
            #expect(abs(Int(r.centiCelsius) - Int(previous.centiCelsius)) == 5)
            #expect(abs(Int(r.centiPercent) - Int(previous.centiPercent)) == 25)
            #expect((1900...2400).contains(r.centiCelsius) && (4000...5500).contains(r.centiPercent))
            #expect(r.battery == 92 - UInt8(n / 100))
            temperatures.insert(r.centiCelsius)
            humidities.insert(r.centiPercent)
            previous = r
        }
        // It goes both ways over the whole range (a cycle is 100 steps for temperature, 120 for humidity).
        #expect(temperatures.min() == 1900 && temperatures.max() == 2400)
        #expect(humidities.min() == 4000 && humidities.max() == 5500)
        let all = notified.withLock { $0 }
        let temperatureValues = all.filter { $0.0 == SimulatedThermometer.temperatureUUID }.map(\.1)
        let humidityValues = all.filter { $0.0 == SimulatedThermometer.humidityUUID }.map(\.1)
        let batteryValues = all.filter { $0.0 == SimulatedThermometer.batteryUUID }.map(\.1)
        #expect(temperatureValues.count == 400 && humidityValues.count == 400)
        #expect(batteryValues == [[91], [90], [89], [88]])
        // The first step: 21.55 °C and 45.25 %, as the layouts decode the notified bytes.
        #expect(try decoded(.temperature, temperatureValues[0]) == 21.55)
        #expect(try decoded(.humidity, humidityValues[0]) == 45.25)
        // The last values notified are the current readings, and a read answers them.
        #expect(temperatureValues.last == t.readings.temperatureValue)
        #expect(try t.handleRead(SimulatedThermometer.temperatureUUID, current: [0, 0]) == t.readings.temperatureValue)
        #expect(try t.handleRead(SimulatedThermometer.humidityUUID, current: []) == t.readings.humidityValue)
        #expect(try t.handleRead(SimulatedThermometer.batteryUUID, current: []) == [88])
        #expect(throws: SimulatedATTError.writeNotPermitted) {
            try t.handleWrite([0], to: SimulatedThermometer.temperatureUUID, withResponse: true)
        }
    }

    @Test func withoutALinkNothingIsNotified() {
        let t = SimulatedThermometer()
        #expect(!t.isLinked)
        #expect(t.step().centiCelsius == 2155)
        let count = Mutex(0)
        t.linkChanged(SimulatedLink { _, _ in
            count.withLock { $0 += 1 }
            return true
        })
        #expect(t.isLinked)
        t.step()
        #expect(count.withLock { $0 } == 2)  // temperature and humidity
        t.linkChanged(nil)
        t.step()
        #expect(count.withLock { $0 } == 2)
    }

    @Test func specParsingAndFactory() throws {
        let spec = try #require(SimulatedDeviceSpec(parsing: "thermo@c0:ff:ee:00:00:04"))
        #expect(spec == SimulatedDeviceSpec(kind: .thermo, address: "C0:FF:EE:00:00:04"))
        #expect(spec.description == "thermo@C0:FF:EE:00:00:04")
        #expect(SimulatedDeviceSpec.Kind.allCases.map(\.rawValue) == ["gopro", "rokid", "hr", "thermo", "bthome", "atc", "pvvx", "ruuvi", "govee", "bthome-encrypted", "xiaomi"])
        #expect(SimulatedDeviceSpec(parsing: "thermometer@C0:FF:EE:00:00:04") == nil)
        let p = SimulatedPeripheral(spec)
        #expect(p.kind == .thermo)
        guard case let .thermometer(sensor) = p else {
            Issue.record("not a thermometer")
            return
        }
        #expect(sensor.address == "C0:FF:EE:00:00:04")
        #expect(p.device.advertisement.uuids == ["0000181a-0000-1000-8000-00805f9b34fb"])
    }

    @Test func readingsTaskStepsEveryThermometer() async throws {
        let peripherals = [SimulatedPeripheral(SimulatedDeviceSpec(kind: .thermo, address: "C0:FF:EE:00:00:04")),
                           SimulatedPeripheral(SimulatedDeviceSpec(kind: .hr, address: "C0:FF:EE:00:00:03"))]
        guard case let .thermometer(sensor) = peripherals[0] else { throw CancellationError() }
        let clock = ManualClock()
        let every = Duration.milliseconds(10)
        let task = Task { await SimulatedPeripheral.readings(peripherals, every: every, clock: clock) }
        try #require(await clock.sleeper(until: clock.now + every))
        #expect(sensor.readings.centiCelsius == 2150)  // no reading before the first interval ends
        for _ in 0..<3 {
            clock.advance(by: every)
            try #require(await clock.sleeper(until: clock.now + every))  // stepped, asleep again
        }
        #expect(sensor.readings.centiCelsius == 2165)  // three readings of +0.05 °C
        task.cancel()
        await task.value
        #expect(sensor.readings.centiCelsius == 2165)  // cancelled while asleep: no further reading
    }

    /// The heart-rate task of `simulate`/`peripherals` (not a thermometer's, but its sibling on the
    /// same clock): one measurement per interval, bpm counting up from 61, with the energy
    /// expended (flag 0x08) counting one kJ a beat until `01` is written to the control point.
    @Test func heartbeatsTaskNotifiesEverySensorOncePerInterval() async throws {
        let peripherals = [SimulatedPeripheral(SimulatedDeviceSpec(kind: .hr, address: "C0:FF:EE:00:00:03")),
                           SimulatedPeripheral(SimulatedDeviceSpec(kind: .thermo, address: "C0:FF:EE:00:00:04"))]
        guard case let .heartRate(sensor) = peripherals[0] else { throw CancellationError() }
        let notified = Mutex<[[UInt8]]>([])
        sensor.linkChanged(SimulatedLink { uuid, value in
            if uuid == SimUUID.full("2A37") { notified.withLock { $0.append(value) } }
            return true
        })
        let clock = ManualClock()
        let every = Duration.seconds(1)
        let task = Task { await SimulatedPeripheral.heartbeats(peripherals, every: every, clock: clock) }
        try #require(await clock.sleeper(until: clock.now + every))
        for _ in 0..<3 {
            clock.advance(by: every)
            try #require(await clock.sleeper(until: clock.now + every))
        }
        #expect(notified.withLock { $0 } == [[0x08, 61, 1, 0], [0x08, 62, 2, 0], [0x08, 63, 3, 0]])
        // "Reset energy expended" (HRS control point value 01): the sensor answers 0 kJ at once,
        // and the next beat counts from there.
        try sensor.handleWrite([0x01], to: SimUUID.full("2A39"), withResponse: true)
        clock.advance(by: every)
        try #require(await clock.sleeper(until: clock.now + every))
        #expect(notified.withLock { Array($0.suffix(2)) } == [[0x08, 0, 0, 0], [0x08, 64, 1, 0]])
        task.cancel()
        await task.value
    }
}
