import BridgeConfig
import BridgeCore
import CoreMetrics
import FlyingFox
import FlyingSocks
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization

/// The Prometheus endpoint (`metrics.listen`, docs/metrics.md; `shared/spec/bridge.md` point 7):
/// `GET /metrics` answers the text exposition format of every metric of the process, any other
/// path 404. A `Service` of its own, so a listen address already in use stops the start with a
/// clear error, and a graceful shutdown stops it after the bridge (list it before the bridge).
///
/// Its sockets are served by FlyingFox on threads of its own (an `epoll_wait` thread and Swift's
/// global executor), not on the bridge's event loop (docs/architecture.md "Threads").
public struct MetricsServer: Service {
    public let settings: MetricsSettings
    let server: HTTPServer
    let logger: Logger

    /// Makes the server (it listens in `run()`), bootstrapping swift-metrics with the process'
    /// Prometheus registry if that was not done yet: make it before the bridge, whose metric
    /// handles are made when it is.
    public init(settings: MetricsSettings, logger: Logger) throws(StartupError) {
        self.settings = settings
        self.logger = logger
        let address: any SocketAddress
        do {
            address = settings.host.contains(":")
                ? try sockaddr_in6.inet6(ip6: settings.host, port: UInt16(settings.port))
                : try sockaddr_in.inet(ip4: settings.host, port: UInt16(settings.port))
        } catch {
            throw StartupError("metrics.listen \(settings.listen): not an IP address and port")
        }
        let handler = MetricsHandler(registry: PrometheusBackend.registry, process: PrometheusBackend.process)
        server = HTTPServer(address: address, timeout: 5, logger: FlyingFoxLog(logger: logger), handler: handler)
    }

    /// Serves until the graceful shutdown (or cancellation). Throws a ``StartupError`` when it
    /// cannot listen (the address is in use, or not this machine's).
    public func run() async throws {
        logger.info("metrics endpoint on http://\(settings.listen)/metrics")
        do {
            try await cancelWhenGracefulShutdown { try await server.run() }
        } catch {
            if Task.isCancelled || Task.isShuttingDownGracefully { return }
            throw StartupError("metrics.listen \(settings.listen): \(Self.describe(error))")
        }
    }

    static func describe(_ error: any Error) -> String {
        if case let .failed(type, _, message) = error as? SocketError { return "\(type.lowercased()) failed: \(message)" }
        return "\(error)"
    }
}

/// The process' Prometheus registry. swift-metrics may be bootstrapped once per process: the
/// first use of ``registry`` does it, with the bridge's histogram buckets.
enum PrometheusBackend {
    static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets = BridgeMetrics.histogramBuckets
        MetricsSystem.bootstrap(factory)
        return registry
    }()

    static let process = ProcessMetrics(registry: registry)
}

/// `GET /metrics` → the registry in the text exposition format (process figures read first);
/// another method on it 405, any other path 404.
struct MetricsHandler: HTTPHandler {
    let registry: PrometheusCollectorRegistry
    let process: ProcessMetrics

    func handleRequest(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard request.path == "/metrics" else {
            return HTTPResponse(statusCode: .notFound, headers: HTTPHeaders([.contentType: "text/plain; charset=utf-8"]),
                                body: Data("not found: the metrics are at /metrics\n".utf8))
        }
        guard request.method == .GET || request.method == .HEAD else {
            return HTTPResponse(statusCode: .methodNotAllowed, headers: HTTPHeaders([HTTPHeader("Allow"): "GET, HEAD"]))
        }
        process.update()
        var buffer: [UInt8] = []
        buffer.reserveCapacity(16 * 1024)
        registry.emit(into: &buffer)
        return HTTPResponse(statusCode: .ok, headers: HTTPHeaders([.contentType: "text/plain; version=0.0.4; charset=utf-8"]),
                           body: request.method == .HEAD ? Data() : Data(buffer))
    }
}

/// `process_resident_memory_bytes`, `process_cpu_seconds_total` and `process_start_time_seconds`,
/// read from `/proc/self` when scraped (Linux; elsewhere they stay 0).
final class ProcessMetrics: Sendable {
    let residentMemory: Prometheus.Gauge
    let cpuSeconds: Prometheus.Counter
    let startTime: Prometheus.Gauge
    /// The CPU time already added to the counter (it only counts up, by the difference).
    private let counted = Mutex<Double>(0)

    init(registry: PrometheusCollectorRegistry) {
        residentMemory = registry.makeGauge(descriptor: MetricNameDescriptor(
            namespace: "process", metricName: "resident_memory", unitName: "bytes", helpText: "Resident memory size in bytes."))
        cpuSeconds = registry.makeCounter(descriptor: MetricNameDescriptor(
            namespace: "process", metricName: "cpu_seconds", unitName: "total", helpText: "Total user and system CPU time spent in seconds."))
        startTime = registry.makeGauge(descriptor: MetricNameDescriptor(
            namespace: "process", metricName: "start_time", unitName: "seconds",
            helpText: "Start time of the process since the Unix epoch in seconds."))
        if let stat = ProcessStat.read(), let start = stat.startTime { startTime.set(to: start) }
    }

    func update() {
        if let rss = ProcessStat.residentBytes() { residentMemory.set(to: Double(rss)) }
        guard let cpu = ProcessStat.read()?.cpuSeconds else { return }
        counted.withLock { counted in
            if cpu > counted {
                cpuSeconds.increment(by: cpu - counted)
                counted = cpu
            }
        }
    }
}

/// This process' figures from `/proc/self/stat`, `/proc/self/statm` and `/proc/stat` (proc(5)).
struct ProcessStat {
    /// User + system time, in seconds.
    var cpuSeconds: Double
    /// Since the Unix epoch, in seconds (nil when the boot time is unknown).
    var startTime: Double?

    static func read() -> ProcessStat? {
        guard let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8) else { return nil }
        return parse(stat: text, bootTime: bootTime(), ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// `pid (comm) state ppid …`: the name may hold spaces and parentheses, so fields are counted
    /// after the last `)`: utime, stime and starttime are fields 14, 15 and 22.
    static func parse(stat: String, bootTime: Double?, ticksPerSecond: Double) -> ProcessStat? {
        guard let close = stat.lastIndex(of: ")"), ticksPerSecond > 0 else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        func field(_ n: Int) -> Double? { n - 3 < fields.count ? Double(fields[n - 3]) : nil }
        guard let utime = field(14), let stime = field(15), let start = field(22) else { return nil }
        return ProcessStat(cpuSeconds: (utime + stime) / ticksPerSecond, startTime: bootTime.map { $0 + start / ticksPerSecond })
    }

    /// `btime` of `/proc/stat`: when the system booted, in seconds since the Unix epoch.
    static func bootTime() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingPrefix(" "))
        }
        return nil
    }

    /// The second field of `/proc/self/statm` (resident pages) × the page size.
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// FlyingFox's log lines at `debug` (its connection errors and its stop are not the bridge's
/// concern; a failure to listen is thrown by ``MetricsServer/run()``).
struct FlyingFoxLog: FlyingSocks.Logging {
    let logger: Logger

    func logDebug(_ debug: @autoclosure () -> String) { logger.trace("\(debug())") }
    func logInfo(_ info: @autoclosure () -> String) { logger.trace("\(info())") }
    func logWarning(_ warning: @autoclosure () -> String) { logger.debug("\(warning())") }
    func logError(_ error: @autoclosure () -> String) { logger.debug("\(error())") }
    func logCritical(_ critical: @autoclosure () -> String) { logger.debug("\(critical())") }
}
