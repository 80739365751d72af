import Foundation
import Mosquitto
import Reactor
import TestSupport
import Testing

/// Linux's own Bluetooth stack, as `scripts/vm-bluez` runs it (docs/bluez.md, "The real
/// stack"): inside the VM, the project's device models (`gatt2mqtt peripherals`) behind the
/// Bumble radio front-end (`scripts/vm/radio.py`: the peripherals on Bumble's virtual link, and
/// the kernel's hci0 — with `centrals: 2` also hci1 — through /dev/vhci), the real bluetoothd
/// 5.66 on the VM's system bus, and a real mosquitto. Every process is started here and stopped
/// by its pid.
///
/// Only enabled where `GATT2MQTT_REAL_STACK=1` (set by `scripts/test` for the run inside the
/// VM); elsewhere the suites using it are skipped, since there is no /dev/vhci on the host.
final class RealStack {
    static var enabled: Bool { ProcessInfo.processInfo.environment["GATT2MQTT_REAL_STACK"] == "1" }

    /// How long the slow parts may take under software emulation (qemu TCG): a connect with
    /// GATT discovery and pairing takes seconds there.
    static let slow: Duration = .seconds(90)

    let directory: TemporaryDirectory
    let broker: MosquittoBroker
    /// Where the test's hub clients run (disconnect them before ``stop()``).
    let loop = EventLoop(name: "t-stack-hub")
    let name: String
    let devices: [String]
    /// More arguments for `radio.py` (e.g. `--legacy-connection-complete`).
    let radioOptions: [String]
    /// More arguments for `gatt2mqtt peripherals` (e.g. `--advertise-interval 1`).
    let modelOptions: [String]
    /// How many central adapters bluetoothd has on the peripherals' radio (hci0, hci1, …).
    private(set) var centrals = 1
    private(set) var models: pid_t = 0
    private(set) var radio: pid_t = 0
    private(set) var bluetoothd: pid_t = 0
    /// `btmon` writing the HCI trace and `dbus-monitor` recording bluetoothd's D-Bus traffic,
    /// when `GATT2MQTT_REAL_STACK_TRACE=1`.
    private(set) var btmon: pid_t = 0
    private(set) var dbusMonitor: pid_t = 0
    var bridge: Process?
    /// Bridges started by name (``startBridge(named:config:logLevel:)``), e.g. a cluster's nodes.
    private(set) var bridges: [String: Process] = [:]
    private var stopped = false

    var modelsSocket: String { directory.path + "/models.sock" }
    var controlSocket: String { directory.path + "/radio.sock" }
    var radioLog: String { directory.path + "/radio.log" }
    var bluetoothdLog: String { directory.path + "/bluetoothd.log" }
    var bridgeLogPath: String { directory.path + "/bridge.log" }
    /// The HCI trace (`btmon -w`; read it with `btmon -r`), with `GATT2MQTT_REAL_STACK_TRACE=1`.
    var hciTrace: String { directory.path + "/hci.btsnoop" }
    /// Every D-Bus message from or to `org.bluez` (`dbus-monitor`), with `GATT2MQTT_REAL_STACK_TRACE=1`.
    var dbusTrace: String { directory.path + "/dbus.log" }

