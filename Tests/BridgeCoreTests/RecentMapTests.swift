@testable import BridgeCore
import Testing
import TestSupport

/// The scan's maps keyed by advertising address stay bounded when addresses are random.
struct RecentMapTests {
    static func randomAddress(_ rng: inout some RandomNumberGenerator) -> String {
        (0..<6).map { _ in String(UInt8.random(in: 0...255, using: &rng), radix: 16, uppercase: true) }.joined(separator: ":")
    }

    @Test func tenThousandRandomAddressesKeepTheLastThousand() {
        var rng = SystemRandomNumberGenerator()
        var map = RecentMap<String, Int>(capacity: 1000)
        var written: [String] = []
        for i in 0..<10_000 {
            let a = Self.randomAddress(&rng)
            map[a] = i
            written.append(a)
            #expect(map.count <= 1000)
            #expect(map.orderCount <= 2000)
        }
        #expect(map.count == 1000 || Set(written).count < 10_000)
        #expect(map[written.last!] == 9999, "the newest is kept")
        let newest = Set(written.suffix(1000))
        #expect(Set(map.keys) == newest, "exactly the last thousand written")
    }

    @Test func rewritingAKeyMakesItNewestAndDoesNotGrow() {
        var map = RecentMap<String, Int>(capacity: 3)
        map["a"] = 1; map["b"] = 2; map["c"] = 3
        map["a"] = 4  // a is now the newest: b goes first
        map["d"] = 5
        #expect(map["b"] == nil && map["a"] == 4 && map["c"] == 3 && map["d"] == 5)
        for i in 0..<10_000 { map["c"] = i }
        #expect(map.count == 3 && map.orderCount <= 6)
        map["a"] = nil
        #expect(map.count == 2 && map["a"] == nil)
    }

    @Test func theScanStateAndTheAdapterSightingsAreBounded() {
        var rng = SystemRandomNumberGenerator()
        var scan = ScanState()
        for _ in 0..<10_000 {
            let a = Self.randomAddress(&rng)
            scan.seen[a] = Advertisement(address: a, rssi: -50)
            scan.published[a] = (.now, .null)
        }
        #expect(scan.seen.count <= ScanState.capacity && scan.published.count <= ScanState.capacity)
        var state = AdapterSet.State()
        for _ in 0..<10_000 { state.sightings[Self.randomAddress(&rng)] = ["hci0": (-50, .now)] }
        #expect(state.sightings.count <= ScanState.capacity)
    }
}
