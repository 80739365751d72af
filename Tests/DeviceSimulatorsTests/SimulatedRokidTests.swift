import BlueZSimulator
import CapsCodec
import Synchronization
import TestSupport
import Testing
@testable import DeviceSimulators

/// The simulated glasses without a bus: the service-record check of AUTH_REQ (rokid-caps.md
/// §4.1, §5.2) and periodic `Dev_BatteryChanged` notifies (§6).
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
        /// Writes `packet` to 0x9201 as a phone does.
        func write(_ packet: CXRPacket) throws {
            try glasses.handleWrite(try packet.encoded(), to: "00009201-0000-1000-8000-00805f9b34fb", withResponse: true)
        }
        func authenticate(_ record: String) throws { try write(.authRequest(CXRAuthRequest(serviceRecord: record, clientTime: 0))) }
        func authResponses() throws -> [Int32] {
            try packets().compactMap { if case let .authResponse(a) = $0 { a.retCode } else { nil } }
        }
        func responses() throws -> [UInt32] {
            try packets().compactMap { if case let .response(id, _) = $0 { id } else { nil } }
        }
        func requestBrightness(_ id: UInt32) throws {
            try write(.request(requestID: id, channel: "Dev", args: CXRPacket.args("Dev_GlassBrightness", .uint32(3))))
        }
    }

    /// 0x9301 holds `SSSuu`: a random UUID record (one per device), the MAC, "", 1, 1 (§4.1).
    @Test func connectionInfoPublishesARandomRecord() throws {
        let glasses = SimulatedRokid(address: "c0:ff:ee:00:00:09")
        let value = try #require(glasses.services.first?.characteristics.first { $0.uuid.hasPrefix("00009301") }?.value)
        let info = try CXRConnectionInfo(decoding: value)
        #expect(info == CXRConnectionInfo(serviceRecord: glasses.serviceRecord, mac: "C0:FF:EE:00:00:09", account: "", glassesType: 1, extra: 1))
        #expect(try Caps(decoding: value).members.map(\.type.code).joined() == "SSSuu")
        let uuid = glasses.serviceRecord.split(separator: "-").map(\.count)
        #expect(uuid == [8, 4, 4, 4, 12] && glasses.serviceRecord == glasses.serviceRecord.lowercased())
        #expect(SimulatedRokid().serviceRecord != glasses.serviceRecord)
        #expect(try glasses.handleRead(SimUUID.full("9301"), current: value) == value)
    }

    /// The record from 0x9301 → AUTH_RESP 0, and REQUESTs are answered.
    @Test func theRightRecordAuthenticates() throws {
        let phone = Phone(SimulatedRokid())
        try phone.requestBrightness(1)
        #expect(try phone.responses().isEmpty)  // not authenticated yet: ignored
        try phone.authenticate(phone.glasses.serviceRecord)
        #expect(try phone.authResponses() == [0] && phone.glasses.isAuthenticated)
        try phone.requestBrightness(2)
        #expect(try phone.responses() == [2])
    }

    /// Another record → AUTH_RESP −4 (default) and REQUESTs stay ignored until a good AUTH_REQ.
    @Test func aWrongRecordIsRefusedWithMinus4() throws {
        let phone = Phone(SimulatedRokid())
        try phone.authenticate("gatt2mqtt-glasses")
        #expect(try phone.authResponses() == [-4] && !phone.glasses.isAuthenticated)
        try phone.requestBrightness(1)
        #expect(try phone.responses().isEmpty)
        try phone.authenticate(phone.glasses.serviceRecord)
        try phone.requestBrightness(2)
        #expect(try phone.authResponses() == [-4, 0] && phone.responses() == [2])
        // A later wrong AUTH_REQ leaves the link unauthenticated again.
        try phone.authenticate("other")
        try phone.requestBrightness(3)
        #expect(try phone.authResponses() == [-4, 0, -4] && phone.responses() == [2])
    }

    /// Silent mode: no AUTH_RESP for a wrong record, REQUESTs ignored; `ok` mode takes any
    /// record; `taken` refuses every one.
    @Test func silentAndLenientModes() throws {
        let phone = Phone(SimulatedRokid(auth: .silent))
        try phone.authenticate("wrong")
        try phone.requestBrightness(1)
        #expect(try phone.packets().isEmpty && !phone.glasses.isAuthenticated)
        try phone.authenticate(phone.glasses.serviceRecord)
        #expect(try phone.authResponses() == [0])
        let lenient = Phone(SimulatedRokid(auth: .ok))
        try lenient.authenticate("anything")
        try lenient.requestBrightness(4)
        #expect(try lenient.authResponses() == [0] && lenient.responses() == [4])
        lenient.glasses.authMode = .refuse
        try lenient.authenticate("anything")
        #expect(try lenient.authResponses() == [0, -4])
        // `taken`: −6 even for the right record.
        let taken = Phone(SimulatedRokid(auth: .taken))
        try taken.authenticate(taken.glasses.serviceRecord)
        try taken.requestBrightness(5)
        #expect(try taken.authResponses() == [-6] && taken.responses().isEmpty)
    }

    @Test func batteryIsNotifiedPeriodicallyOnlyAfterAuthentication() async throws {
        let clock = ManualClock()
        let every = Duration.milliseconds(40)
        let phone = Phone(SimulatedRokid(batteryInterval: every, clock: clock))
        /// Moves the clock by `count` intervals, one at a time, each time until the battery task
        /// has run and sleeps again.
        func advance(intervals count: Int) async throws {
            for _ in 0..<count {
                clock.advance(by: every)
                try #require(await clock.sleeper(until: clock.now + every))
            }
        }
        try #require(await clock.sleeper(until: clock.now + every))
        try await advance(intervals: 5)
        #expect(try phone.batteries().isEmpty)  // not authenticated: the glasses stay silent
        try phone.authenticate(phone.glasses.serviceRecord)
        try await advance(intervals: 3)
        #expect(try phone.batteries().map { $0.payload.intValue } == [89, 88, 87])
        // Link gone: nothing more is sent (and a new link must authenticate again).
        phone.glasses.linkChanged(nil)
        let again = Phone(phone.glasses)
        try await advance(intervals: 5)
        #expect(try again.batteries().isEmpty)
        #expect(try phone.batteries().count == 3)
    }
}
