import ArgumentParser
import DeviceSimulators
import Foundation
import PeripheralServer
import Reactor

/// `gatt2mqtt peripherals`: the simulated devices served to a radio front-end (Bumble,
/// `scripts/vm/radio.py`) over a Unix socket (docs/bluez.md "The radio front-end"). Prints
/// `PERIPHERALS_SOCKET=…` once listening; runs until SIGINT/SIGTERM or `--seconds`.
struct PeripheralsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peripherals",
        abstract: "Serve simulated devices (GoPro, Rokid glasses, heart-rate sensor, thermometer, passive advertisers) to a radio front-end over a Unix socket."
    )

    @Option(help: "The Unix socket to listen on (a stale socket there is replaced).")
    var socket: String

    @Option(name: .customLong("device"), help: "A simulated device KIND@ADDRESS, KIND = gopro, rokid, hr, thermo, bthome, bthome-encrypted, xiaomi, atc, pvvx, ruuvi or govee (repeatable; default hr@C0:FF:EE:00:00:01); an encrypted one as KIND@ADDRESS#KEY (32 hex digits; default: its demo key, as for simulate).")
    var devices: [String] = []

    @OptionGroup var deviceTimings: DeviceTimingOptions

    @Option(help: "Stop after this many seconds (default: run until SIGINT/SIGTERM).")
    var seconds: Double?





    var timings: SimulatedDeviceTimings {
        get throws { try deviceTimings.timings }
    }

    func validate() throws {
        let specs = try SimulateCommand.specs(devices, default: "C0:FF:EE:00:00:01")
        guard Set(specs.map(\.address)).count == specs.count else { throw CLIError("--device: two devices with one address") }
        _ = try SimulateCommand.runTime(seconds)
        _ = try timings
    }

    func run() async throws {
        let signals = await StopSignals()
        let loop = EventLoop(name: "peripherals")
        defer { loop.shutdown() }
        let timings = try self.timings
        let peripherals = try SimulateCommand.specs(devices, default: "C0:FF:EE:00:00:01")
            .map { SimulatedPeripheral($0, timings: timings, executor: loop) }
        let server: PeripheralServer
        do {
            server = try PeripheralServer(peripherals: peripherals, socketPath: socket, loop: loop)
            try server.start()
        } catch {
            throw CLIError("peripherals: \(error)")
        }
        emit("PERIPHERALS_SOCKET=\(socket)")

        let beat = timings.heartRateInterval
        let beats = Task(executorPreference: loop) {
            guard let beat else { return }
            await SimulatedPeripheral.heartbeats(peripherals, every: beat)
        }
        let thermo = timings.thermoInterval
        let readings = Task(executorPreference: loop) {
            guard let thermo else { return }
            await SimulatedPeripheral.readings(peripherals, every: thermo)
        }
        let advertise = timings.advertiseInterval
        let advertising = Task(executorPreference: loop) {
            guard let advertise else { return }
            await SimulatedPeripheral.advertising(peripherals, every: advertise) { server.advertisementChanged($0.address) }
        }
        await signals.wait(after: try SimulateCommand.runTime(seconds))
        beats.cancel()
        readings.cancel()
        advertising.cancel()
        await server.stop()
    }
}
