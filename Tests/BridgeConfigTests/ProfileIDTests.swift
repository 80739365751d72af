import BinaryCoding
import Testing
@testable import BridgeConfig

/// A device's `profile`: its form always, and, given the registered profiles, one of them and
/// that profile's own checks.
@Suite struct ProfileIDTests {
    /// Registered profiles as the configuration sees them; `needsCharacteristics` stands for a
    /// profile's own check (the layout profile's).
    struct Rules: ProfileRules {
        var id: ProfileID
        var needsCharacteristics = false
        func validate(_ device: DeviceConfig, path: String) throws(ConfigError) {
            if needsCharacteristics, device.characteristics.isEmpty {
                throw ConfigError(path: path, line: nil, message: "a \(id) device needs characteristics")
            }
        }
    }

    static let registered: [any ProfileRules] = [Rules(id: "gopro"), Rules(id: "rokid"), Rules(id: "layoutish", needsCharacteristics: true)]

    func error(_ yaml: String, profiles: [any ProfileRules]? = registered) -> ConfigError? {
        do { _ = try Configuration(yaml: yaml, profiles: profiles); return nil } catch { return error }
    }

    @Test func theFormIsCheckedWithoutProfiles() {
        #expect(ProfileID(rawValue: "gopro") == .gopro && ProfileID(rawValue: "heart_rate2") != nil)
        for bad in ["", "GoPro", "2cam", "go pro", "go-pro", "_x"] { #expect(ProfileID(rawValue: bad) == nil, "\(bad)") }
        #expect(error("devices:\n  - {id: a, address: C0:FF:EE:00:00:01, profile: toaster}", profiles: nil) == nil)
        #expect(error("devices:\n  - {id: a, address: C0:FF:EE:00:00:01, profile: Toaster}", profiles: nil)
            == ConfigError(path: "devices[0].profile", line: 2,
                           message: "'Toaster' is not a profile name (a lowercase letter, then lowercase letters, digits and _)"))
    }

    @Test func aProfileMustBeRegistered() {
        #expect(error("devices:\n  - {id: a, address: C0:FF:EE:00:00:01, profile: toaster}")
            == ConfigError(path: "devices[0].profile", line: 2, message: "'toaster' is not one of gopro, rokid, layoutish"))
        #expect(error("devices:\n  - {id: a, address: C0:FF:EE:00:00:01}")
            == ConfigError(path: "devices[0].profile", line: 2, message: "required (gopro, rokid or layoutish)"))
        #expect(error("devices:\n  - {id: a, address: C0:FF:EE:00:00:01, profile: rokid}") == nil)
    }

    @Test func aProfilesOwnChecksRunWithTheLineOfTheDevice() throws {
        #expect(error("devices:\n  - {id: a, address: C0:FF:EE:00:00:01, profile: layoutish}")
            == ConfigError(path: "devices[0]", line: 2, message: "a layoutish device needs characteristics"))
        let json = try JSONValue(parsing: Array(#"{"id":"a","address":"C0:FF:EE:00:00:01","profile":"layoutish"}"#.utf8))
        #expect(throws: ConfigError(path: "device", line: nil, message: "a layoutish device needs characteristics")) {
            try DeviceConfig(json: json, profiles: Self.registered)
        }
    }
}
