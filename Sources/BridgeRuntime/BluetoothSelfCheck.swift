import BlueZ
import BridgeCore
import DBus
import Foundation
import Logging
import Reactor

/// Why the Bluetooth side is not ready at start (`shared/spec/bridge.md` point 8: bus reachable,
/// `org.bluez` present, adapter powered), each with one line that says how to fix it.
public enum BluetoothProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The D-Bus bus could not be opened (`bus`: where we looked).
    case busUnreachable(bus: String, reason: String)
    /// A call of the check (connect, `Hello`, `GetManagedObjects`) got no answer in its time, or
    /// was cancelled before it did: the bus was reached (or is being reached) and is slow, not
    /// unreachable (`reason`: which call, and how long it waited).
    case noAnswer(bus: String, reason: String)
    /// The bus answers but nobody owns `org.bluez`.
    case bluezAbsent(bus: String)
    /// The bus policy refuses this user access to `org.bluez`.
    case accessDenied(bus: String, reason: String)
    /// BlueZ has no adapter of that name (`available`: the ones it has).
    case adapterMissing(name: String, available: [String])
    /// The adapter exists and is powered off (or rfkill-blocked).
    case adapterOff(name: String)
    /// Of several adapters (`bluetooth.adapters`), none is there and powered: `missing` are not
    /// there, `off` are powered off; `available`: the adapters BlueZ has.
    case noAdapterReady(missing: [String], off: [String], available: [String])
    /// Anything else BlueZ answered.
    case other(String)

    /// One line: what is wrong, then the concrete fix.
    public var description: String {
        switch self {
        case let .busUnreachable(bus, reason):
            return "D-Bus \(bus) unreachable (\(reason)): is dbus running? in a container mount /run/dbus from the host and set DBUS_SYSTEM_BUS_ADDRESS=unix:path=/run/dbus/system_bus_socket"
        case let .noAnswer(bus, reason):
            return "the \(bus) did not answer within the check's time limit (\(reason)): is the machine overloaded, "
                + "or dbus-daemon or bluetoothd stuck? (`busctl status org.bluez` answers at once when they are well)"
        case let .bluezAbsent(bus):
            return "org.bluez not on the \(bus): is bluetoothd running? (systemctl start bluetooth) in a container mount /run/dbus/system_bus_socket from the host"
        case let .accessDenied(bus, reason):
            return "the \(bus) refuses access to org.bluez (\(reason)): run as root or in the bluetooth group (in a container: group_add the host's bluetooth gid)"
        case let .adapterMissing(name, available):
            let found = available.isEmpty ? "none found" : "found: " + available.joined(separator: ", ")
            return "no Bluetooth adapter \(name) (\(found)): set bluetooth.adapter, or check `bluetoothctl list` and `rfkill list`"
        case let .adapterOff(name):
            return "Bluetooth adapter \(name) is powered off: `bluetoothctl power on` (and `rfkill unblock bluetooth` if it is blocked)"
        case let .noAdapterReady(missing, off, available):
            var what: [String] = []
            if !missing.isEmpty { what.append("missing: " + missing.joined(separator: ", ")) }
            if !off.isEmpty { what.append("powered off: " + off.joined(separator: ", ")) }
            what.append(available.isEmpty ? "none found" : "found: " + available.joined(separator: ", "))
            return "none of the Bluetooth adapters is ready (\(what.joined(separator: "; "))): set bluetooth.adapters, "
                + "or check `bluetoothctl list`, `bluetoothctl power on` and `rfkill list`"
        case let .other(message):
            return "BlueZ is not usable: \(message)"
        }
    }
}

/// What the self-check found with several adapters (``BluetoothSelfCheck/checkAdapters()``):
/// the client, and the configured adapters by state, each in configuration order.
public struct BluetoothAdapters: Sendable {
    /// The connected client (on the self-check's loop); the caller closes it.
    public let client: BlueZClient
    /// There and powered: at least one.
    public let ready: [String]
    /// Not there.
    public let missing: [String]
    /// There and powered off.
    public let off: [String]
    /// Every adapter BlueZ has.
    public let available: [String]
}

