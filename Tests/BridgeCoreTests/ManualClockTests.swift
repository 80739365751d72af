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
        #expect(await woke.wait(timeout: .seconds(3)) { $0 == [1] } != nil)
        #expect(await clock.sleeper(until: t0 + .milliseconds(20)))
        clock.advance(by: .milliseconds(100))
        #expect(await woke.wait(timeout: .seconds(3)) { $0 == [1, 2] } != nil)
        #expect(await clock.sleeper(until: t0 + .milliseconds(120)), "a sleep begun after the advance counts from the new now")
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }
}
