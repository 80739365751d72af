import ArgumentParser
import BinaryCoding
import BlueZ
import BridgeConfig
import DBus
import Foundation
import Reactor

/// Options shared by the Bluetooth commands: which bus and adapter.
struct BusOptions: ParsableArguments {
    @Option(help: "D-Bus address of the bus BlueZ is on (default: the system bus, DBUS_SYSTEM_BUS_ADDRESS).")
    var bus: String?

    @Option(help: "Bluetooth adapter (default: the first one).")
    var adapter: String?

    /// Runs `body` with a BlueZ client on an event loop of its own (its D-Bus connection,
    /// tasks and sockets), then closes the client and shuts the loop down.
    func withClient<R>(_ body: (BlueZClient) async throws -> R) async throws -> R {
        let loop = EventLoop(name: "gatt2mqtt")
        defer { loop.shutdown() }  // after the client is closed
        let client: BlueZClient
        do {
            client = try await BlueZClient.connect(bus.map { .address($0) } ?? .system, callTimeout: .seconds(30), loop: loop)
        } catch {
            throw CLIError("cannot reach BlueZ on \(bus ?? "the system bus"): \(error)")
        }
        defer { client.close() }
        return try await body(client)
    }
}

/// `gatt2mqtt scan`: discovers LE devices and prints one JSON line per device the first time it
/// is seen (docs/bluez.md).
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Scan for Bluetooth LE devices; one JSON line per device seen."
    )

    @OptionGroup var busOptions: BusOptions

    @Option(help: "How long to scan, in seconds.")
    var seconds: Double = 5

    @Option(name: .customLong("uuid"), help: "Only devices advertising this service UUID (repeatable).")
    var uuids: [String] = []

    @Option(help: "Only devices whose address or name starts with this.")
    var pattern: String?

    @Flag(help: "One JSON object per line (address, name, rssi, uuids, manufacturer and service data).")
    var json = false

    /// `--seconds`, checked: more than 0, up to an hour.
    var duration: Duration { get throws(CLIError) { try CLIError.seconds("seconds", seconds, in: .milliseconds(1) ... .seconds(3600)) } }

    func validate() throws {
        _ = try duration
        for u in uuids where BluetoothUUID(u) == nil { throw CLIError("--uuid \(u): not a 16/32/128-bit UUID or GP-XXXX") }
    }

    func run() async throws {
        try await busOptions.withClient { client in
            let adapter = try client.adapter(named: busOptions.adapter)
            let scan = try await client.scan(adapter, filter: DiscoveryFilter(uuids: uuids, pattern: pattern))
            let duration = try duration
            let timer = Task {
                try? await Task.sleep(for: duration)
                try? await scan.stop()
            }
            var seen: Set<String> = []
            for await d in scan.devices where seen.insert(d.address).inserted {
                if json {
                    emit(Self.json(d).jsonText)
                } else {
                    let rssi = d.rssi.map { "\($0) dBm" } ?? "-"
                    emit("\(d.address)  \(rssi)  \(d.name ?? "(no name)")  \(d.uuids.joined(separator: ","))")
                }
            }
            timer.cancel()
            try await scan.stop()
        }
    }

    static func json(_ d: DiscoveredDevice) -> JSONValue {
        var o: JSONObject = ["address": .string(d.address)]
        o.merge(["name": d.name.map(JSONValue.string) ?? .null, "rssi": d.rssi.map { .int(Int64($0)) } ?? .null,
                 "uuids": .array(d.uuids.map(JSONValue.string))])
        o.merge(["manufacturer_data": .object(JSONObject(d.manufacturerData.sorted { $0.key < $1.key }.map {
            (key: String($0.key), value: JSONValue.string(Hex.encode($0.value))) }))])
        o.merge(["service_data": .object(JSONObject(d.serviceData.sorted { $0.key < $1.key }.map {
            (key: $0.key, value: JSONValue.string(Hex.encode($0.value))) }))])
        o.merge(["connected": .bool(d.connected), "paired": .bool(d.paired)])
        return .object(o)
    }
}
