import BinaryCoding
import BridgeConfig
import BridgeCore

/// The `rokid` profile: Rokid glasses over Caps (docs/caps.md). Its driver is ``RokidDriver``
/// (the handshake takes the bridge's wall clock); a scan knows the glasses by their service
/// (0x9100); Home Assistant gets battery, brightness, volume and the custom view
/// (RokidProfile+HomeAssistant.swift).
public struct RokidProfile: DeviceProfile {
    public let id: ProfileID = .rokid

    public init() {}

    public func makeDriver(for device: DeviceConfig, context: DriverContext) throws -> any DeviceDriver { RokidDriver(now: context.now) }

    public func matches(_ ad: Advertisement) -> ProfileGuess? {
        ProfileGuess.services(ad).contains("9100") ? ProfileGuess(name: id.rawValue, profile: id, characteristics: []) : nil
    }

    public func homeAssistantModel(for device: DeviceConfig, hardware: JSONObject) -> HomeAssistantDiscovery.Model {
        .init(manufacturer: "Rokid", model: "Rokid glasses")
    }
}
