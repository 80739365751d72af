import BlueZ
import DBus
import Foundation
import Logging
import Reactor

/// Why the Bluetooth side is not ready at start (`shared/spec/bridge.md` point 8: bus reachable,
/// `org.bluez` present, adapter powered), each with one line that says how to fix it.
public enum BluetoothProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The D-Bus bus could not be opened (`bus`: where we looked).
    case busUnreachable(bus: String, reason: String)
    /// The bus answers but nobody owns `org.bluez`.
    case bluezAbsent(bus: String)
    /// The bus policy refuses this user access to `org.bluez`.
    case accessDenied(bus: String, reason: String)
    /// BlueZ has no adapter of that name (`available`: the ones it has).
    case adapterMissing(name: String, available: [String])
    /// The adapter exists and is powered off (or rfkill-blocked).
    case adapterOff(name: String)
    /// Anything else BlueZ answered.
    case other(String)

    /// One line: what is wrong, then the concrete fix.
    public var description: String {
        switch self {
        case let .busUnreachable(bus, reason):
            return "D-Bus \(bus) unreachable (\(reason)): is dbus running? in a container mount /run/dbus from the host and set DBUS_SYSTEM_BUS_ADDRESS=unix:path=/run/dbus/system_bus_socket"
        case let .bluezAbsent(bus):
            return "org.bluez not on the \(bus): is bluetoothd running? (systemctl start bluetooth) in a container mount /run/dbus/system_bus_socket from the host"
        case let .accessDenied(bus, reason):
            return "the \(bus) refuses access to org.bluez (\(reason)): run as root or in the bluetooth group (in a container: group_add the host's bluetooth gid)"
        case let .adapterMissing(name, available):
            let found = available.isEmpty ? "none found" : "found: " + available.joined(separator: ", ")
            return "no Bluetooth adapter \(name) (\(found)): set bluetooth.adapter, or check `bluetoothctl list` and `rfkill list`"
        case let .adapterOff(name):
            return "Bluetooth adapter \(name) is powered off: `bluetoothctl power on` (and `rfkill unblock bluetooth` if it is blocked)"
        case let .other(message):
            return "BlueZ is not usable: \(message)"
        }
    }
}

/// The start-up self-check of `gatt2mqtt run` (`shared/spec/bridge.md` point 8): connect to the
/// bus, find `org.bluez`, find the adapter and check it is powered. While something is missing it
/// logs the problem's fix line once (again only when the problem changes) and retries with a
/// capped backoff instead of exiting, so a service manager does not crash-loop the bridge.
public struct BluetoothSelfCheck: Sendable {
    /// Where BlueZ is looked for (`bluetooth.bus_address`, else the system bus).
    public let bus: DBusBus
    /// The adapter that must exist and be powered (`bluetooth.adapter`).
    public let adapter: String
    /// The first retry delay; it doubles after each failed check up to ``retryMax``.
    public let retryMin: Duration
    /// The longest delay between checks.
    public let retryMax: Duration
    /// The event loop the BlueZ client runs on.
    public let loop: EventLoop

    /// - Parameters:
    ///   - busAddress: `bluetooth.bus_address`; nil is the system bus (`DBUS_SYSTEM_BUS_ADDRESS`).
    ///   - adapter: `bluetooth.adapter`.
    public init(busAddress: String?, adapter: String, retryMin: Duration = .seconds(1), retryMax: Duration = .seconds(30),
                loop: EventLoop) {
        self.loop = loop
        bus = busAddress.map { .address($0) } ?? .system
        self.adapter = adapter
        self.retryMin = retryMin
        self.retryMax = retryMax
    }

    /// How the bus is named in messages.
    public var busName: String {
        switch bus {
        case let .address(a): return "bus \(a)"
        case .session: return "session bus"
        case .system:
            let env = ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"]
            return "system bus" + (env.map { " (\($0))" } ?? "")
        }
    }

    /// Classifies a failure of the BlueZ client (connect or `GetManagedObjects`).
    public func problem(_ error: BlueZError) -> BluetoothProblem {
        switch error {
        case .unavailable: return .bluezAbsent(bus: busName)
        case let .bus(e):
            if case let .remote(name, message) = e, name == DBusErrorName.accessDenied {
                return .accessDenied(bus: busName, reason: message)
            }
            return .busUnreachable(bus: busName, reason: "\(e)")
        case let .failed(name, message) where name == DBusErrorName.accessDenied:
            return .accessDenied(bus: busName, reason: message)
        default: return .other(error.description)
        }
    }

    /// One attempt: a connected client and the powered adapter, or the problem (the client is
    /// closed then).
    public func check() async -> Result<(BlueZClient, BlueZAdapter), BluetoothProblem> {
        let client: BlueZClient
        do { client = try await BlueZClient.connect(bus, callTimeout: .seconds(10), loop: loop) } catch {
            return .failure(problem(error))
        }
        guard let a = client.adapters.first(where: { $0.name == adapter }) else {
            let available = client.adapters.map(\.name)
            client.close()
            return .failure(.adapterMissing(name: adapter, available: available))
        }
        guard client.isPowered(a) else {
            client.close()
            return .failure(.adapterOff(name: adapter))
        }
        return .success((client, a))
    }

    /// Retries ``check()`` until it succeeds (returns the client and adapter) or the task is
    /// cancelled (returns nil). Each new problem is logged once at `error` with its fix line.
    public func waitUntilReady(logger: Logger) async -> (BlueZClient, BlueZAdapter)? {
        var delay = retryMin
        var last: BluetoothProblem?
        while !Task.isCancelled {
            switch await check() {
            case let .success(ready):
                if last != nil { logger.notice("Bluetooth ready", metadata: ["adapter": "\(adapter)"]) }
                return ready
            case let .failure(p):
                if p != last {
                    logger.error("\(p.description) (retrying)")
                    last = p
                } else {
                    logger.debug("Bluetooth still not ready", metadata: ["problem": "\(p)"])
                }
            }
            try? await loop.sleep(for: delay)
            delay = min(delay * 2, retryMax)
        }
        return nil
    }
}
