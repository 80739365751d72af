import BinaryCoding
import BridgeConfig
import Foundation
import TestSupport
import Testing
@testable import BridgeCore

/// The bridge wakes only for work (issue 24 §4): its one timer sleeps until the earliest
/// deadline a session posted, not at a fixed tick. Time is the manual clock's, and nothing here
/// ticks a session by hand: whatever fires, the bridge's own timer fired.
@Suite struct IdleWakeTests {
    typealias Harness = BridgeTests.Harness

    /// A connected device with nothing due: 50 s of fake time pass without one sleep begun on
    /// the bridge's clock (a fixed tick would begin one per step); the availability silence,
    /// its one deadline, still fires.
    @Test func idleBridgeRegistersNoWakeUp() async throws {
        let clock = ManualClock()
        let h = try Harness(clock: clock)
        try await h.running {
            let avail = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            #expect(avail.map(\.text) == [#"{"state":"online"}"#])
            let t0 = clock.now
            await h.session.settled()
            // The timer waits for the silence (availability_timeout 120 s after the link came up).
            #expect(await clock.sleeper(until: t0 + .seconds(120) + .nanoseconds(1)), "the timer sleeps until the silence")
            let before = clock.sleeps.elements.count
            for _ in 0..<50 {
                clock.advance(by: .seconds(1))
                await h.session.settled()
            }
            // Past the silence: the device goes offline, by the timer alone.
            clock.advance(by: .seconds(71))
            let offline = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability", count: 2)
            #expect(offline.map(\.text).last == #"{"state":"offline"}"#)
            let during = clock.sleeps.elements[before...].filter { $0 < t0 + .seconds(120) }
            #expect(during.isEmpty, "sleeps begun while idle: \(during.map { ($0 - t0).description })")
        }
    }

    /// A command's answer timeout fires at its deadline: the timer, armed for the far silence,
    /// is re-armed for the earlier deadline the command brought, and fires not a moment late.
    @Test func commandTimeoutFiresAtItsDeadline() async throws {
        let clock = ManualClock()
        let h = try Harness(timeout: .milliseconds(100), clock: clock)
        h.device.setAnswering(false)
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            clock.advance(by: .milliseconds(3))  // off any tick's grid
            let sent = clock.now
            h.set(#"{"command":"ping","value":5}"#)
            #expect(await h.device.writeLog.wait(timeout: .seconds(20)) { !$0.isEmpty } != nil)
            #expect(await clock.sleeper(until: sent + .milliseconds(100)), "the timer re-armed for the answer timeout")
            clock.advance(by: .milliseconds(99))
            await h.session.settled()
            #expect(h.mqtt.messages("gatt2mqtt/dev/response").isEmpty, "no timeout 1 ms before the limit")
            clock.advance(by: .milliseconds(1))
            let r = try await h.responses(1)
            #expect(r[0]["status"] == "error" && r[0]["error"]?["code"] == "timeout")
        }
    }

    /// A waiting command's deadline (the device away) fires at its instant, by the timer.
    @Test func queuedCommandExpiresAtItsDeadline() async throws {
        let clock = ManualClock()
        let h = try Harness(deadline: .milliseconds(250), present: false, clock: clock)
        try await h.running {
            clock.advance(by: .milliseconds(7))
            let queued = clock.now
            h.set(#"{"command":"ping","value":1}"#)
            _ = try await h.responses(1)
            #expect(await clock.sleeper(until: queued + .milliseconds(250)))
            clock.advance(by: .milliseconds(249))
            await h.session.settled()
            #expect(h.mqtt.messages("gatt2mqtt/dev/response").count == 1, "still queued 1 ms before its deadline")
            clock.advance(by: .milliseconds(1))
            let r = try await h.responses(2)
            #expect(r.map { $0["status"] } == ["queued", "expired"])
        }
    }

    /// A passive device: its held state goes out when `min_interval` has passed since the last
    /// publish, and it goes offline after its silence, both by the bridge's timer at their
    /// instants, with no tick between.
    @Test func passiveDeadlinesFireByTheTimer() async throws {
        let h = try PassiveDeviceTests.Harness(minInterval: .seconds(45))  // not the health's 60 s
        let clock = try #require(h.clock)
        try await h.running {
            try await h.advertise(PassiveDeviceTests.ad([1, 100]))
            _ = try await h.states(1)
            let published = clock.now
            try await h.advertise(PassiveDeviceTests.ad([2, 110]))
            await h.session.settled()
            #expect(await clock.sleeper(until: published + .seconds(45)), "the timer sleeps until the held state is due")
            clock.advance(by: .seconds(44))
            await h.session.settled()
            #expect(h.mqtt.messages("gatt2mqtt/porch").count == 1, "held 1 s before min_interval")
            clock.advance(by: .seconds(1))
            let states = try await h.states(2)
            #expect(states[1]["temperature"]?.doubleValue == 11)
            // Then nothing until the silence (the passive availability timeout after the last advertisement).
            clock.advance(by: DeviceConfig.passiveAvailabilityTimeout)
            let offline = try await h.mqtt.wait(for: "gatt2mqtt/porch/availability") { $0.last?.text.contains("offline") == true }
            #expect(!offline.isEmpty)
        }
    }

    /// The schedule itself: a wait ends when an earlier deadline is posted, and one posted
    /// between reading the earliest and waiting is not missed.
    @Test func earlierDeadlineEndsTheWait() async throws {
        let clock = ManualClock()
        let wake = WakeSchedule()
        let key = ObjectIdentifier(wake)
        let far = clock.bridgeNow + .seconds(3600)
        wake.set(key, far)
        let done = WaitableLog<Int>()
        let waiter = Task {
            await wake.wait(until: wake.earliest, clock: clock.bridgeClock)
            done.append(1)
        }
        #expect(await clock.sleeper(until: far.continuous))
        wake.set(key, far + .seconds(1))  // later: keeps waiting
        wake.set(key, clock.bridgeNow + .seconds(5))  // earlier: ends it
        #expect(await done.wait(timeout: .seconds(30)) { !$0.isEmpty } != nil, "the earlier deadline ended the wait")
        #expect(clock.sleeping == 0, "its sleep was cancelled")
        // Posted after the earliest was read: the wait returns at once.
        let stale = wake.earliest
        wake.set(key, clock.bridgeNow + .seconds(1))
        await wake.wait(until: stale, clock: clock.bridgeClock)
        #expect(wake.takeDue(at: clock.bridgeNow).isEmpty)
        #expect(wake.takeDue(at: clock.bridgeNow + .seconds(1)) == [key])
        #expect(wake.earliest == nil, "taken out once due")
        waiter.cancel()
    }
}
