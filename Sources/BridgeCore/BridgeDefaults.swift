/// The core's fixed numbers, in one place.
public enum BridgeDefaults {
    /// The ATT MTU before any exchange (Core spec Vol 3 Part F §3.2.8): what a command is
    /// encoded for when no link tells a larger one (validation while the device is away,
    /// requests built before connecting).
    public static let attMTU = 23
    /// How long one connect attempt (scan included) may hold the adapter's connect gate.
    public static let connectAttempt: Duration = .seconds(10)
    /// How often the cluster extension is ticked (reports, claims, its stall watch), with
    /// `cluster.enabled` only: the device sessions have no tick, the bridge's timer wakes them
    /// at their deadlines (``WakeSchedule``).
    public static let tick: Duration = .milliseconds(50)
    /// How often `bridge/health` is published.
    public static let healthInterval: Duration = .seconds(60)
    /// How far a sighting's RSSI must move (dBm) from the published one before the state follows.
    public static let rssiStep = 5
    /// How many commands a node holds per device while no node owns it (docs/scale-out.md).
    public static let heldCommands = 100
}
