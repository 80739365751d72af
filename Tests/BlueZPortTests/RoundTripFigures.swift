import BlueZ
import BlueZPort
import BlueZSimulator
import BridgeCore
import DBus
import DeviceSimulators
import Foundation
import GoProCodec
import Reactor
import Synchronization
import TestSupport
import Testing

/// Measures (prints, asserts nothing about time) the D-Bus round trip client → dbus-daemon →
/// emulator → back for a GoPro keep-alive `WriteValue`, and the time until the camera's answer
/// arrives through the AcquireNotify socket, with the client and the emulator each on an event
/// loop (docs/benchmarks.md "D-Bus round trip"). Run alone:
/// `swift test --skip-build --no-parallel --filter RoundTripFigures`.
@Suite(.serialized, .timeLimit(.minutes(2))) struct RoundTripFigures {
    struct Figures: CustomStringConvertible {
        var call: [Double]
        var answer: [Double]
        /// This process' CPU time (user + system; client and emulator) per round trip, µs.
        var cpu = 0.0
        var voluntarySwitches = 0.0
        static func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
        static func p90(_ xs: [Double]) -> Double { xs.sorted()[xs.count * 9 / 10] }
        var description: String {
            String(format: "WriteValue round trip p50 %.1f µs p90 %.1f µs; write → answer on the socket p50 %.1f µs p90 %.1f µs; CPU %.1f µs and %.1f context switches per round trip",
                   Self.median(call), Self.p90(call), Self.median(answer), Self.p90(answer), cpu, voluntarySwitches)
        }
    }

    /// A client and the emulator (own connections, same private bus), each on its own loop.
    static func measure(count: Int) async throws -> Figures {
        let simLoop = EventLoop(name: "rt-sim")
        let clientLoop = EventLoop(name: "rt-client")
        defer {
            simLoop.shutdown()
            clientLoop.shutdown()
        }
        let bus = try await PrivateBus.started()
        defer { bus.stop() }
        let sc = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: simLoop)
        let sim = BlueZSimulator(connection: sc, options: Emulator.fast)
        try await sim.start()
        let camera = SimulatedGoPro(address: "C0:FF:EE:00:01:41", encrypted: false, executor: simLoop)
        try camera.add(to: sim)
        let client = try await BlueZClient.connect(.address(bus.address), callTimeout: .seconds(5), loop: clientLoop)
        defer {
            client.close()
            sim.stop()
            sc.close()
        }
        let central = BlueZCentral(client: client, adapter: try client.adapter())
        let response = CharacteristicID(GoProCharacteristic.settingsResponse.uuid)
        let settings = CharacteristicID(GoProCharacteristic.settings.uuid)
        let link = try await central.connect(address: camera.address, notify: [response], timeout: .seconds(5))
        let (answers, feed) = AsyncStream<[UInt8]>.makeStream()
        let delivering = Task { await link.deliverNotifications { n in feed.yield(n.value) } }
        defer { delivering.cancel() }
        let keepAlive: [UInt8] = [0x03, 0x5B, 0x01, 0x42]
        return try await withTaskExecutorPreference(clientLoop) {
            var figures = Figures(call: [], answer: [])
            var iterator = answers.makeAsyncIterator()
            var before = rusage()
            for i in 0..<(count + 200) {
                if i == 200 { getrusage(RUSAGE_SELF.rawValue, &before) }
                let t0 = ContinuousClock.now
                try await link.write(keepAlive, to: settings, withResponse: true)
                let t1 = ContinuousClock.now
                let answer = await iterator.next()
                let t2 = ContinuousClock.now
                #expect(answer == [0x02, 0x5B, 0x00])
                guard i >= 200 else { continue }  // warm-up
                figures.call.append(Double((t1 - t0).components.attoseconds) / 1e12)
                figures.answer.append(Double((t2 - t0).components.attoseconds) / 1e12)
            }
            var after = rusage()
            getrusage(RUSAGE_SELF.rawValue, &after)
            func us(_ t: timeval) -> Double { Double(t.tv_sec) * 1e6 + Double(t.tv_usec) }
            let cpu = us(after.ru_utime) + us(after.ru_stime) - us(before.ru_utime) - us(before.ru_stime)
            figures.cpu = cpu / Double(count)
            figures.voluntarySwitches = Double(after.ru_nvcsw + after.ru_nivcsw - before.ru_nvcsw - before.ru_nivcsw) / Double(count)
            await link.disconnect()
            return figures
        }
    }

    @Test func roundTripOnLoops() async throws {
        let count = 1000
        for _ in 0..<2 {
            let r = try await Self.measure(count: count)
            #expect(r.call.count == count && r.answer.count == count)
            print("ROUNDTRIP loops: \(r)")
        }
    }
}
