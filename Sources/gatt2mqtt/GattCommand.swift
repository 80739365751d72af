import ArgumentParser
import BinaryCoding
import BlueZ
import BridgeConfig
import DBus
import Foundation

/// `gatt2mqtt gatt --device ADDR [--services] [--read CHAR] [--write CHAR HEX [--command]]
/// [--listen CHAR [--seconds N]] [--pair]`: connect (or adopt the link BlueZ has), pair first
/// with `--pair` when the device is not paired yet, and run the operations in one invocation —
/// subscribe first, then write, read, list; then print notifications until `--seconds`
/// (docs/bluez.md). An encrypted characteristic on an unpaired link fails with a hint to `--pair`.
struct GattCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatt",
        abstract: "Connect to a device and list, read, write or listen to characteristics (UUID: 2A37, 128-bit or GP-XXXX; values in hex)."
    )

    @OptionGroup var busOptions: BusOptions

    @Option(help: "Device address, e.g. C0:FF:EE:00:00:01.")
    var device: String

    @Flag(help: "List services and characteristics with their flags.")
    var services = false

    @Option(help: "Read this characteristic and print its value in hex.")
    var read: String?

    @Option(parsing: .upToNextOption, help: "Write: --write CHAR HEX.")
    var write: [String] = []

    @Flag(help: "With --write: write without response (ATT Write Command, split to MTU-3).")
    var command = false

    @Option(help: "Subscribe to this characteristic; print each notification's hex on its own line.")
    var listen: String?

    @Flag(help: "Pair (Just Works, headless agent) after connecting when the device is not paired yet (GoPro needs it).")
    var pair = false

    @Option(help: "Seconds to connect, and to listen with --listen.")
    var seconds: Double = 10

    /// `--seconds`, checked: more than 0, up to an hour.
    var timeout: Duration { get throws(CLIError) { try CLIError.seconds("seconds", seconds, in: .milliseconds(1) ... .seconds(3600)) } }

    func validate() throws {
        for u in [read, listen, write.first].compactMap({ $0 }) where BluetoothUUID(u) == nil {
            throw CLIError("\(u): not a 16/32/128-bit UUID or GP-XXXX")
        }
        _ = try timeout
        if !write.isEmpty {
            guard write.count == 2 else { throw CLIError("--write takes a characteristic and a hex value") }
            do { _ = try Hex.decode(write[1]) } catch { throw CLIError("--write value: \(error)") }
        }
        if command, write.isEmpty { throw CLIError("--command goes with --write") }
        if !services, read == nil, write.isEmpty, listen == nil {
            throw CLIError("nothing to do: give --services, --read, --write or --listen")
        }
    }

    func run() async throws {
        try await busOptions.withClient { client in
            let adapter = try client.adapter(named: busOptions.adapter)
            let timeout = try timeout
            var found = client.device(device, adapter: adapter)
            if found == nil {
                let scan = try await client.scan(adapter, filter: DiscoveryFilter(pattern: device.uppercased()))
                found = try? await client.waitForDevice(device, adapter: adapter, timeout: timeout)
                try? await scan.stop()
            }
            guard let dev = found else { throw CLIError("device \(device) not found on \(adapter.name)") }
            var step = "connect"
            do {
                try await client.connect(dev, timeout: timeout)
                if pair, !client.isPaired(dev) {
                    step = "pair"
                    try? await client.registerPairingAgent()  // not fatal: another agent may answer
                    try await client.pair(dev, timeout: timeout)
                }
                var notifications: AsyncStream<[UInt8]>?
                if let listen {
                    step = listen
                    notifications = try await client.notifications(try client.characteristic(listen, on: dev))
                }
                if write.count == 2 {
                    step = write[0]
                    try await client.write(try Hex.decode(write[1]), to: try client.characteristic(write[0], on: dev),
                                           type: command ? .command : .request)
                    emit("ok")
                }
                if let read {
                    step = read
                    emit(Hex.encode(try await client.read(try client.characteristic(read, on: dev))))
                }
                if services { printServices(client, dev) }
                if let notifications, let listen {
                    let c = try client.characteristic(listen, on: dev)
                    let stop = Task {
                        try? await Task.sleep(for: timeout)
                        try? await client.stopNotifications(c)
                    }
                    for await v in notifications { emit(Hex.encode(v)) }
                    stop.cancel()
                }
            } catch let e as BlueZError {
                let hint = e.needsPairing && !pair ? " (the device needs pairing: run again with --pair)" : ""
                throw CLIError("\(device) \(step): \(e)\(hint)")
            }
        }
    }

    /// Services and their characteristics (``BlueZClient/gattServices(of:)``), one line each.
    func printServices(_ client: BlueZClient, _ dev: BlueZDevice) {
        for s in client.gattServices(of: dev) {
            emit("service \(s.uuid)\(s.primary ? " (primary)" : "")")
            for c in s.characteristics { emit("  characteristic \(c.uuid) [\(c.flags.joined(separator: ","))]") }
        }
    }
}
