import BlueZ
@testable import BridgeRuntime
import DBus
import Logging
import Reactor
import Synchronization
import Testing

/// The start-up self-check's classification of BlueZ failures and its fix lines
/// (shared/spec/bridge.md point 8). The end-to-end side (a real bus without BlueZ, an adapter
/// powered off, …) is in CLITests/StartupSelfCheckTests.
@Suite struct BluetoothSelfCheckTests {
    /// The loop a check's client would run on (these tests classify failures, never connect).
    static let loop = EventLoop(name: "t-selfcheck")
    let check = BluetoothSelfCheck(busAddress: "unix:path=/run/x", adapter: "hci0", loop: Self.loop)

    @Test func failuresMapToProblems() {
        #expect(check.problem(.unavailable("org.bluez was not provided")) == .bluezAbsent(bus: "bus unix:path=/run/x"))
        let refused = check.problem(.failed(name: DBusErrorName.accessDenied, message: "Rejected send message"))
        #expect(refused == .accessDenied(bus: "bus unix:path=/run/x", reason: "Rejected send message"))
        #expect(check.problem(.bus(.remote(name: DBusErrorName.accessDenied, message: "no"))) == .accessDenied(bus: "bus unix:path=/run/x", reason: "no"))
        guard case .busUnreachable(_, let reason) = check.problem(.bus(.connectionFailed(name: "org.freedesktop.DBus.Error.FileNotFound", message: "No such file"))) else {
            Issue.record("expected busUnreachable")
            return
        }
        #expect(reason.contains("No such file"))
    }

    /// A call that got no answer in its time, or was cancelled before it did, is a bus that did
    /// not answer, not an unreachable one (the browser test once read "unreachable (D-Bus call
    /// cancelled)" for a bus the emulator had just opened).
    @Test func aCallWithoutAnAnswerIsNotAnUnreachableBus() {
        let late: [(BlueZError, String)] = [
            (.timeout("GetManagedObjects got no reply in 10000 ms"), "GetManagedObjects got no reply in 10000 ms"),
            (.bus(.timeout(method: "connect", milliseconds: 10000)), "connect got no reply in 10000 ms"),
            (.bus(.cancelled), "cancelled"),
        ]
        for (error, reason) in late {
            let p = check.problem(error)
            guard case .noAnswer(bus: "bus unix:path=/run/x", reason: let r) = p else {
                Issue.record("\(error): \(p)")
                continue
            }
            #expect(r.contains(reason))
            #expect(p.description.hasPrefix("the bus unix:path=/run/x did not answer within the check's time limit ("), "\(p)")
            #expect(!p.description.contains("unreachable"), "\(p)")
        }
    }

    /// A check cancelled while a call is under way (the bridge stops) returns nil and logs
    /// nothing: no "unreachable (D-Bus call cancelled) (retrying)".
    @Test func aCancelledCheckReportsNoProblem() async {
        let lines = Lines(), attempts = Lines()
        let logger = Logger(label: "t-selfcheck") { _ in Recorder(lines: lines) }
        let check = self.check
        let found: Bool? = await Task {
            await check.retrying(logger: logger) { () async -> Result<Bool, BluetoothProblem> in
                attempts.items.withLock { $0.append("attempt") }
                withUnsafeCurrentTask { $0?.cancel() }  // the shutdown arrives during the call…
                return .failure(check.problem(.bus(.cancelled)))  // …which ends so
            }
        }.value
        #expect(found == nil)
        #expect(attempts.items.withLock { $0.count } == 1)
        #expect(lines.items.withLock { $0 }.isEmpty, "\(lines.items.withLock { $0 })")
    }

    final class Lines: Sendable {
        let items = Mutex<[String]>([])
    }

    /// Records every line logged (any level).
    struct Recorder: LogHandler {
        let lines: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { lines.items.withLock { $0.append("\(event.message)") } }
    }

    /// One adapter is the list of one; the single-adapter initialiser looks for that one.
    @Test func adaptersInOrder() {
        #expect(check.adapters == ["hci0"] && check.adapter == "hci0")
        let several = BluetoothSelfCheck(busAddress: nil, adapters: ["hci1", "hci0"], loop: Self.loop)
        #expect(several.adapters == ["hci1", "hci0"] && several.adapter == "hci1")
    }

    @Test func everyProblemIsOneLineWithAFix() {
        let problems: [BluetoothProblem] = [
            .busUnreachable(bus: "system bus", reason: "refused"), .noAnswer(bus: "system bus", reason: "Hello got no reply in 10000 ms"),
            .bluezAbsent(bus: "system bus"),
            .accessDenied(bus: "system bus", reason: "denied"), .adapterMissing(name: "hci1", available: ["hci0"]),
            .adapterMissing(name: "hci0", available: []), .adapterOff(name: "hci0"),
            .noAdapterReady(missing: ["hci1"], off: ["hci0"], available: ["hci0"]), .noAdapterReady(missing: ["hci0", "hci1"], off: [], available: []),
        ]
        for p in problems {
            #expect(!p.description.contains("\n"))
            #expect(p.description.contains(": "), "what, then the fix: \(p)")
        }
        #expect(BluetoothProblem.adapterMissing(name: "hci0", available: []).description.contains("none found"))
        #expect(BluetoothProblem.adapterOff(name: "hci0").description.contains("bluetoothctl power on"))
        #expect(BluetoothProblem.noAdapterReady(missing: ["hci1", "hci2"], off: ["hci0"], available: ["hci0"]).description
            == "none of the Bluetooth adapters is ready (missing: hci1, hci2; powered off: hci0; found: hci0): set bluetooth.adapters, "
            + "or check `bluetoothctl list`, `bluetoothctl power on` and `rfkill list`")
        #expect(BluetoothProblem.noAdapterReady(missing: ["hci0", "hci1"], off: [], available: []).description.contains("(missing: hci0, hci1; none found)"))
        #expect(BluetoothProblem.bluezAbsent(bus: "system bus").description
            == "org.bluez not on the system bus: is bluetoothd running? (systemctl start bluetooth) in a container mount /run/dbus/system_bus_socket from the host")
    }
}