/// The start-up self-check of `gatt2mqtt run` (`shared/spec/bridge.md` point 8): connect to the
/// bus, find `org.bluez`, find the adapter and check it is powered — with several adapters
/// (`bluetooth.adapters`), at least one of them. While something is missing it
/// logs the problem's fix line once (again only when the problem changes) and retries with a
/// capped backoff instead of exiting, so a service manager does not crash-loop the bridge.
public struct BluetoothSelfCheck: Sendable {
    /// Where BlueZ is looked for (`bluetooth.bus_address`, else the system bus).
    public let bus: DBusBus
    /// The adapters looked for (`bluetooth.adapters`), at least one.
    public let adapters: [String]
    /// The adapter that must exist and be powered (`bluetooth.adapter`): the first.
    public var adapter: String { adapters[0] }
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
        self.init(busAddress: busAddress, adapters: [adapter], retryMin: retryMin, retryMax: retryMax, loop: loop)
    }

    /// - Parameters:
    ///   - busAddress: `bluetooth.bus_address`; nil is the system bus (`DBUS_SYSTEM_BUS_ADDRESS`).
    ///   - adapters: `bluetooth.adapters`, at least one.
    public init(busAddress: String?, adapters: [String], retryMin: Duration = .seconds(1), retryMax: Duration = .seconds(30),
                loop: EventLoop) {
        precondition(!adapters.isEmpty, "the self-check needs an adapter to look for")
        self.loop = loop
        bus = busAddress.map { .address($0) } ?? .system
        self.adapters = adapters
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
        case let .timeout(what): return .noAnswer(bus: busName, reason: what)
        case .bus(.cancelled): return .noAnswer(bus: busName, reason: "the call was cancelled before it was answered")
        case let .bus(.timeout(method, ms)): return .noAnswer(bus: busName, reason: "\(method) got no reply in \(ms) ms")
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
    /// closed then). With several adapters, this is the first one.
    public func check() async -> Result<(BlueZClient, BlueZAdapter), BluetoothProblem> {
        await checkAdapters([adapter]).map { ($0.client, BlueZAdapter(name: adapter)) }
    }

    /// One attempt for every adapter: the client and which adapters are ready, missing or off,
    /// when at least one is ready; else the problem (the client is closed then).
    public func checkAdapters() async -> Result<BluetoothAdapters, BluetoothProblem> {
        await checkAdapters(adapters)
    }

    /// ``checkAdapters()`` for `names`; with one name the problems are `adapterMissing` and
    /// `adapterOff`, with several `noAdapterReady`.
    func checkAdapters(_ names: [String]) async -> Result<BluetoothAdapters, BluetoothProblem> {
        let client: BlueZClient
        do { client = try await BlueZClient.connect(bus, callTimeout: .seconds(10), loop: loop) } catch {
            return .failure(problem(error))
        }
        let present = Dictionary(client.adapters.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        let missing = names.filter { present[$0] == nil }
        let off = names.filter { present[$0].map { !client.isPowered($0) } ?? false }
        let ready = names.filter { !missing.contains($0) && !off.contains($0) }
        let available = client.adapters.map(\.name)
        guard !ready.isEmpty else {
            client.close()
            if names.count == 1 {
                return .failure(missing.isEmpty ? .adapterOff(name: names[0]) : .adapterMissing(name: names[0], available: available))
            }
            return .failure(.noAdapterReady(missing: missing, off: off, available: available))
        }
        return .success(BluetoothAdapters(client: client, ready: ready, missing: missing, off: off, available: available))
    }

    /// Retries ``check()`` until it succeeds (returns the client and adapter) or the task is
    /// cancelled (returns nil). Each new problem is logged once at `error` with its fix line.
    public func waitUntilReady(logger: Logger) async -> (BlueZClient, BlueZAdapter)? {
        await retrying(logger: logger) { await check() }
    }

    /// Retries ``checkAdapters()`` until at least one adapter is ready (returns what it found)
    /// or the task is cancelled (returns nil), logging as ``waitUntilReady(logger:)`` does.
    public func waitUntilAdaptersReady(logger: Logger) async -> BluetoothAdapters? {
        await retrying(logger: logger) { await checkAdapters() }
    }

    func retrying<Ready>(logger: Logger, _ attempt: () async -> Result<Ready, BluetoothProblem>) async -> Ready? {
        var backoff = Backoff(min: retryMin, max: retryMax)
        var last: BluetoothProblem?
        while !Task.isCancelled {
            switch await attempt() {
            case let .success(ready):
                if last != nil { logger.notice("Bluetooth ready", metadata: ["adapter": "\(adapters.joined(separator: ","))"]) }
                return ready
            case let .failure(p):
                // Cancelled (shutting down): whatever the last call says, the bus is not the
                // problem; nothing to report, nothing to retry.
                if Task.isCancelled { return nil }
                if p != last {
                    logger.error("\(p.description) (retrying)")
                    last = p
                } else {
                    logger.debug("Bluetooth still not ready", metadata: ["problem": "\(p)"])
                }
            }
            try? await loop.sleep(for: backoff.next(jitter: 1))  // no jitter: one bridge, one bus
        }
        return nil
    }
}

extension BluetoothSelfCheck {
    /// One check now, for `bridge/request/health_check` (a client of its own, closed after):
    /// the bus, `org.bluez`, and every configured adapter there and powered — any adapter that
    /// is not is a problem, even when others are ready.
    public func health() async -> BluetoothHealth {
        switch await checkAdapters(adapters) {
        case let .success(found):
            found.client.close()
            var states: [String: String] = [:]
            for name in found.ready { states[name] = "ok" }
            for name in found.missing { states[name] = "missing" }
            for name in found.off { states[name] = "powered_off" }
            var problems = found.missing.map { BluetoothProblem.adapterMissing(name: $0, available: found.available).description }
            problems += found.off.map { BluetoothProblem.adapterOff(name: $0).description }
            return BluetoothHealth(bus: true, bluez: true, adapters: states, problems: problems)
        case let .failure(problem):
            var states = Dictionary(adapters.map { ($0, "unknown") }, uniquingKeysWith: { a, _ in a })
            var bus = true, bluez = true
            switch problem {
            case .busUnreachable, .noAnswer: (bus, bluez) = (false, false)
            case .bluezAbsent, .accessDenied, .other: bluez = false
            case let .adapterMissing(name, _): states[name] = "missing"
            case let .adapterOff(name): states[name] = "powered_off"
            case let .noAdapterReady(missing, off, _):
                for name in missing { states[name] = "missing" }
                for name in off { states[name] = "powered_off" }
            }
            return BluetoothHealth(bus: bus, bluez: bluez, adapters: states, problems: [problem.description])
        }
    }
}
