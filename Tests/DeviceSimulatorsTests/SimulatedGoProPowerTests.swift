import BlueZSimulator
import GoProCodec
import Synchronization
import TestSupport
import Testing
@testable import DeviceSimulators

/// Keep-alive, sleep and battery drain (gopro.md §2, §9) on a manual clock: the camera's timer
/// task ticks when the test advances the clock, never because real time passed. The emulator's
/// link drop is replaced by taking the link away as the emulator does (`linkChanged(nil)`).
@Suite struct SimulatedGoProPowerTests {
    static let keepAlive: [UInt8] = [0x5B, 0x01, 0x42]

    /// A camera on `clock` whose timer task is asleep, waiting for its first tick.
    struct Power {
        let h: GoProHarness
        let clock: ManualClock
        let tick: Duration

        init(sleepAfter: Duration? = nil, drain: Duration? = nil) async throws {
            clock = ManualClock()
            let camera = SimulatedGoPro(sleepAfter: sleepAfter, batteryDrainEvery: drain, clock: clock)
            h = GoProHarness(camera)
            camera.state.withLock { s in
                s.dropLink = { [weak camera] in camera?.linkChanged(nil) }
            }
            tick = try #require(camera.tickInterval)
            try #require(await clock.sleeper(until: clock.now + tick))
        }

        var camera: SimulatedGoPro { h.camera }

        /// Moves the clock by `count` ticks, one at a time, each time until the timer task has
        /// run its tick and sleeps again (so what it did is visible when this returns).
        func advance(ticks count: Int) async throws {
            for _ in 0..<count {
                clock.advance(by: tick)
                try #require(await clock.sleeper(until: clock.now + tick))
            }
        }
    }

    @Test func keepAliveKeepsTheCameraAwakeAndSilenceLetsItSleep() async throws {
        let p = try await Power(sleepAfter: .milliseconds(800))
        #expect(p.tick == .milliseconds(100))
        // Keep-alive every 100 ms for 1.5 s: still awake.
        for _ in 0..<15 {
            try p.h.write(Self.keepAlive, to: .settings)
            try await p.advance(ticks: 1)
        }
        #expect(p.camera.sleepCount == 0)
        #expect(try p.h.take(on: .settingsResponse).allSatisfy { $0 == [0x5B, 0x00] })
        // Silence: 800 ms after the last keep-alive (100 ms ago) it sleeps once and drops the link.
        try await p.advance(ticks: 6)
        #expect(p.camera.sleepCount == 0)
        try await p.advance(ticks: 1)
        #expect(p.camera.sleepCount == 1)
        #expect(p.camera.state.withLock { $0.link == nil })
        // No further sleeps without a link.
        try await p.advance(ticks: 20)
        #expect(p.camera.sleepCount == 1)
        // Connecting wakes it: a new link gets the full idle time again.
        let again = GoProHarness(p.camera)
        try again.write([0x13, 70], to: .query)
        #expect(try again.take(on: .queryResponse) == [[0x13, 0x00, 70, 0x01, 84]])
        try await p.advance(ticks: 7)
        #expect(p.camera.sleepCount == 1)
        try await p.advance(ticks: 1)
        #expect(p.camera.sleepCount == 2)
    }

    @Test func noSleepWhileEncoding() async throws {
        let p = try await Power(sleepAfter: .milliseconds(80))
        #expect(p.tick == .milliseconds(10))
        try p.h.write([0x01, 0x01, 0x01], to: .command)  // shutter on
        try await p.advance(ticks: 40)  // 400 ms, five times the idle time
        #expect(p.camera.sleepCount == 0)
        try p.h.write([0x01, 0x01, 0x00], to: .command)  // shutter off: the idle timer runs again
        try await p.advance(ticks: 7)
        #expect(p.camera.sleepCount == 0)
        try await p.advance(ticks: 1)
        #expect(p.camera.sleepCount == 1)
    }

    @Test func batteryDrainsWhileEncodingAndIsPushed() async throws {
        let p = try await Power(drain: .milliseconds(80))
        #expect(p.tick == .milliseconds(10))
        try p.h.write([0x53, 70], to: .query)
        #expect(try p.h.take(on: .queryResponse) == [[0x53, 0x00, 70, 0x01, 84]])
        try await p.advance(ticks: 20)
        #expect(try p.h.take(on: .queryResponse).isEmpty)  // idle: no drain
        try p.h.write([0x01, 0x01, 0x01], to: .command)
        func batteryPushes() throws -> [UInt8] {
            try p.h.take(on: .queryResponse).filter { $0.prefix(3) == [0x93, 0x00, 70] }.map { $0[4] }
        }
        try await p.advance(ticks: 7)
        #expect(try batteryPushes().isEmpty)
        try await p.advance(ticks: 1)
        #expect(try batteryPushes() == [83])  // 1 % per 80 ms of recording
        try await p.advance(ticks: 8)
        #expect(try batteryPushes() == [82])
        try p.h.write([0x01, 0x01, 0x00], to: .command)
        _ = try p.h.take(on: .queryResponse)
        try await p.advance(ticks: 25)
        #expect(try batteryPushes().isEmpty)  // stopped with the recording
        try p.h.write([0x13, 70], to: .query)
        #expect(try p.h.take(on: .queryResponse).first?[4] == 82)
    }
}
