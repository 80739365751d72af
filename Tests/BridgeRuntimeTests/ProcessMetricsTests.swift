import Prometheus
import Testing
@testable import BridgeRuntime

/// The process figures of the metrics endpoint, read from /proc (proc(5)).
@Suite struct ProcessMetricsTests {
    /// Fields are counted after the last `)`: a process name may hold spaces and parentheses.
    @Test func statLineWithAnAwkwardName() throws {
        let line = "4242 (gatt (2) mqtt) S 1 4242 4242 0 -1 4194560 1939 0 0 0 250 75 0 0 20 0 9 0 1500 0 0 0"
        let stat = try #require(ProcessStat.parse(stat: line, bootTime: 1_700_000_000, ticksPerSecond: 100))
        #expect(stat.cpuSeconds == 3.25)  // (250 + 75) / 100
        #expect(stat.startTime == 1_700_000_015)  // boot + 1500 / 100
        #expect(ProcessStat.parse(stat: "4242 (short) S 1 2", bootTime: 0, ticksPerSecond: 100) == nil)
        #expect(ProcessStat.parse(stat: line, bootTime: nil, ticksPerSecond: 100)?.startTime == nil)
    }

    /// The samples of a text exposition: name → value.
    static func samples(_ registry: PrometheusCollectorRegistry) -> [String: Double] {
        var out: [String: Double] = [:]
        for line in registry.emitToString().split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let v = Double(parts[1]) { out[String(parts[0])] = v }
        }
        return out
    }

    /// This test process' own figures, as a scrape exposes them (a registry of the test's own: no
    /// global bootstrap).
    @Test func ownFiguresInTheExposition() throws {
        let registry = PrometheusCollectorRegistry()
        let process = ProcessMetrics(registry: registry)
        var burn = 0.0
        for i in 0..<2_000_000 { burn += Double(i).squareRoot() }
        #expect(burn > 0)
        process.update()
        let first = Self.samples(registry)
        #expect((first["process_resident_memory_bytes"] ?? 0) > 1_000_000)
        #expect((first["process_cpu_seconds_total"] ?? 0) > 0)
        #expect((first["process_start_time_seconds"] ?? 0) > 1_600_000_000)
        // The counter follows the process' CPU time: it only moves up.
        process.update()
        #expect((Self.samples(registry)["process_cpu_seconds_total"] ?? 0) >= first["process_cpu_seconds_total"] ?? 0)
    }
}