    /// - Parameters:
    ///   - name: names the folder of this stack's logs under `$VM_ARTIFACTS`.
    ///   - devices: `KIND@ADDRESS` as for `gatt2mqtt peripherals --device`.
    ///   - radioOptions: more arguments for `scripts/vm/radio.py`.
    ///   - centrals: how many central adapters (hci0, hci1, …) bluetoothd gets on the radio.
    ///   - modelOptions: more arguments for `gatt2mqtt peripherals`.
    init(_ name: String = #function, devices: [String], radioOptions: [String] = [], centrals: Int = 1,
         modelOptions: [String] = []) throws {
        self.name = name.prefix { $0 != "(" }.description
        self.devices = devices
        self.radioOptions = radioOptions
        self.modelOptions = modelOptions
        // Each stack starts with no bonds: bluetoothd keeps them in /var/lib/bluetooth, the radio
        // in memory, so a bond left by an earlier test would meet a peripheral that forgot it.
        // Only inside scripts/vm-bluez's VM (whose /var/lib is a tmpfs overlay), never on a host.
        guard ProcessInfo.processInfo.environment["VM_KERNEL_RELEASE"] != nil else {
            throw HarnessError("the real-stack harness runs only inside scripts/vm-bluez")
        }
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/var/lib/bluetooth")) ?? [] {
            try? FileManager.default.removeItem(atPath: "/var/lib/bluetooth/" + entry)
        }
        directory = try TemporaryDirectory()
        broker = try MosquittoBroker()
        do {
            if ProcessInfo.processInfo.environment["GATT2MQTT_REAL_STACK_TRACE"] == "1" {
                btmon = try spawn("/usr/bin/btmon", ["-w", hciTrace], log: directory.path + "/btmon.log")
                dbusMonitor = try spawn("/usr/bin/dbus-monitor", ["--system", "sender='org.bluez'", "destination='org.bluez'"],
                                        log: dbusTrace)
            }
            try startRadio(centrals: centrals)
            try startBluetoothd()
        } catch {
            stop()
            throw error
        }
    }

    // MARK: - Processes

    /// The kernel's Bluetooth adapters on the radio: `hci0`, with two centrals `hci1` too.
    var adapters: [String] { (0..<centrals).map { "hci\($0)" } }

    /// The device models and the radio with `centrals` central adapters (radio.py `--centrals`:
    /// one more vhci controller each, all on the peripherals' link); waits for `radio: ready` and
    /// for the kernel's hci0 (and hci1, …).
    func startRadio(centrals: Int = 1) throws {
        self.centrals = centrals
        models = try spawn(CLI.executable.path, ["peripherals", "--socket", modelsSocket] + devices.flatMap { ["--device", $0] } + modelOptions,
                           log: directory.path + "/models.log")
        try waitFor("the device models' socket", timeout: .seconds(30)) { FileManager.default.fileExists(atPath: modelsSocket) }
        radio = try spawn("/usr/bin/env", ["python3", Self.projectPath("scripts/vm/radio.py"), "--models", modelsSocket,
                                           "--transport", "vhci", "--centrals", "\(centrals)", "--control", controlSocket]
                              + radioOptions,
                          log: radioLog)
        try waitFor("radio: ready", timeout: Self.slow) { self.file(radioLog).contains("radio: ready") }
        for adapter in adapters {
            try waitFor(adapter, timeout: .seconds(30)) { FileManager.default.fileExists(atPath: "/sys/class/bluetooth/" + adapter) }
        }
    }

    /// bluetoothd 5.66 with one ATT channel (`[GATT] Channels = 1`: with EATT, bluetoothd
    /// talking to itself drops the link); waits until `org.bluez` answers and every adapter
    /// (hci0, …) is powered.
    func startBluetoothd() throws {
        let conf = directory.path + "/main.conf"
        try "[General]\n[Policy]\nAutoEnable=true\n[GATT]\nChannels = 1\n".write(toFile: conf, atomically: true, encoding: .utf8)
        bluetoothd = try spawn("/usr/libexec/bluetooth/bluetoothd", ["-n", "-d", "-f", conf], log: bluetoothdLog)
        for adapter in adapters {
            try waitFor("bluetoothd with \(adapter) powered", timeout: .seconds(60)) { self.powered(adapter) }
        }
    }

    /// Whether bluetoothd says `adapter` is powered (`Adapter1.Powered`).
    func powered(_ adapter: String) -> Bool {
        (try? Self.gdbus(["--object-path", "/org/bluez/" + adapter, "--method", "org.freedesktop.DBus.Properties.Get",
                          "org.bluez.Adapter1", "Powered"])) == "(<true>,)"
    }

    func killBluetoothd(_ signal: Int32 = SIGKILL) {
        killAndReap(bluetoothd, signal)
        bluetoothd = 0
    }

    /// A bridge configuration on this stack's broker and the VM's system bus: `devices:` as
    /// given, `adapter:` (nil: none, for a `bluetooth` section that names the adapters itself),
    /// more lines of the `bluetooth:` and `mqtt:` sections (indented two spaces), top-level
    /// lines (`top`, e.g. `node_id` and `cluster`), and the database `<database>.sqlite`.
    func bridgeConfig(devices yaml: String, adapter: String? = "hci0", bluetooth: String = "", mqtt: String = "",
                      top: String = "", database: String = "state") -> String {
        """
        \(top)
        mqtt:
          url: mqtt://127.0.0.1:\(broker.port)
          reconnect_min: 0.5
          reconnect_max: 2
        \(mqtt)
        bluetooth:
        \(adapter.map { "  adapter: " + $0 } ?? "")
        \(bluetooth)
        database:
          path: \(directory.path)/\(database).sqlite
        devices:
        \(yaml)
        """
    }

    /// `gatt2mqtt run` on the VM's system bus with `devices:` as given.
    @discardableResult
    func startBridge(devices yaml: String, bluetooth: String = "", logLevel: String = "info") throws -> Process {
        let p = try launch("bridge", config: bridgeConfig(devices: yaml, bluetooth: bluetooth), logLevel: logLevel)
        bridge = p
        return p
    }

    /// `gatt2mqtt run` with `config` (see ``bridgeConfig(devices:adapter:bluetooth:mqtt:top:database:)``)
    /// as `<name>.yaml`, its log in `<name>.log`; stopped by ``stopBridge(named:_:)`` or ``stop()``.
    @discardableResult
    func startBridge(named name: String, config: String, logLevel: String = "info") throws -> Process {
        let p = try launch(name, config: config, logLevel: logLevel)
        bridges[name] = p
        return p
    }

    private func launch(_ name: String, config: String, logLevel: String) throws -> Process {
        let path = directory.path + "/\(name).yaml"
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        // The harness' own variables (GATT2MQTT_REAL_STACK*, GATT2MQTT_VM_*) are not configuration overrides.
        return try launchBridge(config: path, logLevel: logLevel, log: directory.path + "/\(name).log",
                                dropping: ["GATT2MQTT_REAL_STACK", "GATT2MQTT_VM_"])
    }

    /// Signals the bridge started as `name` (SIGTERM: a clean stop; SIGKILL: no goodbye) and
    /// waits for its exit (off the cooperative pool); returns its status.
    @discardableResult
    func stopBridge(named name: String, _ signal: Int32 = SIGTERM) async -> Int32 {
        guard let p = bridges.removeValue(forKey: name) else { return 0 }
        if p.isRunning { kill(p.processIdentifier, signal) }
        return await p.exited()
    }

    /// The log of the bridge started as `name` so far.
    func bridgeLog(_ name: String) -> String { file(directory.path + "/\(name).log") }

    /// Subscribes `hub` to `gatt2mqtt/<id>/availability`, starts the bridge and waits until the
    /// device is online; returns the subscription (for what comes next). Subscribe to anything
    /// else before.
    func startOnline(_ id: String, devices yaml: String, hub: MQTTClient, bluetooth: String = "",
                     logLevel: String = "info") async throws -> MQTTSubscription
    {
        let availability = try await hub.subscribe("gatt2mqtt/\(id)/availability")
        try startBridge(devices: yaml, bluetooth: bluetooth, logLevel: logLevel)
        try #require(await firstMessage(availability) { $0 == #"{"state":"online"}"# } != nil,
                     "\(id) never online; bridge log:\n\(bridgeLog.suffix(3000))")
        return availability
    }

    /// SIGTERM to the bridge, and its exit status.
    @discardableResult
    func stopBridge(_ signal: Int32 = SIGTERM) -> Int32 {
        guard let bridge else { return 0 }
        if bridge.isRunning { kill(bridge.processIdentifier, signal) }
        bridge.waitUntilExit()
        self.bridge = nil
        return bridge.terminationStatus
    }

    /// Stops everything it started, by pid; prints the logs of a failed test's processes when
    /// `GATT2MQTT_REAL_STACK_LOGS=1`.
    func stop() {
        guard !stopped else { return }
        stopped = true
        stopBridge(SIGKILL)
        for (_, p) in bridges where p.isRunning { reap(p, SIGKILL) }
        killAndReap(bluetoothd, SIGTERM)
        killAndReap(radio, SIGTERM)
        killAndReap(models, SIGTERM)
        if btmon != 0 { killAndReap(btmon, SIGINT) }
        if dbusMonitor != 0 { killAndReap(dbusMonitor, SIGTERM) }
        btmon = 0
        dbusMonitor = 0
        bluetoothd = 0
        radio = 0
        models = 0
        broker.stop()
        loop.shutdown()
        if let artifacts = ProcessInfo.processInfo.environment["VM_ARTIFACTS"] {
            // Inside scripts/vm-bluez: keep every log (the host copies them out on request).
            let keep = artifacts + "/" + name
            try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            let named = (try? FileManager.default.contentsOfDirectory(atPath: directory.path))?
                .filter { $0.hasSuffix(".log") || $0.hasSuffix(".yaml") } ?? []
            for log in Set(named + ["hci.btsnoop", "dbus.log"]) {
                try? FileManager.default.copyItem(atPath: directory.path + "/" + log, toPath: keep + "/" + log)
            }
        }
        if ProcessInfo.processInfo.environment["GATT2MQTT_REAL_STACK_LOGS"] == "1" {
            let logs = [("bridge", bridgeLogPath)] + bridges.keys.sorted().map { ($0, directory.path + "/\($0).log") }
                + [("radio", radioLog), ("models", directory.path + "/models.log"), ("bluetoothd", bluetoothdLog)]
            for (name, path) in logs {
                print("----- \(name) log (last 60 lines)")
                print(file(path).split(separator: "\n", omittingEmptySubsequences: false).suffix(60).joined(separator: "\n"))
            }
        }
    }

    deinit { stop() }

    // MARK: - The radio's control socket and the system's tools

    /// Sends one JSON line to the radio's control socket and returns its one-line answer.
    @discardableResult
    func control(_ request: String) throws -> String {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
        defer { close(fd) }
        guard connectUnix(fd, path: controlSocket) else { throw HarnessError("connect \(controlSocket): errno \(errno)") }
        let line = Array((request + "\n").utf8)
        guard write(fd, line, line.count) == line.count else { throw HarnessError("write to the radio's control socket failed") }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while !answer.contains(UInt8(ascii: "\n")) {
            let n = read(fd, &buffer, buffer.count)
            guard n > 0 else { throw HarnessError("the radio's control socket answered nothing to \(request)") }
            answer += buffer[0..<n]
        }
        return String(decoding: answer.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
    }

    /// The radio's view of the peripheral at `address` (`status` on the control socket):
    /// connected, pairings, writes per characteristic UUID, …
    func peripheral(_ address: String) throws -> [String: Any] {
        let answer = try control(#"{"op":"status"}"#)
        guard let object = try JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any],
              let peripherals = object["peripherals"] as? [[String: Any]],
              let p = peripherals.first(where: { ($0["address"] as? String)?.uppercased() == address.uppercased() })
        else { throw HarnessError("no peripheral \(address) in the radio's status: \(answer)") }
        return p
    }

    /// How many writes the peripheral at `address` received on the characteristic `uuid` (128-bit form).
    func writes(_ address: String, _ uuid: String) throws -> Int {
        ((try peripheral(address))["writes"] as? [String: Int])?[uuid.lowercased()] ?? 0
    }

    /// How many times the peripheral at `address` received exactly `hex` on the characteristic
    /// `uuid` (128-bit form), among the last 100 values written there.
    func writes(_ address: String, _ uuid: String, value hex: String) throws -> Int {
        (((try peripheral(address))["written"] as? [String: [String]])?[uuid.lowercased()] ?? []).filter { $0 == hex.lowercased() }.count
    }

    /// `btmgmt` (BlueZ's management tool, straight to the kernel) with `arguments`, on the
    /// controller `index` (0: hci0).
    @discardableResult
    func btmgmt(_ arguments: String..., index: Int = 0) throws -> String {
        try runTool("/usr/bin/btmgmt", ["--index", "\(index)"] + arguments, in: directory.path)
    }

    /// `gdbus call --system --dest org.bluez` with `arguments`: an independent D-Bus client.
    static func gdbus(_ arguments: [String]) throws -> String {
        try runTool("/usr/bin/gdbus", ["call", "--system", "--dest", "org.bluez"] + arguments, in: "/")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// How many `Pair` calls bluetoothd received (its debug log says "Requesting bonding" for each).
    var pairCalls: Int {
        file(bluetoothdLog).components(separatedBy: "bonding_request_new() Requesting bonding for").count - 1
    }

    func file(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    var bridgeLog: String { file(bridgeLogPath) }

    /// Waits (polling, with a deadline) until `condition` holds; throws naming `what`.
    func waitFor(_ what: String, timeout: Duration, _ condition: () -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { throw HarnessError("no \(what) within \(timeout)") }
            usleep(50_000)
        }
    }

    static func projectPath(_ relative: String, file: String = #filePath) -> String {
        var url = URL(fileURLWithPath: file)
        for _ in 0..<4 { url.deleteLastPathComponent() }  // RealStack/, CLITests/, Tests/
        return url.appendingPathComponent(relative).path
    }
}

/// Waits for the first message on `subscription` whose payload satisfies `match`, up to `timeout`.
func firstMessage(_ subscription: MQTTSubscription, timeout: Duration = RealStack.slow,
                  where match: @escaping @Sendable (String) -> Bool) async -> MQTTMessage? {
    await withDeadline(timeout) {
        for await message in subscription where match(message.payloadString) { return message }
        return nil
    }
}
