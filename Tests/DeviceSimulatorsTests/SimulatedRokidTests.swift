import BlueZSimulator
import CapsCodec
import Synchronization
import Testing
@testable import DeviceSimulators

/// Periodic `Dev_BatteryChanged` notifies of the simulated glasses (rokid-caps.md §6), without a bus.
@Suite struct SimulatedRokidTests {
    final class Phone: Sendable {
        let glasses: SimulatedRokid
        let bytes = Mutex<[UInt8]>([])
        init(_ glasses: SimulatedRokid) {
            self.glasses = glasses
            glasses.linkChanged(SimulatedLink { [weak self] _, value in
                self?.bytes.withLock { $0 += value }
                return true
            })
        }
        /// The packets notified so far, decoded from the Caps stream.
        func packets() throws -> [CXRPacket] {
            var reader = CapsStreamReader()
            return try reader.feed(bytes.withLock { $0 }).map { try CXRPacket(caps: $0) }
        }
        func batteries() throws -> [CXRPacket] { try packets().filter { $0.subCommand == "Dev_BatteryChanged" } }
    }

    @Test func batteryIsNotifiedPeriodicallyOnlyAfterAuthentication() async throws {
        let phone = Phone(SimulatedRokid(batteryInterval: .milliseconds(40)))
        try await Task.sleep(for: .milliseconds(200))
        #expect(try phone.batteries().isEmpty)  // not authenticated: the glasses stay silent
        let auth = try CXRPacket.authRequest(CXRAuthRequest(serviceRecord: "sim-record", clientTime: 0)).encoded()
        try phone.glasses.handleWrite(auth, to: "00009201-0000-1000-8000-00805f9b34fb", withResponse: true)
        var deadline = ContinuousClock.now + .seconds(3)
        while try phone.batteries().count < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let levels = try phone.batteries().map { $0.payload.intValue }
        #expect(Array(levels.prefix(3)) == [89, 88, 87])
        // Link gone: nothing more is sent (and a new link must authenticate again).
        phone.glasses.linkChanged(nil)
        let again = Phone(phone.glasses)
        deadline = ContinuousClock.now + .milliseconds(200)
        while ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(try again.batteries().isEmpty)
    }
}
