import ArgumentParser
import BinaryCoding
import BlueZ
import Foundation

/// `gatt2mqtt gatt ADDRESS read|write|notify UUID [HEX]`: one GATT operation on a device,
/// connecting (or adopting the link BlueZ has) first (docs/bluez.md).
struct GattCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatt",
        abstract: "Read, write or subscribe to a characteristic (UUID: 2A37, 128-bit or GP-XXXX); values in hex."
    )

    enum Operation: String, ExpressibleByArgument, CaseIterable { case read, write, notify }

    @OptionGroup var busOptions: BusOptions

    @Argument(help: "Device address, e.g. C0:FF:EE:00:00:01.")
    var address: String

    @Argument(help: "read, write or notify.")
    var operation: Operation

    @Argument(help: "Characteristic UUID.")
    var uuid: String

    @Argument(help: "Hex value to write.")
    var value: String?

    @Flag(help: "Write without response (ATT Write Command, split to MTU-3).")
    var command = false

    @Option(help: "Seconds to connect / to listen for notifications.")
    var seconds: Double = 10

    func validate() throws {
        guard BluetoothUUID(uuid) != nil else { throw CLIError("\(uuid): not a 16/32/128-bit UUID or GP-XXXX") }
        guard seconds > 0, seconds <= 3600 else { throw CLIError("--seconds must be in (0, 3600], got \(seconds)") }
        if operation == .write, value == nil { throw CLIError("write needs a hex value") }
        if operation != .write, value != nil { throw CLIError("\(operation.rawValue) takes no value") }
        if let value {
            do { _ = try Hex.decode(value) } catch { throw CLIError("value: \(error)") }
        }
    }

    func run() async throws {
        let client = try await busOptions.client()
        defer { client.close() }
        let adapter = try client.adapter(named: busOptions.adapter)
        let timeout = Duration.milliseconds(Int64(seconds * 1000))
        var device = client.device(address, adapter: adapter)
        if device == nil {
            let scan = try await client.scan(adapter, filter: DiscoveryFilter(pattern: address.uppercased()))
            device = try? await client.waitForDevice(address, adapter: adapter, timeout: timeout)
            try? await scan.stop()
        }
        guard let device else { throw CLIError("device \(address) not found on \(adapter.name)") }
        do {
            try await client.connect(device, timeout: timeout)
            let c = try client.characteristic(uuid, on: device)
            switch operation {
            case .read:
                emit(Hex.encode(try await client.read(c)))
            case .write:
                try await client.write(try Hex.decode(value ?? ""), to: c, type: command ? .command : .request)
                emit("ok")
            case .notify:
                let values = try await client.notifications(c)
                let stop = Task {
                    try? await Task.sleep(for: timeout)
                    try? await client.stopNotifications(c)
                }
                for await v in values { emit(Hex.encode(v)) }
                stop.cancel()
            }
        } catch let e as BlueZError {
            throw CLIError("\(address) \(uuid): \(e)")
        }
    }
}
