import BinaryCoding
import BridgeConfig
import Foundation
import BridgeCore
import Testing
@testable import DeviceProfiles

/// The registered profiles as the bridge uses them: by id, the scan's guesses, the names
/// `device/add` takes, the configuration's checks.
@Suite struct ProfileCatalogTests {
    let catalog = DeviceProfiles.catalog()

    static func ad(services: [String] = [], manufacturer: [UInt16: [UInt8]] = [:]) -> Advertisement {
        Advertisement(address: "C0:FF:EE:00:00:01", serviceUUIDs: services.map { "0000\($0.lowercased())-0000-1000-8000-00805f9b34fb" },
                      manufacturerData: manufacturer)
    }

    @Test func everyProfileIsRegisteredOnceAndFoundByItsID() {
        let ids = DeviceProfiles.all.map(\.id)
        #expect(Set(ids).count == ids.count)
        for id in ids { #expect(catalog[id]?.id == id) }
        #expect(catalog["toaster"] == nil)
    }

    @Test func aGoProIsKnownByItsServiceOrCompanyID() {
        #expect(catalog.guess(Self.ad(services: ["FEA6"]))?.profile == .gopro)
        #expect(catalog.guess(Self.ad(manufacturer: [GoProProfile.companyID: [1, 2]]))?.profile == .gopro)
    }

    @Test func sigDevicesAreLayoutTemplatesWithTheBatteryWhenAdvertised() throws {
        let strap = try #require(catalog.guess(Self.ad(services: ["180D", "180F"])))
        #expect(strap.name == "heart_rate" && strap.profile == .custom)
        #expect(strap.characteristics.compactMap { $0["uuid"]?.stringValue } == ["2A37", "2A19"])
        #expect(catalog.guess(Self.ad(services: ["1809"]))?.characteristics.count == 1)
        #expect(catalog.guess(Self.ad(services: ["FFF0"])) == nil)
    }

    @Test func deviceAddTakesEveryProfileAndTemplateByName() throws {
        #expect(catalog.names.starts(with: DeviceProfiles.all.map(\.id.rawValue)))
        #expect(catalog.names.contains("environmental_sensing"))
        #expect(catalog.named("custom") == ProfileGuess(name: "custom", profile: .custom, characteristics: []))
        #expect(catalog.named("battery", withBattery: true)?.characteristics.count == 1)
        #expect(catalog.named("heart_rate", withBattery: true)?.characteristics.count == 2)
        #expect(catalog.named("toaster") == nil)
    }

    /// A custom device without mappings: refused by the layout profile, with the path of the
    /// entry, when the file is read with the registered profiles (as `check-config` and `run` do).
    @Test func theLayoutProfileRefusesADeviceWithoutMappings() {
        let yaml = "devices:\n  - id: s\n    address: C0:FF:EE:00:00:03\n    profile: custom"
        #expect(throws: ConfigError(path: "devices[0]", line: 2, message: "a custom device needs characteristics")) {
            try Configuration(yaml: yaml, profiles: DeviceProfiles.all)
        }
        #expect(throws: ConfigError(path: "devices[0].profile", line: 2, message: "'toaster' is not one of \(DeviceProfiles.all.map(\.id.rawValue).joined(separator: ", "))")) {
            try Configuration(yaml: yaml.replacingOccurrences(of: "custom", with: "toaster"), profiles: DeviceProfiles.all)
        }
        var bare = DeviceConfig(id: "s", profile: .custom)
        bare.address = "C0:FF:EE:00:00:03"
        #expect(throws: ConfigError.self) { _ = try catalog.makeDriver(for: bare) }
    }
}
