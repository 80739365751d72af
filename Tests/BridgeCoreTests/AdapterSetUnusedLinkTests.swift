import Synchronization
import TestSupport
import Testing
@testable import BridgeCore

/// ``AdapterSet``'s unused links: a link an adapter holds (as BlueZ shows it) that none of the
/// set's links uses, as a killed bridge leaves behind (docs/bluez.md, "The real stack"). An
/// adapter through which the set has its own link to the device is not asked.
@Suite struct AdapterSetUnusedLinkTests {
    /// One adapter over a ``FakeCentral``: `connected` is what its BlueZ shows connected (a link
    /// of this process' or a kept one); closing removes it and is logged.
    final class Adapter: BLECentral, BLEAdapterControl {
        let inner: FakeCentral
        let connected = Mutex<Set<String>>([])
        let closed = CallLog()

        init(_ inner: FakeCentral) { self.inner = inner }

        func connect(address: String, notify: [CharacteristicID], timeout: Duration) async throws(BLEError) -> any BLELink {
            let link = try await inner.connect(address: address, notify: notify, timeout: timeout)
            connected.withLock { _ = $0.insert(address) }
            return link
        }

        func scan() async throws(BLEError) -> BLEScan { throw BLEError(.notSupported, "no scan") }
        func pair(address: String, timeout: Duration) async throws(BLEError) {}
        func forget(address: String) async throws(BLEError) {}
        func holdsUnusedLink(to address: String) -> Bool { connected.withLock { $0.contains(address) } }
        func closeUnusedLink(to address: String) async throws(BLEError) {
            closed.add(address)
            connected.withLock { _ = $0.remove(address) }
        }
    }

    static let address = "C0:FF:EE:00:00:01"

    static func set() -> (AdapterSet, Adapter, Adapter) {
        let central = FakeCentral([address: FakeDevice()])
        let (hci0, hci1) = (Adapter(central), Adapter(central))
        let set = AdapterSet([.init(name: "hci0", central: hci0, maxConnections: 5), .init(name: "hci1", central: hci1, maxConnections: 5)])
        return (set, hci0, hci1)
    }

    @Test func aKeptLinkIsFoundAndClosedOnItsAdapterOnly() async throws {
        let (set, hci0, hci1) = Self.set()
        #expect(!set.holdsUnusedLink(to: Self.address))
        hci1.connected.withLock { _ = $0.insert(Self.address) }
        #expect(set.holdsUnusedLink(to: Self.address))
        try await set.closeUnusedLink(to: Self.address)
        #expect(hci1.closed.calls == [Self.address] && hci0.closed.calls.isEmpty)
        #expect(!set.holdsUnusedLink(to: Self.address))
    }

    @Test func theSetsOwnLinkIsNotUnused() async throws {
        let (set, hci0, hci1) = Self.set()
        let link = try await set.connect(address: Self.address, notify: [], timeout: .seconds(20))
        #expect(hci0.holdsUnusedLink(to: Self.address), "connected through hci0 (the first adapter, all else equal)")
        #expect(!set.holdsUnusedLink(to: Self.address))
        try await set.closeUnusedLink(to: Self.address)
        #expect(hci0.closed.calls.isEmpty && hci1.closed.calls.isEmpty)
        await link.disconnect()
        #expect(set.holdsUnusedLink(to: Self.address), "hci0 still shows it connected once the set's link is gone: kept")
    }
}
