import BridgeRuntime
import Glibc
import Testing

/// `SystemdNotify.watchdogInterval`: half of `$WATCHDOG_USEC`, only when systemd asks for it.
@Suite struct SystemdWatchdogTests {
    static let socket = ["NOTIFY_SOCKET": "@systemd-notify"]

    @Test func halfTheIntervalSystemdGives() {
        #expect(SystemdNotify.watchdogInterval(Self.socket.merging(["WATCHDOG_USEC": "30000000"]) { a, _ in a }) == .seconds(15))
        #expect(SystemdNotify.watchdogInterval(Self.socket.merging(["WATCHDOG_USEC": "200000", "WATCHDOG_PID": "\(getpid())"]) { a, _ in a })
            == .milliseconds(100))
        // Bounded both ways: not a busy loop, not past the longest duration.
        #expect(SystemdNotify.watchdogInterval(Self.socket.merging(["WATCHDOG_USEC": "1"]) { a, _ in a }) == SystemdNotify.minimumWatchdogInterval)
        #expect(SystemdNotify.watchdogInterval(Self.socket.merging(["WATCHDOG_USEC": "18446744073709551615"]) { a, _ in a }) == .seconds(365 * 86_400 / 2))
    }

    @Test(arguments: [
        ["WATCHDOG_USEC": "30000000"],  // no NOTIFY_SOCKET
        ["NOTIFY_SOCKET": "@x"],  // no WATCHDOG_USEC
        ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "0"],
        ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "-5"],
        ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "5s"],
        ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "99999999999999999999999"],
        ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"],  // another process's
    ])
    func noPingsUnlessAskedFor(environment: [String: String]) {
        #expect(SystemdNotify.watchdogInterval(environment) == nil)
    }
}
