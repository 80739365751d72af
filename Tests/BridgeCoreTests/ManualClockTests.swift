import TestSupport
import Testing

@Suite struct ManualClockTests {
    @Test func sleepersWakeWhenTheClockReachesTheirInstant() async throws {
        let clock = ManualClock()
        let t0 = clock.now
        let woke = WaitableLog<Int>()
        let task = Task {
            for i in 1...3 {
                try await clock.sleep(for: .milliseconds(10))
                woke.append(i)
            }
        }
        #expect(await clock.sleeper(until: t0 + .milliseconds(10)))
        clock.advance(by: .milliseconds(9))
        #expect(clock.sleeping == 1 && woke.elements.isEmpty)
        clock.advance(by: .milliseconds(1))
        #expect(await woke.wait(timeout: .seconds(20)) { $0 == [1] } != nil)
        #expect(await clock.sleeper(until: t0 + .milliseconds(20)))
        clock.advance(by: .milliseconds(100))
        #expect(await woke.wait(timeout: .seconds(20)) { $0 == [1, 2] } != nil)
        #expect(await clock.sleeper(until: t0 + .milliseconds(120)), "a sleep begun after the advance counts from the new now")
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    /// As a standard `Clock` (what the device simulators take): `sleep(for:)` through the
    /// existential ends at the advance that reaches it; a sleep until a passed instant ends at once.
    @Test func asAClockItSleepsUntilAnAdvanceReachesTheInstant() async throws {
        let manual = ManualClock()
        let clock: any Clock<Duration> = manual
        let t0 = manual.now
        let woke = WaitableLog<Int>()
        let task = Task {
            try await clock.sleep(for: .seconds(2))
            woke.append(1)
        }
        #expect(await manual.sleeper(until: t0 + .seconds(2)))
        manual.advance(by: .seconds(1))
        #expect(manual.sleeping == 1 && woke.elements.isEmpty)
        manual.advance(by: .seconds(1))
        #expect(await woke.wait(timeout: .seconds(20)) { $0 == [1] } != nil)
        try await task.value
        try await manual.sleep(until: t0 + .seconds(1))  // passed: no wait, no sleeper
        #expect(manual.sleeping == 0 && manual.sleeps.elements == [t0 + .seconds(2)])
        #expect(manual.minimumResolution == .zero)
    }
}
