import BlueZSimulator
import DBus
import Reactor

/// What `gatt2mqtt simulate` runs (docs/bluez.md "CLI"): a ``PrivateBus``, the BlueZ emulator on
/// it with the simulated devices, the GoPro control interface and the devices' own timers
/// (heartbeats, thermometer readings), all on one `EventLoop` thread of its own (docs/bluez.md
/// "On an event loop"). ``start(_:)`` brings it all up and, if a step fails, stops what it had
/// started; ``stop()`` stops everything in reverse order, the daemon last (by pid).
public final class EmulatedBlueZ {
    /// How to run it: the command line of `gatt2mqtt simulate`, parsed.
    public struct Options: Sendable {
        public var devices: [SimulatedDeviceSpec]
        public var timings: SimulatedDeviceTimings
        public var rokidAuth: SimulatedRokid.AuthMode
        /// ``BlueZSimulator/Options/advertisingInterval`` (nil: announced once, then silent).
        public var advertisingInterval: Duration?
        /// Device faults by name (``BlueZSimulator/Faults/set(_:_:)``), in order.
        public var faults: [(address: String, name: String, value: String)]
        /// Start with every adapter powered off.
        public var adapterOff: Bool
        /// The RSSI an adapter (nil: every adapter) receives a device at
        /// (``BlueZSimulator/setRSSI(_:_:adapter:)``; 0: the device's own), applied in order.
        public var rssi: [(adapter: String?, address: String, dbm: Int16)] = []
        /// The adapters (``BlueZSimulator/Options/adapters``), `hci0` alone by default.
        public var adapters: [String]

        public init(devices: [SimulatedDeviceSpec], timings: SimulatedDeviceTimings = .init(),
                    rokidAuth: SimulatedRokid.AuthMode = .refuse,
                    advertisingInterval: Duration? = BlueZSimulator.defaultAdvertisingInterval,
                    faults: [(address: String, name: String, value: String)] = [], adapterOff: Bool = false,
                    rssi: [(adapter: String?, address: String, dbm: Int16)] = [], adapters: [String] = ["hci0"]) {
            self.devices = devices
            self.timings = timings
            self.rokidAuth = rokidAuth
            self.advertisingInterval = advertisingInterval
            self.faults = faults
            self.adapterOff = adapterOff
            self.rssi = rssi
            self.adapters = adapters
        }
    }

    /// The private bus's address (what `DBUS_SYSTEM_BUS_ADDRESS` is set to for a client).
    public var busAddress: String { bus.address }
    /// The pid of the private bus's dbus-daemon.
    public var daemonPID: Int32 { bus.pid }

    private let bus: PrivateBus
    private let loop: EventLoop
    private let connection: DBusConnection
    private let simulator: BlueZSimulator
    private let tasks: [Task<Void, Never>]
    private var stopped = false

    private init(bus: PrivateBus, loop: EventLoop, connection: DBusConnection, simulator: BlueZSimulator, tasks: [Task<Void, Never>]) {
        self.bus = bus
        self.loop = loop
        self.connection = connection
        self.simulator = simulator
        self.tasks = tasks
    }

    /// Starts the daemon, connects, starts the emulator, puts the devices in range, applies the
    /// faults and RSSIs, exports `org.gatt2mqtt.SimulatedGoPro1` and starts the devices' timers.
    public static func start(_ options: Options) async throws(BlueZSimulatorError) -> EmulatedBlueZ {
        let bus: PrivateBus
        do { bus = try PrivateBus() } catch { throw BlueZSimulatorError.privateBus("\(error)") }
        let loop = EventLoop(name: "simulate")
        var connection: DBusConnection?
        var simulator: BlueZSimulator?
        do {
            let c = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: loop)
            connection = c
            let sim = BlueZSimulator(connection: c, options: .init(adapters: options.adapters,
                                                                   advertisingInterval: options.advertisingInterval))
            try await sim.start()
            simulator = sim
            let peripherals = options.devices.map {
                SimulatedPeripheral($0, timings: options.timings, rokidAuth: options.rokidAuth, executor: loop)
            }
            var cameras: [String: SimulatedGoPro] = [:]
            for peripheral in peripherals {
                if case let .gopro(camera) = peripheral {
                    cameras[camera.address] = camera
                    try camera.add(to: sim)
                } else {
                    try sim.add(peripheral.device)
                }
            }
            for fault in options.faults {
                var failure: BlueZSimulatorError?
                try sim.updateFaults(fault.address) { faults in
                    do throws(BlueZSimulatorError) { try faults.set(fault.name, fault.value) } catch { failure = error }
                }
                if let failure { throw failure }
            }
            for r in options.rssi {
                for adapter in r.adapter.map({ [$0] }) ?? options.adapters {
                    try sim.setRSSI(r.address, r.dbm == 0 ? nil : r.dbm, adapter: adapter)
                }
            }
            if options.adapterOff {
                for adapter in options.adapters { try sim.setAdapterPowered(false, adapter: adapter) }
            }
            try c.export(BlueZSimulator.controlPath, interfaces: [goProControl(cameras)])
            var tasks: [Task<Void, Never>] = []
            if let beat = options.timings.heartRateInterval {
                tasks.append(Task(executorPreference: loop) { await SimulatedPeripheral.heartbeats(peripherals, every: beat) })
            }
            if let period = options.timings.thermoInterval {
                tasks.append(Task(executorPreference: loop) { await SimulatedPeripheral.readings(peripherals, every: period) })
            }
            if let period = options.timings.advertiseInterval {
                tasks.append(Task(executorPreference: loop) { await SimulatedPeripheral.advertising(peripherals, every: period) })
            }
            return EmulatedBlueZ(bus: bus, loop: loop, connection: c, simulator: sim, tasks: tasks)
        } catch {
            simulator?.stop()
            connection?.close()
            loop.shutdown()
            bus.stop()
            if let e = error as? BlueZSimulatorError { throw e }
            if let e = error as? DBusError { throw .dbus(e) }
            throw .dbus(.invalidArgument("\(error)"))
        }
    }

    /// Stops the timers, the emulator, the connection, the event loop and, last, the daemon (by
    /// its pid). Idempotent.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        for task in tasks { task.cancel() }
        simulator.stop()
        connection.close()
        loop.shutdown()
        bus.stop()
    }

    deinit { stop() }
}
