import ArgumentParser
import DeviceSimulators

/// The simulated devices' timing options, shared by `simulate` and `peripherals`.
struct DeviceTimingOptions: ParsableArguments {
    @Option(help: "Notify a heart-rate measurement every this many seconds while subscribed (0: never).")
    var heartRateInterval: Double = 1

    @Option(help: "A simulated thermometer takes a reading every this many seconds and notifies what changed while subscribed: temperature ±0.05 °C, humidity ±0.25 % (0: never).")
    var thermoInterval: Double = 5

    @Option(help: "A simulated advertiser (bthome, atc, pvvx, ruuvi, govee) takes a reading every this many seconds: new values in its advertisement and its frame counter (packet id) up by one (0: never).")
    var advertiseInterval: Double = 2

    @Option(help: "A simulated GoPro sleeps (drops the link) after this many seconds without keep-alive or other writes (0: never).")
    var goproSleepAfter: Double = 10

    @Option(help: "While a simulated GoPro records, its battery drops 1 % every this many seconds (0: never).")
    var goproBatteryDrain: Double = 30

    @Option(help: "Simulated Rokid glasses notify Dev_BatteryChanged every this many seconds once authenticated (0: never).")
    var rokidBatteryInterval: Double = 30

    @Flag(inversion: .prefixedNo, help: "Simulated GoPros push the registered status and setting values that change (--no-gopro-pushes: they answer, registrations included, and push nothing, as the C floor's camera in Benchmarks/Bridge/run.sh).")
    var goproPushes = true

    /// The options as ``SimulatedDeviceTimings``; throws for a value out of range.
    var timings: SimulatedDeviceTimings {
        get throws {
            // Each 0 (never) to a day: SimulateCommand.period.
            SimulatedDeviceTimings(goproSleepAfter: try SimulateCommand.period("gopro-sleep-after", goproSleepAfter),
                                   goproBatteryDrain: try SimulateCommand.period("gopro-battery-drain", goproBatteryDrain),
                                   rokidBatteryInterval: try SimulateCommand.period("rokid-battery-interval", rokidBatteryInterval),
                                   heartRateInterval: try SimulateCommand.period("heart-rate-interval", heartRateInterval),
                                   thermoInterval: try SimulateCommand.period("thermo-interval", thermoInterval),
                                   advertiseInterval: try SimulateCommand.period("advertise-interval", advertiseInterval),
                                   goproPushes: goproPushes)
        }
    }
}
