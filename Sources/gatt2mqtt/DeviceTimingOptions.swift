import ArgumentParser
import DeviceSimulators

/// The simulated devices' timing options, shared by `simulate` and `peripherals`.
struct DeviceTimingOptions: ParsableArguments {
    @Option(help: "Notify a heart-rate measurement every this many seconds while subscribed (0: never).")
    var heartRateInterval: Double = 1

    @Option(help: "A simulated thermometer takes a reading every this many seconds and notifies what changed while subscribed: temperature ±0.05 °C, humidity ±0.25 % (0: never).")
    var thermoInterval: Double = 5

    @Option(help: "A simulated GoPro sleeps (drops the link) after this many seconds without keep-alive or other writes (0: never).")
    var goproSleepAfter: Double = 10

    @Option(help: "While a simulated GoPro records, its battery drops 1 % every this many seconds (0: never).")
    var goproBatteryDrain: Double = 30

    @Option(help: "Simulated Rokid glasses notify Dev_BatteryChanged every this many seconds once authenticated (0: never).")
    var rokidBatteryInterval: Double = 30

    /// The options as ``SimulatedDeviceTimings``; throws for a value out of range.
    var timings: SimulatedDeviceTimings {
        get throws {
            guard heartRateInterval >= 0 else { throw CLIError("--heart-rate-interval must not be negative") }
            guard thermoInterval >= 0, thermoInterval <= 86400 else {
                throw CLIError("--thermo-interval must be in [0, 86400] seconds, got \(thermoInterval)")
            }
            for (name, v) in [("--gopro-sleep-after", goproSleepAfter), ("--gopro-battery-drain", goproBatteryDrain),
                              ("--rokid-battery-interval", rokidBatteryInterval)] where !(v >= 0 && v <= 86400) {
                throw CLIError("\(name) must be in [0, 86400] seconds, got \(v)")
            }
            return SimulatedDeviceTimings(goproSleepAfter: SimulateCommand.period(goproSleepAfter),
                                          goproBatteryDrain: SimulateCommand.period(goproBatteryDrain),
                                          rokidBatteryInterval: SimulateCommand.period(rokidBatteryInterval),
                                          heartRateInterval: SimulateCommand.period(heartRateInterval),
                                          thermoInterval: SimulateCommand.period(thermoInterval))
        }
    }
}
