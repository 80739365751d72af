import ArgumentParser
import BlueZSimulator
import BridgeConfig
import DeviceSimulators
import Foundation

/// `gatt2mqtt simulate`: a private dbus-daemon with the emulated BlueZ and a battery + heart-rate
/// device (or the `--device` ones: GoPro, Rokid glasses, heart-rate sensor, thermometer, passive
/// advertisers), for demos and end-to-end tests (docs/bluez.md). Prints the bus address as
/// `DBUS_SYSTEM_BUS_ADDRESS=…` and runs until SIGINT/SIGTERM (from its start: a signal during the
/// start-up stops it too) or `--seconds`. Parses and checks the options; `EmulatedBlueZ`
/// (DeviceSimulators) does the work and stops the daemon by its pid.
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run an emulated BlueZ on a private D-Bus with simulated devices (GoPro, Rokid glasses, heart-rate sensor, thermometer, passive advertisers)."
    )

    @Option(help: "Address of the heart-rate sensor when no --device is given.")
    var address: String = "C0:FF:EE:00:00:01"

    @Option(name: .customLong("device"), help: "A simulated device KIND@ADDRESS, KIND = gopro, rokid, hr (heart-rate sensor), thermo (temperature, humidity, battery) or a passive advertiser that never accepts a connection: bthome (BTHome v2), bthome-encrypted (BTHome v2 with AES-CCM), xiaomi (MiBeacon v5, encrypted, as a LYWSD03MMC), atc (ATC1441), pvvx (PVVX custom), ruuvi (RuuviTag format 5), govee (H5075) (repeatable), e.g. gopro@C0:FF:EE:00:00:01. An encrypted one takes its key as KIND@ADDRESS#KEY (32 hex digits); without it, a demo key (docs/advertisements.md): bthome-encrypted 231d39c1d7cc1ab1aee224cd096db932, xiaomi e9ea895fac7cca6d30532432a516f3a8.")
    var devices: [String] = []

    @OptionGroup var deviceTimings: DeviceTimingOptions

    @Option(help: "Stop after this many seconds (default: run until SIGINT/SIGTERM).")
    var seconds: Double?


    @Option(name: .customLong("fault"),
            help: "A device fault ADDRESS:NAME=VALUE (repeatable), NAME = refuse-connections, refuse-pairing, silent (true/false), drop-link-on-write, drop-notification, duplicate-notification (N-th, 1-based) or reply-delay-ms, e.g. C0:FF:EE:00:00:01:drop-notification=2.")
    var faults: [String] = []

    @Flag(help: "Start with the adapters powered off (calls fail NotReady until Powered is set true).")
    var adapterOff = false

    @Option(name: .customLong("rssi"),
            help: "The RSSI the adapters receive a device at, [ADAPTER/]ADDRESS=DBM with DBM in -127...20 (repeatable; 0: the device's own; without ADAPTER/: every adapter), e.g. C0:FF:EE:00:00:01=-75 or hci1/C0:FF:EE:00:00:01=-70. Change it at runtime with org.gatt2mqtt.Simulator1.SetRSSI / SetRSSIOn.")
    var rssi: [String] = []

    @Option(help: "The adapters the emulated bluetoothd serves, comma-separated (each at /org/bluez/NAME with its own radio; a device is in range of all), e.g. hci0,hci1.")
    var adapters: String = "hci0"




    @Option(help: "How simulated Rokid glasses answer AUTH_REQ: refuse (a record other than their 0x9301 one gets retCode -4), silent (it gets no answer), ok (any record accepted) or taken (every AUTH_REQ gets -6).")
    var rokidAuth: String = SimulatedRokid.AuthMode.refuse.rawValue

    @Option(help: "While discovering, each device in range and not connected advertises every this many seconds: PropertiesChanged RSSI (and ManufacturerData/ServiceData when changed) on its Device1, as bluetoothd reports advertisements (0: announced once, then silent).")
    var advertisingInterval: Double = 1

    /// `--<option>` seconds (0 to a day) as a duration, nil for 0 (never).
    static func period(_ option: String, _ seconds: Double) throws(CLIError) -> Duration? {
        let d = try CLIError.seconds(option, seconds, in: .zero ... .seconds(86400))
        return d > .zero ? d : nil
    }

    /// `--seconds`, checked: how long to run (more than 0), nil for until a signal.
    static func runTime(_ seconds: Double?) throws(CLIError) -> Duration? {
        try seconds.map { s throws(CLIError) in try CLIError.seconds("seconds", s, in: .milliseconds(1) ... DurationLimits.maximum) }
    }

    static func isAddress(_ a: String) -> Bool { SimulatedDeviceSpec.isAddress(a) }

    /// `--device` values (or the heart-rate sensor at `--address`); throws for a bad one.
    static func specs(_ devices: [String], default address: String) throws -> [SimulatedDeviceSpec] {
        guard !devices.isEmpty else { return [SimulatedDeviceSpec(kind: .hr, address: address)] }
        return try devices.map { d in
            guard let spec = SimulatedDeviceSpec(parsing: d) else {
                let kinds = SimulatedDeviceSpec.Kind.allCases.map(\.rawValue).joined(separator: ", ")
                let keyed = SimulatedDeviceSpec.Kind.allCases.filter(\.takesKey).map(\.rawValue).joined(separator: ", ")
                throw CLIError("--device \(d): expected KIND@ADDRESS with KIND one of \(kinds), e.g. thermo@C0:FF:EE:00:00:04, "
                    + "or KIND@ADDRESS#KEY with KIND one of \(keyed) and KEY 32 hex digits")
            }
            return spec
        }
    }

    var timings: SimulatedDeviceTimings {
        get throws { try deviceTimings.timings }
    }

    /// `ADDRESS:NAME=VALUE` → the address and the fault change (checked against
    /// ``BlueZSimulator/Faults/set(_:_:)``).
    static func fault(_ text: String) throws -> (address: String, name: String, value: String) {
        let address = String(text.prefix(17)).uppercased()
        let rest = text.dropFirst(17)
        guard isAddress(address), rest.first == ":", let eq = rest.firstIndex(of: "=") else {
            throw CLIError("--fault \(text): expected ADDRESS:NAME=VALUE, e.g. C0:FF:EE:00:00:01:silent=true")
        }
        let name = String(rest[rest.index(after: rest.startIndex)..<eq]), value = String(rest[rest.index(after: eq)...])
        var probe = BlueZSimulator.Faults()
        do { try probe.set(name, value) } catch { throw CLIError("--fault \(text): \(error)") }
        return (address, name, value)
    }

    /// `--adapters` as names; throws naming what is wrong.
    static func adapterNames(_ text: String) throws -> [String] {
        let names = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        if let problem = BlueZSimulator.Options(adapters: names).adaptersProblem {
            throw CLIError("--adapters \(text): \(problem)")
        }
        return names
    }

    /// `[ADAPTER/]ADDRESS=DBM` → the adapter (nil: every adapter; one of `adapters`), the address
    /// (upper case) and the RSSI; throws naming the bad part.
    static func rssiOverride(_ text: String, adapters: [String]) throws -> (adapter: String?, address: String, dbm: Int16) {
        guard let eq = text.firstIndex(of: "=") else {
            throw CLIError("--rssi \(text): expected ADDRESS=DBM, e.g. C0:FF:EE:00:00:01=-75, or ADAPTER/ADDRESS=DBM for one adapter")
        }
        var target = text[..<eq], adapter: String?
        if let slash = target.firstIndex(of: "/") {
            let name = String(target[..<slash])
            guard adapters.contains(name) else {
                throw CLIError("--rssi \(text): no adapter '\(name)' (--adapters \(adapters.joined(separator: ",")))")
            }
            adapter = name
            target = target[target.index(after: slash)...]
        }
        let address = target.uppercased(), value = text[text.index(after: eq)...]
        guard isAddress(address) else {
            throw CLIError("--rssi \(text): '\(target)' is not an address like C0:FF:EE:00:00:01")
        }
        guard let dbm = Int16(value), (-127...20).contains(dbm) else {
            throw CLIError("--rssi \(text): '\(value)' is not an RSSI: an integer in -127...20 (dBm)")
        }
        return (adapter, address, dbm)
    }

    /// `--rokid-auth` as a mode; throws for an unknown name.
    var rokidAuthMode: SimulatedRokid.AuthMode {
        get throws {
            guard let mode = SimulatedRokid.AuthMode(rawValue: rokidAuth) else {
                throw CLIError("--rokid-auth \(rokidAuth): expected \(SimulatedRokid.AuthMode.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return mode
        }
    }

    func validate() throws {
        guard Self.isAddress(address) else {
            throw CLIError("--address \(address): expected six hex pairs like C0:FF:EE:00:00:01")
        }
        let addresses = Set(try Self.specs(devices, default: address).map(\.address))
        for f in faults {
            let parsed = try Self.fault(f)
            guard addresses.contains(parsed.address) else { throw CLIError("--fault \(f): no simulated device \(parsed.address)") }
        }
        let adapterNames = try Self.adapterNames(adapters)
        for r in rssi {
            let parsed = try Self.rssiOverride(r, adapters: adapterNames)
            guard addresses.contains(parsed.address) else { throw CLIError("--rssi \(r): no simulated device \(parsed.address)") }
        }
        _ = try Self.runTime(seconds)
        _ = try timings
        _ = try rokidAuthMode
        _ = try Self.period("advertising-interval", advertisingInterval)
    }

    func run() async throws {
        // Caught from here on: a signal during the start-up stops what was started (below).
        let signals = await StopSignals()
        let adapterNames = try Self.adapterNames(adapters)
        let options = EmulatedBlueZ.Options(
            devices: try Self.specs(devices, default: address), timings: try timings, rokidAuth: try rokidAuthMode,
            advertisingInterval: try Self.period("advertising-interval", advertisingInterval), faults: try faults.map(Self.fault),
            adapterOff: adapterOff, rssi: try rssi.map { try Self.rssiOverride($0, adapters: adapterNames) },
            adapters: adapterNames)
        let emulator: EmulatedBlueZ
        do {
            emulator = try await EmulatedBlueZ.start(options)
        } catch {
            throw CLIError("simulate: \(error)")
        }
        defer { emulator.stop() }
        emit("DBUS_SYSTEM_BUS_ADDRESS=\(emulator.busAddress)")
        await signals.wait(after: try Self.runTime(seconds))
    }
}
