import BinaryCoding
import BridgeConfig
import BridgeCore
import Testing
@testable import DeviceProfiles

/// The Rokid profile's registration: the glasses are guessed from their service, and the bridge
/// builds their driver.
@Suite struct RokidProfileTests {
    @Test func glassesAreKnownByTheirServiceAndGetTheRokidDriver() throws {
        let catalog = DeviceProfiles.catalog()
        let ad = Advertisement(address: "C0:FF:EE:00:00:02", serviceUUIDs: ["00009100-0000-1000-8000-00805f9b34fb"])
        #expect(catalog.guess(ad) == ProfileGuess(name: "rokid", profile: .rokid, characteristics: []))
        var glasses = DeviceConfig(id: "glasses", profile: .rokid)
        glasses.address = "C0:FF:EE:00:00:02"
        #expect(try catalog.makeDriver(for: glasses) is RokidDriver)
        #expect(catalog.named("rokid")?.profile == .rokid)
    }
}
