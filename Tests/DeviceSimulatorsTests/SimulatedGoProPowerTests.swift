import BlueZSimulator
import GoProCodec
import Synchronization
import TestSupport
import Testing
@testable import DeviceSimulators

/// Keep-alive, sleep and battery drain (gopro.md §2, §9) with short intervals; the emulator's
/// link drop is replaced by taking the link away as the emulator does (`linkChanged(nil)`).
@Suite(.serialized) struct SimulatedGoProPowerTests {
    static let keepAlive: [UInt8] = [0x5B, 0x01, 0x42]

    func harness(sleepAfter: Duration? = nil, drain: Duration? = nil) -> GoProHarness {
        let camera = SimulatedGoPro(sleepAfter: sleepAfter, batteryDrainEvery: drain)
        let h = GoProHarness(camera)
        camera.state.withLock { s in
            s.dropLink = { [weak camera] in camera?.linkChanged(nil) }
        }
        return h
    }

    @Test func keepAliveKeepsTheCameraAwakeAndSilenceLetsItSleep() async throws {
        let h = harness(sleepAfter: .milliseconds(600))
        // Keep-alive every 100 ms for 1.5 s: still awake.
        for _ in 0..<15 {
            try h.write(Self.keepAlive, to: .settings)
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(h.camera.sleepCount == 0)
        #expect(try h.take(on: .settingsResponse).allSatisfy { $0 == [0x5B, 0x00] })
        // Silence: it sleeps once and drops the link (no further sleeps without a link).
        #expect(await eventually { h.camera.sleepCount == 1 })
        #expect(h.camera.state.withLock { $0.link == nil })
        try await Task.sleep(for: .milliseconds(700))
        #expect(h.camera.sleepCount == 1)
        // Connecting wakes it: a new link gets the full idle time again.
        let again = GoProHarness(h.camera)
        try again.write([0x13, 70], to: .query)
        #expect(try again.take(on: .queryResponse) == [[0x13, 0x00, 70, 0x01, 84]])
        #expect(h.camera.sleepCount == 1)
    }

    @Test func noSleepWhileEncoding() async throws {
        let h = harness(sleepAfter: .milliseconds(100))
        try h.write([0x01, 0x01, 0x01], to: .command)  // shutter on
        try await Task.sleep(for: .milliseconds(400))
        #expect(h.camera.sleepCount == 0)
        try h.write([0x01, 0x01, 0x00], to: .command)  // shutter off: the idle timer runs again
        #expect(await eventually { h.camera.sleepCount == 1 })
    }

    @Test func batteryDrainsWhileEncodingAndIsPushed() async throws {
        let h = harness(drain: .milliseconds(50))
        try h.write([0x53, 70], to: .query)
        #expect(try h.take(on: .queryResponse) == [[0x53, 0x00, 70, 0x01, 84]])
        try await Task.sleep(for: .milliseconds(200))
        #expect(try h.take(on: .queryResponse).isEmpty)  // idle: no drain
        try h.write([0x01, 0x01, 0x01], to: .command)
        var pushes: [[UInt8]] = []
        #expect(await eventually {
            pushes += (try? h.take(on: .queryResponse)) ?? []
            return pushes.filter { $0.prefix(3) == [0x93, 0x00, 70] }.count >= 2
        })
        let levels = pushes.filter { $0.prefix(3) == [0x93, 0x00, 70] }.map { $0[4] }
        #expect(Array(levels.prefix(2)) == [83, 82])  // 1 % per step
        try h.write([0x01, 0x01, 0x00], to: .command)
        _ = try h.take(on: .queryResponse)
        try h.write([0x13, 70], to: .query)
        let level = try #require(try h.take(on: .queryResponse).first?[4])
        try await Task.sleep(for: .milliseconds(250))
        try h.write([0x13, 70], to: .query)
        #expect(try h.take(on: .queryResponse).first?[4] == level)  // stopped with the recording
    }
}
