import BlueZ
import BridgeRuntime
import DBus
import Reactor
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
        #expect(check.problem(.timeout("GetManagedObjects")) == .other("timeout: GetManagedObjects"))
    }

    /// One adapter is the list of one; the single-adapter initialiser looks for that one.
    @Test func adaptersInOrder() {
        #expect(check.adapters == ["hci0"] && check.adapter == "hci0")
        let several = BluetoothSelfCheck(busAddress: nil, adapters: ["hci1", "hci0"], loop: Self.loop)
        #expect(several.adapters == ["hci1", "hci0"] && several.adapter == "hci1")
    }

    @Test func everyProblemIsOneLineWithAFix() {
        let problems: [BluetoothProblem] = [
            .busUnreachable(bus: "system bus", reason: "refused"), .bluezAbsent(bus: "system bus"),
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
