import BlueZ
import BlueZPort
import DBus
import Testing

/// The power cycle for a half-open link (bluetoothd's `Input/output error` on Connect) happens
/// only after `threshold` such failures in a row for one device, and at most once a minute.
@Suite struct HalfOpenRecoveryTests {
    @Test func onlyTheHalfOpenErrorCounts() {
        #expect(HalfOpenRecovery.isHalfOpen(.failed(name: "org.bluez.Error.Failed", message: "Input/output error")))
        // As the client reports it, with the call's context.
        #expect(HalfOpenRecovery.isHalfOpen(.failed(name: "org.bluez.Error.Failed",
                                                    message: "Input/output error (Connect on /org/bluez/hci0/dev_C0_FF_EE_00_00_03)")))
        #expect(!HalfOpenRecovery.isHalfOpen(.failed(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local")))
        #expect(!HalfOpenRecovery.isHalfOpen(.timeout("ServicesResolved")))
        #expect(!HalfOpenRecovery.isHalfOpen(.inProgress("Operation already in progress")))
    }

    @Test func cyclesAfterTheThresholdAndNotTwiceInAMinute() {
        var r = HalfOpenRecovery(minimumInterval: .seconds(60))
        let t0 = ContinuousClock.now
        let c1 = r.failed("A", at: t0); #expect(!c1)
        let c2 = r.failed("A", at: t0 + .seconds(1)); #expect(c2)          // second in a row: cycle
        let c3 = r.failed("A", at: t0 + .seconds(2)); #expect(!c3)         // counting anew
        let c4 = r.failed("A", at: t0 + .seconds(3)); #expect(!c4)         // threshold again, but within a minute
        let c5 = r.failed("A", at: t0 + .seconds(62)); #expect(c5)         // a minute later: allowed
        r.succeeded("B")
        let c6 = r.failed("B", at: t0 + .seconds(200)); #expect(!c6)       // a success resets B's count
        r.succeeded("B")
        let c7 = r.failed("B", at: t0 + .seconds(201)); #expect(!c7)
    }
}
