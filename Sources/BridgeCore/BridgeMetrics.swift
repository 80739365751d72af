import CoreMetrics
import Synchronization

/// The bridge's metrics (`shared/spec/bridge.md` point 7, docs/metrics.md), over the
/// swift-metrics API only: the runtime bootstraps a backend (Prometheus) when `metrics.listen` is
/// set; without one, swift-metrics' no-op handlers take the calls.
///
/// Handles are made once — per device when its session starts, per (device, command) at the
/// command's first answer — so counting a command costs a lookup of its name in a small
/// per-device table and an atomic add, never a label build.
public final class BridgeMetrics: Sendable {
    /// Metric names, in Prometheus style.
    public enum Name {
        public static let commands = "gatt2mqtt_commands_total"
        public static let commandErrors = "gatt2mqtt_command_errors_total"
        public static let commandDuration = "gatt2mqtt_command_duration_seconds"
        public static let linkUp = "gatt2mqtt_link_up"
        public static let reconnects = "gatt2mqtt_reconnects_total"
        public static let connectFailures = "gatt2mqtt_connect_failures_total"
        public static let connectDuration = "gatt2mqtt_connect_duration_seconds"
        public static let pairDuration = "gatt2mqtt_pair_duration_seconds"
        public static let notifications = "gatt2mqtt_notifications_total"
        public static let decodeErrors = "gatt2mqtt_decode_errors_total"
        public static let queueDepth = "gatt2mqtt_queue_depth"
        public static let mqttReconnects = "gatt2mqtt_mqtt_reconnects_total"
        public static let sqliteCommitDuration = "gatt2mqtt_sqlite_commit_duration_seconds"
    }

    /// Histogram buckets by metric name, for a backend that asks (the runtime's Prometheus
    /// factory). BLE round trips take ~10 ms–2 s; a command may wait up to its timeout (5 s by
    /// default) or its offline deadline (60 s); one connect attempt is bounded at 10 s, a pairing
    /// at 30 s; an SQLite commit to the WAL takes well under a millisecond.
    public static let histogramBuckets: [String: [Duration]] = [
        Name.commandDuration: [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                               .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(5), .seconds(10),
                               .seconds(30), .seconds(60)],
        Name.connectDuration: [.milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2),
                               .seconds(5), .seconds(10), .seconds(20), .seconds(30)],
        Name.pairDuration: [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(5), .seconds(10),
                            .seconds(20), .seconds(30)],
        Name.sqliteCommitDuration: [.microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500),
                                    .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
                                    .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250)],
    ]

    let factory: any MetricsFactory
    /// `gatt2mqtt_mqtt_reconnects_total`: the broker connection came back (counted by the runtime,
    /// which sees the MQTT client's connection events).
    public let mqttReconnects: Counter
    /// `gatt2mqtt_sqlite_commit_duration_seconds`: the store's commits on a command's or a
    /// notification's path (outbox entry stored, marked sent, removed; an answer and the new
    /// state in one `apply`).
    let sqliteCommit: CoreMetrics.Timer
    private let devices = Mutex<[String: DeviceMetrics]>([:])

    /// - Parameter factory: where the handles come from; by default the bootstrapped one (or a
    ///   task-local one bound with `withMetricsFactory`, as the tests do).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        mqttReconnects = Counter(label: Name.mqttReconnects, factory: factory)
        sqliteCommit = CoreMetrics.Timer(label: Name.sqliteCommitDuration, factory: factory)
    }

    /// The handles of one device (made at its first use, then shared).
    func device(_ id: String) -> DeviceMetrics {
        devices.withLock { d in
            if let m = d[id] { return m }
            let m = DeviceMetrics(device: id, factory: factory)
            d[id] = m
            return m
        }
    }

    /// A command ended (`ok`, `error`, `expired`): counted by command and status, its error by
    /// code, and its time since it came in over MQTT observed (commands resumed from the outbox
    /// of an earlier run have no arrival instant). Other statuses are ignored.
    func ended(_ cmd: PendingCommand, device: String, _ status: CommandStatus, error: CommandError?, at now: BridgeInstant) {
        guard status.isTerminal, !cmd.isInternal else { return }
        let d = self.device(device)
        let c = d.command(Self.label(cmd, error: error))
        switch status {
        case .ok: c.ok.increment()
        case .error: c.error.increment()
        default: c.expired.increment()
        }
        if let error { d.error(error.code) }
        if let received = cmd.received { c.duration.record(now - received) }
    }

    /// A command refused before it reached its device's session (its payload is not JSON).
    func rejected(device: String, _ error: CommandError) {
        let d = self.device(device)
        d.command(Self.invalid).error.increment()
        d.error(error.code)
    }

    /// Times one store commit.
    func commit<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let start = ContinuousClock.now
        defer { sqliteCommit.record(ContinuousClock.now - start) }
        return try body()
    }

    /// The `command` label of a command that the driver refused as unknown or malformed: the
    /// name a client sent is not used, so no client can make series at will.
    static let invalid = "invalid"

    /// The `command` label: the command's name (`set_shutter`, a query's name, `setting`, `get`,
    /// a `/set/<attribute>` shortcut's attribute, `write` for `<topic>/write`), or ``invalid``.
    static func label(_ cmd: PendingCommand, error: CommandError?) -> String {
        if let code = error?.code, code == .unknownCommand || code == .invalidValue || code == .invalidJSON { return invalid }
        switch cmd.payload {
        case .write: return "write"
        case .internal: return "internal"
        case let .command(body):
            if let name = body["command"]?.stringValue { return name }
            if let name = body["query"]?.stringValue { return name }
            if body["setting"] != nil { return "setting" }
            if body["get"] != nil { return "get" }
            if body.count == 1, let key = body.keys.first { return key }
            return invalid
        }
    }
}

