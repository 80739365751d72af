@testable import BridgeCore
import TestSupport
import Testing

/// Several adapters in one bridge: which adapter a device is connected through.
struct AdapterSetTests {
    static let a1 = "C0:FF:EE:00:00:01"
    static let a2 = "C0:FF:EE:00:00:02"

    /// One adapter of a host: its own view of the devices (the same addresses), its own scan.
    struct Radio {
        let name: String
        let devices: [String: FakeDevice]
        let central: FakeAdapterCentral

        init(_ name: String, rssi: [String: Int], present: Bool = true) {
            self.name = name
            devices = [AdapterSetTests.a1: FakeDevice(), AdapterSetTests.a2: FakeDevice()]
            for d in devices.values { d.setPresent(present) }
            central = FakeAdapterCentral(FakeCentral(devices), advertisements: rssi.sorted { $0.key < $1.key }.map {
                Advertisement(address: $0.key, rssi: $0.value)
            })
        }

        var connects: Int { devices.values.map { $0.state.withLock { $0.connects } }.reduce(0, +) }
    }

    func set(_ radios: [Radio], max: Int = 7, pins: [String: String] = [:], clock: BridgeClock = .continuous) -> AdapterSet {
        AdapterSet(radios.map { AdapterSet.Member(name: $0.name, central: $0.central, maxConnections: max) }, pins: pins, clock: clock)
    }

    /// Runs the merged scan until every radio's advertisements are in.
    func scanAll(_ adapters: AdapterSet, count: Int) async throws -> [Advertisement] {
        let scan = try await adapters.scan()
        var seen: [Advertisement] = []
        for await ad in scan.advertisements {
            seen.append(ad)
            if seen.count == count { break }
        }
        await scan.stop()
        return seen
    }

    @Test func theAdapterThatSawTheDeviceStrongestConnectsIt() async throws {
        let hci0 = Radio("hci0", rssi: [Self.a1: -80])
        let hci1 = Radio("hci1", rssi: [Self.a1: -50])
        let adapters = set([hci0, hci1])
        let ads = try await scanAll(adapters, count: 2)
        // The merged scan reports the best RSSI over the adapters once both are in.
        #expect(ads.contains { $0.rssi == -50 }, "\(ads)")
        _ = try await adapters.connect(address: Self.a1, notify: [], timeout: .seconds(20))
        #expect(hci1.connects == 1 && hci0.connects == 0)
        #expect(adapters.adapter(of: Self.a1) == "hci1")
        #expect(adapters.linkCounts == ["hci0": 0, "hci1": 1])
    }

    @Test func aPinnedAdapterWinsOverABetterSignal() async throws {
        let hci0 = Radio("hci0", rssi: [Self.a1: -80])
        let hci1 = Radio("hci1", rssi: [Self.a1: -50])
        let adapters = set([hci0, hci1], pins: [Self.a1.lowercased(): "hci0"])
        _ = try await scanAll(adapters, count: 2)
        _ = try await adapters.connect(address: Self.a1, notify: [], timeout: .seconds(20))
        #expect(hci0.connects == 1 && hci1.connects == 0)
    }

    @Test func anAdapterThatCannotReachTheDeviceIsPassedOverAndGoesLast() async throws {
        // hci1 saw it best but is off now (its connects fail): hci0 takes the device.
        let hci0 = Radio("hci0", rssi: [Self.a1: -80])
        let hci1 = Radio("hci1", rssi: [Self.a1: -50])
        let adapters = set([hci0, hci1])
        _ = try await scanAll(adapters, count: 2)
        for d in hci1.devices.values { d.setPresent(false) }
        let link = try await adapters.connect(address: Self.a1, notify: [], timeout: .seconds(20))
        #expect(hci0.connects == 1)
        #expect(adapters.adapter(of: Self.a1) == "hci0")
        // The link drops: it stops counting against hci0; the failed hci1 is tried last now.
        hci0.devices[Self.a1]!.dropLink()
        await link.deliverNotifications { _ in }
        #expect(adapters.linkCounts == ["hci0": 0, "hci1": 0])
        #expect(adapters.order(for: Self.a1, at: .now).map(\.name) == ["hci0", "hci1"])
    }

    /// Sightings and failures are stamped with the injected clock: the failed adapter goes last
    /// for ``AdapterSet/failurePenalty`` of that clock, then its better signal counts again.
    @Test func theFailurePenaltyEndsOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let hci0 = Radio("hci0", rssi: [Self.a1: -80])
        let hci1 = Radio("hci1", rssi: [Self.a1: -50])
        let adapters = set([hci0, hci1], clock: clock.bridgeClock)
        _ = try await scanAll(adapters, count: 2)
        for d in hci1.devices.values { d.setPresent(false) }
        _ = try await adapters.connect(address: Self.a1, notify: [], timeout: .seconds(20))
        #expect(adapters.adapter(of: Self.a1) == "hci0")
        #expect(adapters.order(for: Self.a1, at: clock.bridgeNow).map(\.name) == ["hci0", "hci1"])
        clock.advance(by: AdapterSet.failurePenalty)
        #expect(adapters.order(for: Self.a1, at: clock.bridgeNow).map(\.name) == ["hci1", "hci0"])
    }

    @Test func anAdapterAtItsLinkLimitIsSkipped() async throws {
        let hci0 = Radio("hci0", rssi: [Self.a1: -40, Self.a2: -40])
        let hci1 = Radio("hci1", rssi: [Self.a1: -70, Self.a2: -70])
        let adapters = set([hci0, hci1], max: 1)
        _ = try await scanAll(adapters, count: 4)
        let first = try await adapters.connect(address: Self.a1, notify: [], timeout: .seconds(20))
        _ = try await adapters.connect(address: Self.a2, notify: [], timeout: .seconds(20))
        #expect(adapters.adapter(of: Self.a1) == "hci0")
        #expect(adapters.adapter(of: Self.a2) == "hci1", "hci0 holds its one link")
        // Closing the first link frees hci0.
        await first.disconnect()
        #expect(adapters.linkCounts == ["hci0": 0, "hci1": 1])
    }

    @Test func withoutSightingsTheLeastLoadedAdapterInConfigOrderConnects() async throws {
        let hci0 = Radio("hci0", rssi: [:])
        let hci1 = Radio("hci1", rssi: [:])
        let adapters = set([hci0, hci1])
        _ = try await adapters.connect(address: Self.a1, notify: [], timeout: .seconds(20))
        _ = try await adapters.connect(address: Self.a2, notify: [], timeout: .seconds(20))
        #expect(adapters.adapter(of: Self.a1) == "hci0")
        #expect(adapters.adapter(of: Self.a2) == "hci1")
    }
}
