import DBus
import Reactor

extension PrivateBus {
    /// A new bus, started off the cooperative pool. `PrivateBus()` blocks while dbus-daemon
    /// starts. The suite runs ~200 suites at once on a pool of two threads (2 cores), and about a
    /// hundred tests start a bus: each blocking start held a pool thread, and every other test in
    /// the process waited behind them. That was the 12–16 s stall at the start of a CI run, and
    /// longer on a slow day, when waits of 30 s expired.
    public static func started() async throws -> PrivateBus {
        try await offThePool { try PrivateBus() }
    }

    /// A client connection to this bus on `loop` (10 s to connect); the caller closes it.
    public func connect(loop: EventLoop) async throws -> DBusConnection {
        try await DBusConnection.connect(.address(address), timeout: .seconds(10), loop: loop)
    }
}
