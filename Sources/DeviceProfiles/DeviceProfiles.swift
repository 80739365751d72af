import BridgeConfig
import BridgeCore
import BridgeStore
import Logging

/// The registered device profiles: the one list a profile is added to (docs/adding-a-device.md).
/// Its order is the order a scan tries them in (`ProfileCatalog.guess`) and lists them in.
public enum DeviceProfiles {
    public static let all: [any DeviceProfile] = [
        GoProProfile(),
        RokidProfile(),
        // Before the layout profile: a passive sensor's service data (ATC's 0x181A) is a format's,
        // not the Environmental Sensing template's.
        AdvertisementProfile(),
        LayoutProfile(),
    ]

    /// The registered profiles for a bridge; `context` what their drivers take from it.
    public static func catalog(context: DriverContext = DriverContext()) -> ProfileCatalog { ProfileCatalog(all, context: context) }
}

extension Bridge {
    /// A bridge over the registered profiles whose devices' drivers all come from `drivers`
    /// (tests: a scripted driver for every device; discovery, guesses and checks stay the profiles').
    public convenience init(configuration: Configuration, store: BridgeStore, mqtt: any MQTTPort, central: any BLECentral,
                            drivers: @escaping DriverFactory, version: String = "0.1.0", logger: Logger = Logger(label: "gatt2mqtt.bridge"),
                            tick: Duration = BridgeDefaults.tick, healthInterval: Duration = BridgeDefaults.healthInterval,
                            connectAttempt: Duration = Bridge.defaultConnectAttempt, sleep: Sleep = .task, clock: BridgeClock? = nil,
                            control: BridgeControl = BridgeControl(), batchCommits: Bool = false, loop: SessionLoop? = nil) throws {
        try self.init(configuration: configuration, store: store, mqtt: mqtt, central: central,
                      profiles: DeviceProfiles.catalog().replacingDrivers(drivers), version: version, logger: logger, tick: tick,
                      healthInterval: healthInterval, connectAttempt: connectAttempt, sleep: sleep, clock: clock, control: control,
                      batchCommits: batchCommits, loop: loop)
    }
}
