// metrics-bench: what the metrics add to one command, with swift-prometheus behind swift-metrics
// and with swift-metrics' no-op handlers (the endpoint off). See docs/benchmarks.md, "The metrics".
//   swift run -c release --package-path Benchmarks metrics-bench
//
// One GoPro setting at one in flight, as the bridge counts it (BridgeCore's BridgeMetrics and
// DeviceSession): the arrival instant; 4 session events (the command, the write's return, the
// answer, the status push), each followed by a queue-depth gauge set; 2 notifications counted;
// 3 timed SQLite commits (the outbox entry, the answer, the pushed state); the terminal response:
// the device's and the command's handles looked up (a lock and a dictionary each), the status
// counter, the latency histogram. BridgeMetrics is internal to BridgeCore, so its steps are
// repeated here with the same library calls.
import CoreMetrics
import Foundation
import Prometheus
import Synchronization

struct Handles: Sendable {
    let ok: CoreMetrics.Counter
    let duration: CoreMetrics.Timer
}

final class Device: Sendable {
    let queueDepth: CoreMetrics.Gauge
    let notifications: CoreMetrics.Counter
    let commands = Mutex<[String: Handles]>([:])
    let factory: any MetricsFactory
    init(_ factory: any MetricsFactory) {
        self.factory = factory
        queueDepth = CoreMetrics.Gauge(label: "gatt2mqtt_queue_depth", dimensions: [("device", "camera0")], factory: factory)
        notifications = CoreMetrics.Counter(label: "gatt2mqtt_notifications_total", dimensions: [("device", "camera0")], factory: factory)
    }
    func command(_ name: String) -> Handles {
        commands.withLock { c in
            if let h = c[name] { return h }
            let labels = [("device", "camera0"), ("command", name)]
            let h = Handles(ok: CoreMetrics.Counter(label: "gatt2mqtt_commands_total", dimensions: labels + [("status", "ok")], factory: factory),
                            duration: CoreMetrics.Timer(label: "gatt2mqtt_command_duration_seconds", dimensions: labels, factory: factory))
            c[name] = h
            return h
        }
    }
}

final class Bench: Sendable {
    let devices = Mutex<[String: Device]>([:])
    let commit: CoreMetrics.Timer
    let factory: any MetricsFactory
    init(_ factory: any MetricsFactory) {
        self.factory = factory
        commit = CoreMetrics.Timer(label: "gatt2mqtt_sqlite_commit_duration_seconds", factory: factory)
        for i in 0..<10 { _ = device("camera\(i)") }
    }
    func device(_ id: String) -> Device {
        devices.withLock { d in
            if let m = d[id] { return m }
            let m = Device(factory)
            d[id] = m
            return m
        }
    }
}

extension CoreMetrics.Timer {
    func record(_ d: Duration) {
        let c = d.components
        recordNanoseconds(c.seconds * 1_000_000_000 + c.attoseconds / 1_000_000_000)
    }
}

@inline(never) func blackHole<T>(_ value: T) { withExtendedLifetime(value) {} }

@inline(never)
func oneCommand(_ bench: Bench, _ device: Device, _ name: String) {
    let received = ContinuousClock.now
    for _ in 0..<4 { device.queueDepth.record(0) }
    for _ in 0..<2 { device.notifications.increment() }
    for _ in 0..<3 {
        let start = ContinuousClock.now
        blackHole(start)
        bench.commit.record(ContinuousClock.now - start)
    }
    let h = bench.device("camera0").command(name)
    h.ok.increment()
    h.duration.record(ContinuousClock.now - received)
}

func cpuSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
}

func measure(_ label: String, _ factory: any MetricsFactory) {
    let bench = Bench(factory)
    let device = bench.device("camera0")
    for _ in 0..<10_000 { oneCommand(bench, device, "setting") }
    let n = 2_000_000
    let cpu0 = cpuSeconds(), wall0 = ContinuousClock.now
    for _ in 0..<n { oneCommand(bench, device, "setting") }
    let wall = ContinuousClock.now - wall0, cpu = cpuSeconds() - cpu0
    let ns = Double(wall.components.seconds) * 1e9 + Double(wall.components.attoseconds) / 1e9
    print(String(format: "%@ %7.0f ns wall, %7.0f ns CPU per command", label.padding(toLength: 40, withPad: " ", startingAt: 0),
                 ns / Double(n), cpu * 1e9 / Double(n)))
}

let registry = PrometheusCollectorRegistry()
var prometheus = PrometheusMetricsFactory(registry: registry)
prometheus.durationHistogramBuckets = ["gatt2mqtt_command_duration_seconds": (0..<13).map { .milliseconds(5 << $0) },
                                       "gatt2mqtt_sqlite_commit_duration_seconds": (0..<12).map { .microseconds(50 << $0) }]
print("metrics-bench (\(ProcessInfo.processInfo.processorCount) cores): one command's metric updates")
for _ in 0..<3 {
    measure("no backend (swift-metrics no-op)", NOOPMetricsHandler.instance)
    measure("swift-prometheus", prometheus)
}
var out: [UInt8] = []
let scrapeStart = ContinuousClock.now
for _ in 0..<1000 { out.removeAll(keepingCapacity: true); registry.emit(into: &out) }
print("a scrape of this registry (\(out.count) bytes): \(((ContinuousClock.now - scrapeStart) / 1000))")
