import BridgeConfig
import BridgeCore
import CoreMetrics
import FlyingSocks
import Foundation
import Logging
import Prometheus
import Reactor
import ServiceLifecycle
import Synchronization

/// The Prometheus endpoint (`metrics.listen`, docs/metrics.md; `shared/spec/bridge.md` point 7):
/// `GET /metrics` answers the text exposition format of every metric of the process, any other
/// path 404. A `Service` of its own, listed before the bridge in the service group: it is made
/// first (it bootstraps swift-metrics, whose handles the bridge takes when it is made) and stops
/// after the bridge.
///
/// HTTP/1.1 over FlyingSocks (FlyingFox's socket layer, the ``HTTPListener`` it shares with the
/// web frontend): one request per connection, answered and closed. Not FlyingFox's HTTP server itself: it imports FoundationNetworking, which with the
/// static Swift runtime of the release build links libcurl and its 27 libraries into the bridge
/// (+4 MiB resident, +3.6 ms at every start, the metrics on or off; docs/metrics.md). The sockets
/// are served off the bridge's event loop (docs/architecture.md "Threads").
public struct MetricsServer: Service {
    public let settings: MetricsSettings
    let listener: HTTPListener
    let logger: Logger
    let handler: MetricsHandler
    /// The names a request may be for (421 for another: DNS rebinding).
    let hosts: HostAllowList

    /// At most 16 connections at once, 4 from one address; more are closed at once. A request
    /// within 10 s; a client that takes nothing of the answer for 10 s is dropped.
    static let limits = HTTPListener.Limits(maxConnections: 16, maxPerClient: 4)
    /// The longest request head read (request line and headers).
    static let maxHead = 8192

    /// Listens on `settings` (so an address in use stops the start with the reason) and
    /// bootstraps swift-metrics with the process' Prometheus registry if that was not done yet:
    /// make it before the bridge.
    public init(settings: MetricsSettings, logger: Logger) throws(StartupError) {
        try self.init(settings: settings, logger: logger, limits: Self.limits)
    }

    init(settings: MetricsSettings, logger: Logger, limits: HTTPListener.Limits) throws(StartupError) {
        self.settings = settings
        self.logger = logger
        listener = try HTTPListener(host: settings.host, port: settings.port, what: "metrics.listen \(settings.listen)", limits: limits)
        handler = MetricsHandler(registry: PrometheusBackend.registry, process: PrometheusBackend.process)
        hosts = HostAllowList(listen: settings.host, allowed: settings.allowedHosts)
    }

    /// Serves until the graceful shutdown (or cancellation), then closes the socket.
    public func run() async throws {
        logger.info("metrics endpoint on http://\(settings.listen)/metrics")
        try await listener.run { connection in await serve(connection) }
    }

    /// One connection: its request head (within the request timeout), one response.
    func serve(_ connection: AsyncSocket) async {
        guard let head = await listener.read(connection, { try await Self.readHead($0) }) else { return }
        let response = if let request = try? HTTPRequest.parse(head: head), !hosts.allows(host: request.header("host")) {
            MetricsHandler.Response(status: 421, reason: "Misdirected Request", headers: [("Content-Type", "text/plain; charset=utf-8")],
                                    body: Array("this endpoint does not answer to the name '\(request.header("host") ?? "")': add it to metrics.allowed_hosts\n".utf8))
        } else {
            handler.response(to: head)
        }
        if await !listener.write(connection, response.bytes) { logger.debug("metrics: the answer was not sent") }
    }

    /// Reads up to the blank line that ends a request head (at most ``maxHead`` bytes: a longer
    /// head is returned as it is and refused as malformed).
    static func readHead(_ connection: AsyncSocket) async throws -> [UInt8] {
        var head: [UInt8] = []
        while head.count < maxHead {
            head += try await connection.read(atMost: maxHead - head.count)
            if let end = MetricsHandler.endOfHead(head) { return Array(head[..<end]) }
        }
        return head
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

/// The answers: `GET /metrics` (or `HEAD`) → 200 and the registry in the text exposition format
/// (the process figures read first); another method on it → 405; another path → 404; a request
/// line that is not HTTP/1.x → 400.
struct MetricsHandler: Sendable {
    let registry: PrometheusCollectorRegistry
    let process: ProcessMetrics

    struct Response {
        var status: Int
        var reason: String
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        /// For `HEAD`: the headers of the `GET`, no body.
        var omitBody = false

        var bytes: [UInt8] {
            var out = Array("HTTP/1.1 \(status) \(reason)\r\n".utf8)
            for (name, value) in headers + [("Content-Length", "\(body.count)"), ("Connection", "close")] {
                out += Array("\(name): \(value)\r\n".utf8)
            }
            out += Array("\r\n".utf8)
            if !omitBody { out += body }
            return out
        }
    }

    static let textFormat = "text/plain; version=0.0.4; charset=utf-8"

    func response(to head: [UInt8]) -> Response {
        guard let (method, path) = Self.requestLine(head) else {
            return Response(status: 400, reason: "Bad Request", headers: [("Content-Type", "text/plain; charset=utf-8")],
                            body: Array("expected an HTTP/1.x request\n".utf8))
        }
        guard path == "/metrics" else {
            return Response(status: 404, reason: "Not Found", headers: [("Content-Type", "text/plain; charset=utf-8")],
                            body: Array("not found: the metrics are at /metrics\n".utf8))
        }
        guard method == "GET" || method == "HEAD" else {
            return Response(status: 405, reason: "Method Not Allowed", headers: [("Allow", "GET, HEAD")])
        }
        process.update()
        var body: [UInt8] = []
        body.reserveCapacity(16 * 1024)
        registry.emit(into: &body)
        return Response(status: 200, reason: "OK", headers: [("Content-Type", Self.textFormat)], body: body, omitBody: method == "HEAD")
    }

    /// `METHOD SP target SP HTTP/1.x` → the method and the target's path (query cut off).
    static func requestLine(_ head: [UInt8]) -> (method: String, path: String)? {
        let line = head.split(separator: UInt8(ascii: "\r"), maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[1].first == UInt8(ascii: "/"),
              String(decoding: parts[2], as: UTF8.self).hasPrefix("HTTP/1.") else { return nil }
        let target = parts[1].split(separator: UInt8(ascii: "?"), maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        return (String(decoding: parts[0], as: UTF8.self), String(decoding: target, as: UTF8.self))
    }

    /// The index just past the `CRLF CRLF` that ends a request head, if it is there.
    static func endOfHead(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 3..<bytes.count where bytes[i] == 10 && bytes[i - 1] == 13 && bytes[i - 2] == 10 && bytes[i - 3] == 13 {
            return i + 1
        }
        return nil
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

/// This process' figures from `/proc/self/stat` and `/proc/self/statm` (proc(5)), and the clocks.
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

    /// When the system booted, in seconds since the Unix epoch: the wall clock less the time
    /// since boot (`CLOCK_BOOTTIME`, which `starttime` counts from). Not `btime` of `/proc/stat`:
    /// the systemd unit's `ProcSubset=pid` hides it (config/gatt2mqtt.service).
    static func bootTime() -> Double? {
        var real = timespec(), boot = timespec()
        guard clock_gettime(CLOCK_REALTIME, &real) == 0, clock_gettime(CLOCK_BOOTTIME, &boot) == 0 else { return nil }
        return (Double(real.tv_sec) - Double(boot.tv_sec)) + (Double(real.tv_nsec) - Double(boot.tv_nsec)) / 1e9
    }

    /// The second field of `/proc/self/statm` (resident pages) × the page size.
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