/// One device's handles (`device` label).
final class DeviceMetrics: Sendable {
    /// One command's handles (`device`, `command` labels; `status` for the counters).
    struct Command: Sendable {
        let ok: Counter
        let error: Counter
        let expired: Counter
        let duration: CoreMetrics.Timer
    }

    let id: String
    let factory: any MetricsFactory
    /// `gatt2mqtt_link_up`: 1 while the link is up.
    let linkUp: Gauge
    /// `gatt2mqtt_reconnects_total`: links made after the first one (each one after a loss).
    let reconnects: Counter
    /// `gatt2mqtt_connect_failures_total`: connect attempts that failed (away, refused, timed out).
    let connectFailures: Counter
    /// `gatt2mqtt_connect_duration_seconds`: successful connects, from the call to the link being
    /// usable (services resolved, notifications subscribed; pairing included), the wait for the
    /// adapter's connect gate excluded.
    let connectDuration: CoreMetrics.Timer
    /// `gatt2mqtt_pair_duration_seconds`: pairings (bonding) done by the bridge.
    let pairDuration: CoreMetrics.Timer
    /// `gatt2mqtt_notifications_total`
    let notifications: Counter
    /// `gatt2mqtt_decode_errors_total`: notifications (or reads) the driver could not decode.
    let decodeErrors: Counter
    /// `gatt2mqtt_queue_depth`: commands waiting (not counting the one in flight).
    let queueDepth: Gauge
    private let everUp = Atomic(false)
    private let commands = Mutex<[String: Command]>([:])
    private let errors = Mutex<[ErrorCode: Counter]>([:])

    init(device id: String, factory: any MetricsFactory) {
        self.id = id
        self.factory = factory
        let device = [("device", id)]
        linkUp = Gauge(label: BridgeMetrics.Name.linkUp, dimensions: device, factory: factory)
        reconnects = Counter(label: BridgeMetrics.Name.reconnects, dimensions: device, factory: factory)
        connectFailures = Counter(label: BridgeMetrics.Name.connectFailures, dimensions: device, factory: factory)
        connectDuration = CoreMetrics.Timer(label: BridgeMetrics.Name.connectDuration, dimensions: device, factory: factory)
        pairDuration = CoreMetrics.Timer(label: BridgeMetrics.Name.pairDuration, dimensions: device, factory: factory)
        notifications = Counter(label: BridgeMetrics.Name.notifications, dimensions: device, factory: factory)
        decodeErrors = Counter(label: BridgeMetrics.Name.decodeErrors, dimensions: device, factory: factory)
        queueDepth = Gauge(label: BridgeMetrics.Name.queueDepth, dimensions: device, factory: factory)
        linkUp.record(0)
        queueDepth.record(0)
    }

    /// The link is up; `pairing`: how long this connect's pairing took, if it paired.
    func linkUp(pairing: Duration?) {
        if everUp.exchange(true, ordering: .relaxed) { reconnects.increment() }
        linkUp.record(1)
        if let pairing { pairDuration.record(pairing) }
    }

    func linkDown() { linkUp.record(0) }

    func command(_ name: String) -> Command {
        commands.withLock { c in
            if let m = c[name] { return m }
            let labels = [("device", id), ("command", name)]
            func counter(_ status: String) -> Counter {
                Counter(label: BridgeMetrics.Name.commands, dimensions: labels + [("status", status)], factory: factory)
            }
            let m = Command(ok: counter("ok"), error: counter("error"), expired: counter("expired"),
                            duration: CoreMetrics.Timer(label: BridgeMetrics.Name.commandDuration, dimensions: labels, factory: factory))
            c[name] = m
            return m
        }
    }

    /// `gatt2mqtt_command_errors_total{device,code}`: error answers by their stable code.
    func error(_ code: ErrorCode) {
        errors.withLock { e in
            if let c = e[code] { return c }
            let c = Counter(label: BridgeMetrics.Name.commandErrors, dimensions: [("device", id), ("code", code.rawValue)], factory: factory)
            e[code] = c
            return c
        }.increment()
    }
}

extension CoreMetrics.Timer {
    func record(_ duration: Duration) {
        let c = duration.components
        recordNanoseconds(c.seconds * 1_000_000_000 + c.attoseconds / 1_000_000_000)
    }
}

extension Bridge {
    /// The bridge's metric handles (the runtime counts MQTT reconnects on them).
    public var metrics: BridgeMetrics { counters.metrics }
}

extension SessionOutput {
    var metrics: BridgeMetrics { counters.metrics }
}
